package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/server"
	"github.com/delegationstudio/studio/internal/tokens"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("serve", "studio [serve] [--addr HOST:PORT] [--db FILE] [--token TOKEN] [--model-url URL --model NAME]",
		`Serves the web studio: sessions, lessons, the team editor, compare, exports.
It listens on 127.0.0.1 unless told otherwise; any other address needs --token.
GET /healthz says whether the database is reachable; GET /metrics gives the
studio's figures in the Prometheus text format.`, stdout, stderr)
	addr := c.String("addr", "127.0.0.1:7788", "127.0.0.1:7788", "listen on this `host:port`; beyond loopback it needs --token", nil)
	dbPath := dbFlag(c)
	token := c.String("token", "", "", "access `token` every request must carry", nil)
	modelURL := c.String("model-url", "", "", "an OpenAI-compatible endpoint (`URL`) new sessions may run against; empty: $OPENAI_BASE_URL, then OpenAI's", nil)
	modelName := c.String("model", "", "", "the model `name` to call there; the key comes from $OPENAI_API_KEY", nil)
	noStream := c.Bool("no-stream", "sessions on that endpoint wait for each whole answer instead of streaming it", nil)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	if err := server.CheckAddr(*addr, *token); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The first page that counts tokens must not wait for a tokenizer.
	go tokens.Warm()
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
		if *modelURL == "" {
			*modelURL = openai.BaseURLFromEnv()
		}
		// A missing key or a bad URL stops the studio now, not at the
		// first session.
		if _, err := openai.New(openai.Config{BaseURL: *modelURL, Model: *modelName, APIKey: openai.KeyFromEnv("")}); err != nil {
			return c.fail("%v", err)
		}
		endpoints = append(endpoints, server.Endpoint{BaseURL: *modelURL, Model: *modelName, NoStream: *noStream})
	} else if c.given("model-url") == "flag" {
		return c.fail("--model-url needs --model NAME too (or $STUDIO_MODEL)")
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
