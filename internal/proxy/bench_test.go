package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/tokens"
)

// instantUpstream answers every request at once, with a whole answer, in
// the process: what is measured is the endpoint's own work.
type instantUpstream struct{ answer []byte }

func (u *instantUpstream) Chat(_ context.Context, _ *proxy.Exchange, out *proxy.Reply) {
	out.Whole(http.StatusOK, nil, u.answer)
}
func (*instantUpstream) Models(context.Context, http.Header, string, http.ResponseWriter) {}
func (*instantUpstream) String() string                                                   { return "instant" }

// longAgentBodies are the n requests of one agent that calls its model n
// times, each request holding the whole conversation so far, as every
// framework sends it: O(n²) messages arrive for 2n distinct ones.
func longAgentBodies(n int) ([][]byte, int) {
	msgs := []map[string]any{{"role": "system", "content": "You work through lists."},
		{"role": "user", "content": "Work through the list, one item per step."}}
	var bodies [][]byte
	received := 0
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		bodies = append(bodies, b)
		received += len(msgs) - 1
		msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("Step %d: item %d is done; the next one needs a closer look.", i, i)},
			map[string]any{"role": "user", "content": "Go on."})
	}
	return bodies, received
}

// BenchmarkProxyLongAgent: recording a conversation costs in proportion to
// what arrives (each request's whole input: reading it, placing it, storing
// what is new), not more. It reports the cost per received message at 400
// calls against 50 (x8), and checks that 400 calls store 800 messages.
func BenchmarkProxyLongAgent(b *testing.B) {
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		b.Fatal(err)
	}
	run := func(bodies [][]byte) (time.Duration, int) {
		store, up := &memStore{}, &instantUpstream{}
		p := proxy.New(proxy.Config{Upstream: up, Store: store, Counter: counter, Tokenizer: tokens.Default,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		var elapsed time.Duration
		for i, body := range bodies {
			up.answer, _ = json.Marshal(completion(map[string]any{"role": "assistant",
				"content": fmt.Sprintf("Step %d: item %d is done; the next one needs a closer look.", i, i)}, "stop"))
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
			start := time.Now()
			p.ServeChat(httptest.NewRecorder(), req)
			elapsed += time.Since(start)
		}
		s := store.all()
		if len(s) != 1 {
			b.Fatalf("%d sessions for one conversation", len(s))
		}
		stored := 0
		for _, ev := range s[0].events {
			if ev.Type == delegation.EventMessageAdded {
				stored++
			}
		}
		return elapsed, stored
	}
	small, smallN := longAgentBodies(50)
	big, bigN := longAgentBodies(400)
	// The fastest of the runs of each size: on a shared machine the others
	// measure the neighbours too.
	ts, tb := time.Duration(1<<62), time.Duration(1<<62)
	for i := 0; i < b.N; i++ {
		d, stored := run(small)
		if stored != 2*50 {
			b.Fatalf("%d messages stored for 50 calls, want 100: each once", stored)
		}
		ts = min(ts, d)
		d, stored = run(big)
		if stored != 2*400 {
			b.Fatalf("%d messages stored for 400 calls, want 800: each once", stored)
		}
		tb = min(tb, d)
	}
	perSmall := float64(ts) / float64(smallN)
	perBig := float64(tb) / float64(bigN)
	b.ReportMetric(perBig, "ns/received-message")
	b.ReportMetric(perBig/perSmall, "x8/x1")
}
