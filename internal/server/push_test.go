package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
)

// traceReceiver is an OTLP/HTTP endpoint that keeps the spans of each
// session it was sent, decoded as the Collector decodes them.
type traceReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans map[string]int // by the resource's session.id
}

func newTraceReceiver(t *testing.T) *traceReceiver {
	r := &traceReceiver{spans: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		exp := ptraceotlp.NewExportRequest()
		if err := exp.UnmarshalProto(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		rss := exp.Traces().ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			id, _ := rss.At(i).Resource().Attributes().Get("session.id")
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				r.spans[id.Str()] += rss.At(i).ScopeSpans().At(j).Spans().Len()
			}
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *traceReceiver) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spans[id]
}

// waitSpans waits until the receiver holds n spans of a session.
func (r *traceReceiver) waitSpans(t *testing.T, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.count(id) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.count(id); got != n {
		t.Fatalf("the receiver holds %d spans of session %s, want %d", got, id, n)
	}
}

func TestPushEachSessionAsItEnds(t *testing.T) {
	rcv := newTraceReceiver(t)
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := otlp.NewPusher(otlp.PushConfig{Endpoint: rcv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{DB: d, OTLP: &OTLPPush{Pusher: p}})
	defer srv.Shutdown()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	t.Run("a session run here is pushed when it ends, whole", func(t *testing.T) {
		doc, err := os.ReadFile("../../examples/order-number.json")
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.Post(ts.URL+"/api/sessions", "application/json", strings.NewReader(string(doc)))
		if err != nil {
			t.Fatal(err)
		}
		var created struct{ ID string }
		json.NewDecoder(res.Body).Decode(&created)
		res.Body.Close()
		// The spans the same session exports: what the receiver must get.
		want := 0
		for want == 0 {
			err := d.Read(context.Background(), created.ID, func(r *db.Reader) error {
				if r.Session().Status == delegation.StatusRunning {
					return nil
				}
				var err error
				want, err = spanCount(r)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		rcv.waitSpans(t, created.ID, want)
		if seq, _ := d.PushedSeq(context.Background(), created.ID, p.Endpoint()); seq == 0 {
			t.Fatal("the store does not remember the push")
		}
	})

	t.Run("a session a stopped studio left running is pushed when recovery ends it", func(t *testing.T) {
		ctx := context.Background()
		at := time.Now()
		if err := d.CreateSession(ctx, &db.Session{ID: "left", Name: "left", Scenario: []byte(`{}`), Owner: "gone",
			LeaseUntil: at.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
		events := []delegation.Event{
			{Seq: 1, Type: delegation.EventSessionStarted, At: at, Payload: delegation.SessionStarted{SessionID: "left", Name: "left", Prompt: "p"}},
			{Seq: 2, Type: delegation.EventAgentStarted, AgentID: "main", At: at, Payload: delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "main", Name: "main"}}},
		}
		for i := range events {
			if err := events[i].Encode(); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.AppendEvents(ctx, "left", events); err != nil {
			t.Fatal(err)
		}
		if n, err := srv.Recover(ctx); err != nil || n != 1 {
			t.Fatalf("recovered %d: %v", n, err)
		}
		rcv.waitSpans(t, "left", 1) // the main agent's span, failed
	})
}

func spanCount(r *db.Reader) (int, error) {
	var b strings.Builder
	if _, err := otlp.WriteJSON(&b, r, otlp.Options{}); err != nil {
		return 0, err
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(b.String()))
	return td.SpanCount(), err
}
