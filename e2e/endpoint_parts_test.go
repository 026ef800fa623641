package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// thinkingEndpoint answers like a reasoning model: the parent sends one
// task to each of two children; "thinker" answers with its reasoning beside
// its answer; "rambler" is cut off at its length limit.
func thinkingEndpoint(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
			Tools    []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		hasTask := false
		for _, tl := range req.Tools {
			hasTask = hasTask || tl.Function.Name == "task"
		}
		last := req.Messages[len(req.Messages)-1]
		msg, finish := map[string]any{"role": "assistant"}, "stop"
		switch {
		case hasTask && last.Role == "user":
			msg["tool_calls"] = []any{
				map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "task", "arguments": `{"description":"What is six times seven?","subagent_type":"thinker"}`}},
				map[string]any{"id": "c2", "type": "function", "function": map[string]any{"name": "task", "arguments": `{"description":"Explain everything.","subagent_type":"rambler"}`}},
			}
			finish = "tool_calls"
		case hasTask:
			msg["content"] = "One helper says 42; the other was cut off."
		case strings.Contains(last.Content, "six times seven"):
			msg["content"], msg["reasoning_content"] = "42", "Six sevens: 7, 14, 21, 28, 35, 42."
		default:
			msg["content"], finish = "The answer is trunc", "length"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReasoningAndCutOff: in the browser, a reasoning model's thinking is a
// part of its message of its own, folded until opened; an answer cut off at
// the length limit is an error on its call in the timeline and in its
// child's receipt.
func TestReasoningAndCutOff(t *testing.T) {
	ep := thinkingEndpoint(t)
	s := startStudio(t)
	id := s.start(t, fmt.Sprintf(`{"name": "thinking", "prompt": "Ask both helpers.",
		"model": {"provider": "openai", "model": "m", "base_url": %q, "stream": false},
		"subagents": [{"name": "thinker", "description": "Thinks."}, {"name": "rambler", "description": "Talks."}]}`, ep.URL+"/v1"))
	tr := s.waitDone(t, id)
	var thinker, rambler string
	for _, a := range tr.Agents {
		switch a.Name {
		case "thinker":
			thinker = a.ID
		case "rambler":
			rambler = a.ID
		}
	}
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the cut-off call in the timeline",
		`[...document.querySelectorAll('[data-testid="turn"] .error')].some(e => e.textContent.includes('finish_reason "length"'))`,
		`document.querySelector('#timeline').innerText`)

	tb.do("click the thinker in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-`+thinker+`"]`)))
	tb.waitFor("the thinker's answer with its reasoning part, folded",
		`(() => { const d = document.querySelector('[data-testid="reasoning"]'); return !!d && !d.open; })()`,
		`document.querySelector('#delegation') && document.querySelector('#delegation').innerText`)
	tb.do("open the reasoning", chromedp.Click(chromedp.CSS(`[data-testid="reasoning"] summary`)))
	tb.waitFor("the reasoning shown",
		`(() => { const p = document.querySelector('[data-testid="reasoning"] pre'); return !!p && p.offsetHeight > 0 && p.textContent === 'Six sevens: 7, 14, 21, 28, 35, 42.'; })()`,
		`document.querySelector('[data-testid="reasoning"]').outerHTML`)
	tb.screenshot("1-reasoning")

	tb.do("click the rambler in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-`+rambler+`"]`)))
	tb.waitFor("the rambler's receipt marked as an error that says the answer was cut off",
		`[...document.querySelectorAll('.receipt.error, .msg-error')].some(e => e.textContent.includes('cut off'))`,
		`document.querySelector('#delegation') && document.querySelector('#delegation').innerText`)
	tb.screenshot("2-cut-off")
}
