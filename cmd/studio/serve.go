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

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/server"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:7788", "listen on this `host:port`; beyond loopback it needs --token")
	dbPath := fs.String("db", defaultDB(), "the database `file` (default $STUDIO_DB, then ./studio.db)")
	token := fs.String("token", os.Getenv("STUDIO_TOKEN"), "access `token` every request must carry (default $STUDIO_TOKEN)")
	modelURL := fs.String("model-url", os.Getenv("STUDIO_MODEL_URL"), "an OpenAI-compatible endpoint (`URL`) new sessions may run against (default $STUDIO_MODEL_URL; empty: OpenAI's)")
	modelName := fs.String("model", os.Getenv("STUDIO_MODEL"), "the model `name` to call there (default $STUDIO_MODEL); the key comes from $OPENAI_API_KEY")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: studio [serve] [--addr 127.0.0.1:7788] [--db FILE] [--token TOKEN] [--model-url URL --model NAME]\n\nServes the web studio.\n\nFlags:\n")
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
	// One server per file: a second one stops here, having touched nothing.
	lock, err := db.LockServe(*dbPath)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	defer lock.Release()
	d, ok := openStore(ctx, *dbPath, stderr)
	if !ok {
		return exitFailed
	}
	defer d.Close()

	var endpoints []server.Endpoint
	if *modelName != "" {
		endpoints = append(endpoints, server.Endpoint{BaseURL: *modelURL, Model: *modelName})
	} else if *modelURL != "" {
		fmt.Fprintln(stderr, "studio: --model-url needs --model NAME too")
		return exitUsage
	}
	srv := server.New(server.Config{DB: d, Logger: log, Token: *token, Endpoints: endpoints})
	if n, err := srv.Recover(ctx); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	} else if n > 0 {
		log.Info("sessions left running by a stopped studio are now interrupted", "count", n)
	}
	// Sessions a `studio run --db` left behind when it was killed are ended
	// once their lease runs out, while this server runs.
	go srv.KeepRecovering(ctx)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "Delegation Studio on http://%s (sessions in %s)\n", ln.Addr(), *dbPath)
	for _, e := range endpoints {
		key := "no key in OPENAI_API_KEY"
		if os.Getenv("OPENAI_API_KEY") != "" {
			key = "key from OPENAI_API_KEY"
		}
		fmt.Fprintf(stdout, "Model endpoint: %s (%s)\n", e.Label(), key)
	}

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
