package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// bigSession stores a session of about `messages` messages: a main agent's
// tool-call turns, then a fork child, so the page has a delegation to show.
func bigSession(b *testing.B, d *db.DB, srv *Server, messages int) string {
	b.Helper()
	sc, err := scenario.Parse(benchdata.Messages(messages))
	if err != nil {
		b.Fatal(err)
	}
	id, res, err := srv.Runner().Run(context.Background(), sc)
	if err != nil || res.Status != delegation.StatusDone {
		b.Fatalf("run: %v %+v", err, res)
	}
	return id
}

func benchmarkSessionPage(b *testing.B, messages int) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d})
	defer srv.Shutdown()
	id := bigSession(b, d, srv, messages)
	h := srv.Handler()
	var size int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/sessions/"+id, nil))
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
	b.ReportMetric(float64(size), "page-bytes")
}

// BenchmarkSessionPage10k: the server renders a 10,000-message session's
// page. Target: ≤ 300 ms.
func BenchmarkSessionPage10k(b *testing.B) { benchmarkSessionPage(b, 10_000) }

// BenchmarkEnginePersistedBroadcast is the 200 + 50 step scenario with every
// event stored and broadcast to a live viewer (patches rendered), per model
// call, compared with BenchmarkEngine200Plus50 in internal/session.
func BenchmarkEnginePersistedBroadcast(b *testing.B) {
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := New(Config{DB: d})
	defer srv.Shutdown()
	sc := longScenario(b, 200, 50)
	sc.Counter.Count("warm up")
	n := 0
	srv.runner.NewID = func() string { n++; return fmt.Sprintf("bench-%d", n) }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub := srv.hub.Subscribe(fmt.Sprintf("bench-%d", n+1))
		done := make(chan int)
		go func() {
			got := 0
			for m := range sub.C() { // a batch of events, one a line
				got += bytes.Count(m.Data, []byte("\n")) + 1
			}
			done <- got
		}()
		_, res, err := srv.runner.Run(context.Background(), sc)
		if err != nil || res.Status != delegation.StatusDone {
			b.Fatalf("run: %v %+v", err, res)
		}
		sub.Close()
		if got := <-done; got < 1000 {
			b.Fatalf("the viewer got %d events", got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*251), "ns/model-call")
}

func longScenario(tb testing.TB, mainSteps, childSteps int) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Parse(benchdata.LongScenario(mainSteps, childSteps))
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}
