package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/otlp/otlptest"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/push"
)

// waitSpans waits until the receiver holds n spans of a session.
func waitSpans(t *testing.T, r *otlptest.Receiver, id string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.SessionSpans(id) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := r.SessionSpans(id); got != n {
		t.Fatalf("the receiver holds %d spans of session %s, want %d", got, id, n)
	}
}

func TestPushEachSessionAsItEnds(t *testing.T) {
	rcv := otlptest.New(t)
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p, err := otlp.NewPusher(otlp.PushConfig{Endpoint: rcv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{DB: d, OTLP: &push.Config{Pusher: p}})
	defer srv.Shutdown(context.Background())
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
			err := d.Read(context.Background(), created.ID, func(r db.Reader) error {
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
		waitSpans(t, rcv, created.ID, want)
		// The push is remembered once its answer came back, which is after
		// the receiver has the spans: wait for the row.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if seq, _ := d.PushedSeq(context.Background(), created.ID, p.Endpoint()); seq != 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the store does not remember the push")
			}
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
		waitSpans(t, rcv, "left", 1) // the main agent's span, failed
	})
}

func spanCount(r db.Reader) (int, error) {
	var b strings.Builder
	if _, err := otlp.WriteJSON(&b, r, otlp.Options{}); err != nil {
		return 0, err
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(b.String()))
	return td.SpanCount(), err
}

// Sessions the studio did not run itself, received over /v1/traces and
// recorded through /v1/chat/completions, are pushed when they end too.
func TestPushReceivedAndRecordedSessions(t *testing.T) {
	rcv := otlptest.New(t)
	p, err := otlp.NewPusher(otlp.PushConfig{Endpoint: rcv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	var seen authSeen
	up, err := proxy.NewHTTPUpstream(seen.upstream(t).URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := receivingStudio(t, Config{OTLP: &push.Config{Pusher: p}, Upstream: up, ProxyDoneAfter: 50 * time.Millisecond})
	// pushedWhole waits for the session to end, then for the collector to
	// hold every span its export holds.
	pushedWhole := func(t *testing.T, id string) {
		t.Helper()
		s.waitDone(id)
		var want int
		if err := s.db.Read(context.Background(), id, func(r db.Reader) error {
			var err error
			want, err = spanCount(r)
			return err
		}); err != nil || want == 0 {
			t.Fatalf("the session's export: %d spans, %v", want, err)
		}
		waitSpans(t, rcv, id, want)
	}

	var received string
	t.Run("a trace received over /v1/traces", func(t *testing.T) {
		pb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(recorded(t))
		if res, body := s.otlp("application/x-protobuf", "", pb, ""); res.StatusCode != http.StatusOK {
			t.Fatalf("receive: %d %s", res.StatusCode, body)
		}
		received = s.onlySession().ID
		pushedWhole(t, received)
	})
	t.Run("a call recorded through /v1/chat/completions", func(t *testing.T) {
		c := openAIClient(s.ts.URL, "sk-user", nil)
		if _, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-4.1-mini",
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Say hello."}}}); err != nil {
			t.Fatal(err)
		}
		list, err := s.db.Sessions(context.Background(), 0)
		if err != nil || len(list) != 2 {
			t.Fatalf("sessions: %v %v", list, err)
		}
		for _, sess := range list {
			if sess.ID == received {
				continue
			}
			pushedWhole(t, sess.ID)
		}
	})
}
