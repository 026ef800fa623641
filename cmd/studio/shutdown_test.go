package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
)

// partsAfterRequests is the server's parts as serveUntil stops them: it
// notes whether the request in flight had finished by then.
type partsAfterRequests struct {
	finished *atomic.Bool
	sawIt    chan bool
}

func (p partsAfterRequests) Drain() {}

func (p partsAfterRequests) Shutdown(context.Context) error {
	p.sawIt <- p.finished.Load()
	return nil
}

// TestServeStopsRequestsBeforeParts: on a stop, serve lets the requests in
// flight finish, answered, before it stops the server's parts (sessions,
// recording, pushes) under them.
func TestServeStopsRequestsBeforeParts(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	httpSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "answered")
		finished.Store(true)
	})}
	stopping := make(chan struct{})
	httpSrv.RegisterOnShutdown(func() { close(stopping) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	parts := partsAfterRequests{finished: &finished, sawIt: make(chan bool, 1)}
	exited := make(chan int, 1)
	go func() {
		exited <- serveUntil(ctx, httpSrv, ln, parts, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	}()
	answer := make(chan string, 1)
	go func() {
		res, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answer <- string(b)
	}()
	<-entered
	stop()     // SIGTERM, as serve sees it
	<-stopping // the HTTP server takes no more requests…
	close(release)
	if got := <-answer; got != "answered" {
		t.Errorf("the request in flight got %q, want its answer", got)
	}
	if !<-parts.sawIt {
		t.Error("the server's parts were stopped while a request was still in flight")
	}
	if code := <-exited; code != exitOK {
		t.Errorf("exit %d", code)
	}
}
