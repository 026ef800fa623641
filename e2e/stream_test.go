package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// slowEndpoint speaks the chat-completions wire format and streams its
// answer a word at a time, slowly enough to watch, once release is closed:
// streamed text is live only, so a viewer that connects later misses it.
func slowEndpoint(t *testing.T, words []string, gap time.Duration, release <-chan struct{}) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		flusher, _ := w.(http.Flusher)
		send := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			if flusher != nil {
				flusher.Flush()
			}
		}
		send(map[string]any{"role": "assistant", "content": ""}, nil)
		select {
		case <-r.Context().Done():
			return
		case <-release:
		}
		for _, word := range words {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
			send(map[string]any{"content": word + " "}, nil)
		}
		send(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestStreamedText watches a real-model session's text arrive in the
// running call's row as the endpoint streams it, before the call ends.
func TestStreamedText(t *testing.T) {
	words := strings.Fields("Streaming arrives word by word so a person can watch the model think")
	release := make(chan struct{})
	endpoint := slowEndpoint(t, words, 150*time.Millisecond, release)
	s := startStudio(t, "--model-url", endpoint.URL+"/v1", "--model", "m")
	// --model-url is the endpoint named "default"; a scenario names it.
	id := s.start(t, `{"name": "streamed", "prompt": "say something", "model": {"endpoint": "default", "model": "m"}}`)
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	// The model starts writing once the page watches: the studio counts
	// its viewers in /metrics.
	s.waitMetric(t, "studio_live_viewers", 1)
	close(release)
	tb.waitFor("the first streamed words",
		`(() => { const el = document.querySelector('[data-pane] [data-stream]'); return !!el && el.textContent.includes('Streaming arrives'); })()`,
		`document.querySelector('#delegation') && document.querySelector('#delegation').innerText`)
	partial := eval[string](tb, `document.querySelector('[data-pane] [data-stream]').textContent`)
	if strings.Contains(partial, "think") {
		t.Fatalf("the whole text was there at once: %q", partial)
	}
	tb.screenshot("TestStreamedText-1-streaming")
	tb.waitFor("the session to finish",
		`document.querySelector('[data-testid="status"]').textContent.trim() === 'done'`,
		`document.querySelector('[data-testid="status"]').textContent`)
	if got := eval[string](tb, `document.querySelector('[data-testid="answer"]').innerText`); !strings.Contains(got, "watch the model think") {
		t.Fatalf("answer = %q", got)
	}
	tb.screenshot("TestStreamedText-2-done")
}
