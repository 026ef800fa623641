package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/delegationstudio/studio/internal/server"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7788", "listen on this `host:port`; beyond loopback it needs --token")
	dbPath := fs.String("db", defaultDB(), "the database `file` (default $STUDIO_DB, then ./studio.db)")
	token := fs.String("token", os.Getenv("STUDIO_TOKEN"), "access `token` every request must carry (default $STUDIO_TOKEN)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio [serve] [--addr 127.0.0.1:7788] [--db FILE] [--token TOKEN]\n\nServes the web studio.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	if err := server.CheckAddr(*addr, *token); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	d, ok := openStore(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()

	srv := server.New(server.Config{DB: d, Logger: log, Token: *token, Endpoints: endpointsFromEnv()})
	if n, err := srv.Recover(ctx); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	} else if n > 0 {
		log.Info("sessions left running by the last stop are now interrupted", "count", n)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "Delegation Studio on http://%s (sessions in %s)\n", ln.Addr(), *dbPath)

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
	case <-ctx.Done():
		log.Info("stopping: running sessions end as interrupted")
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown()
	_ = httpSrv.Shutdown(shutdown)
	return exitOK
}

// endpointsFromEnv describes the model endpoint the environment configures,
// without its key.
func endpointsFromEnv() []string {
	var out []string
	if os.Getenv("OPENAI_API_KEY") != "" {
		base := os.Getenv("OPENAI_BASE_URL")
		if base == "" {
			base = "https://api.openai.com/v1"
		}
		out = append(out, base+" (key from OPENAI_API_KEY)")
	}
	return out
}
