package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/proxy"
)

// A session recorded through /v1/messages on an Anthropic model whose
// usage reports cache writes shows, on each call, the tokens written and
// what they cost at the cache-write surcharge (the call's own Cost) on its
// waterfall bar, and, where the child's cost is told, the part of it that
// went to writing.
func TestSessionPageShowsCacheWrites(t *testing.T) {
	const task = "Find the port."
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		var blocks []any
		stop := "end_turn"
		switch first := body.Messages[0].Content; {
		case first == task:
			blocks = []any{map[string]any{"type": "text", "text": "config.py:3."}}
		case len(body.Messages) == 1:
			stop = "tool_use"
			blocks = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "subagent", "input": map[string]string{"task": task}}}
		default:
			blocks = []any{map[string]any{"type": "text", "text": "In config.py."}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant",
			"model": "claude-sonnet-4-20250514", "content": blocks, "stop_reason": stop,
			"usage": map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0}})
	}))
	t.Cleanup(up.Close)
	anth, err := proxy.NewAnthropicUpstream(up.URL, "sk-ant-op")
	if err != nil {
		t.Fatal(err)
	}
	s := receivingStudio(t, Config{Upstream: anth, TaskTool: "subagent", ProxyDoneAfter: 50 * time.Millisecond})
	hdr := map[string]string{"Content-Type": "application/json", "Anthropic-Version": "2023-06-01"}
	tools := `[{"name":"subagent","description":"Delegate.","input_schema":{"type":"object","properties":{"task":{"type":"string"}}}}]`
	for _, msgs := range []string{
		`[{"role":"user","content":"Where is the port read?"}]`,
		`[{"role":"user","content":"` + task + `"}]`,
		`[{"role":"user","content":"Where is the port read?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"subagent","input":{"task":"` + task + `"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"config.py:3."}]}]`,
	} {
		body := `{"model":"claude-sonnet-4-20250514","max_tokens":100,"tools":` + tools + `,"messages":` + msgs + `}`
		if res, b := s.raw("POST", "/v1/messages", hdr, body); res.StatusCode != 200 {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
	}
	sess := s.onlySession()
	s.waitDone(sess.ID)
	// 2,000 tokens written at claude-sonnet-4's $3.75 a million: $0.0075.
	const perCall = "$0.00750"
	tr, err := s.db.Trace(context.Background(), sess.ID)
	if err != nil || len(tr.Agents) != 2 {
		t.Fatalf("agents: %v %v (main and its child)", s.agents(sess.ID), err)
	}
	_, doc := s.get("/sessions/" + sess.ID + "?agent=" + tr.Agents[1].ID)
	// Each call's bar says what it wrote and what that cost.
	for i, bar := range doc.Find("a.bar-model title").EachIter() {
		if got := bar.Text(); !strings.Contains(got, "wrote 2,000 to its cache ("+perCall+" at the cache-write price)") {
			t.Errorf("bar %d: %q", i, got)
		}
	}
	if n := doc.Find("a.bar-model").Length(); n != 3 {
		t.Errorf("%d model bars, want 3", n)
	}
	if got := doc.Find(`[data-testid="child-write-cost"]`).Text(); !strings.Contains(got, perCall) {
		t.Errorf("the child's cost does not tell its cache writes: %q (came back: %q)", got, doc.Find(`[data-testid="economics"]`).Text())
	}
}
