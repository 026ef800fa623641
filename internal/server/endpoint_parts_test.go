package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// reasoningEndpoint answers like a reasoning model behind an
// OpenAI-compatible server: the parent delegates to two children; the
// "thinker" answers with reasoning_content beside its content and reports
// cached and reasoning tokens; the "rambler" is cut off at its length limit.
func reasoningEndpoint(t *testing.T) *httptest.Server {
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
		msg := map[string]any{"role": "assistant"}
		finish := "stop"
		usage := map[string]any{"prompt_tokens": 900, "completion_tokens": 120,
			"prompt_tokens_details": map[string]any{"cached_tokens": 768}, "completion_tokens_details": map[string]any{"reasoning_tokens": 96}}
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
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m", "usage": usage,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestReasoningAndCutOffAnswers: a reasoning model's thinking is shown as its
// own part of the message and exported as a reasoning part; an answer cut off
// at the length limit is an error on its call, shown on the page and in the
// trace, and its child's receipt says so instead of passing the cut answer on.
func TestReasoningAndCutOffAnswers(t *testing.T) {
	ep := reasoningEndpoint(t)
	s := newStudio(t, "")
	sc, err := scenario.Parse([]byte(fmt.Sprintf(`{"name": "thinking", "prompt": "Ask both helpers.",
		"model": {"provider": "openai", "model": "m", "base_url": %q, "stream": false},
		"subagents": [{"name": "thinker", "description": "Thinks."}, {"name": "rambler", "description": "Talks."}]}`, ep.URL+"/v1")))
	if err != nil {
		t.Fatal(err)
	}
	id, res, err := (&session.Runner{DB: s.db}).Run(context.Background(), sc)
	if err != nil || res.Status != "done" {
		t.Fatalf("run: %v %+v", err, res)
	}
	tr, err := s.db.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("the trace keeps the reasoning and the endpoint's detailed counts", func(t *testing.T) {
		found := false
		for _, m := range tr.Messages {
			if m.Reasoning == "Six sevens: 7, 14, 21, 28, 35, 42." && m.Content == "42" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no message with the reasoning: %+v", tr.Messages)
		}
		u := tr.ModelCalls[0].Usage
		if u == nil || u.CachedTokens != 768 || u.ReasoningTokens != 96 {
			t.Errorf("usage %+v", u)
		}
	})
	t.Run("the cut-off answer is an error on its call and in its receipt", func(t *testing.T) {
		var callErr, receipt string
		for _, c := range tr.ModelCalls {
			if strings.Contains(c.Error, `finish_reason "length"`) {
				callErr = c.Error
			}
		}
		for _, m := range tr.Messages {
			if m.Kind == "receipt" && m.IsError {
				receipt = m.Content
			}
		}
		if !strings.Contains(callErr, "the answer was cut off at the length limit") || !strings.Contains(callErr, `"The answer is trunc"`) {
			t.Errorf("call error %q", callErr)
		}
		if !strings.Contains(receipt, "cut off") {
			t.Errorf("receipt %q: the parent must learn the answer was cut", receipt)
		}
	})
	t.Run("the page shows both", func(t *testing.T) {
		_, doc := s.get("/sessions/" + id)
		var thinker string
		for _, a := range tr.Agents {
			if a.Name == "thinker" {
				thinker = a.ID
			}
		}
		_, doc = s.get("/sessions/" + id + "?agent=" + thinker)
		if got := doc.Find(`[data-testid="reasoning"] pre`).Text(); got != "Six sevens: 7, 14, 21, 28, 35, 42." {
			t.Errorf("reasoning part %q", got)
		}
		if got := doc.Find(`[data-testid="turn"] .error`).Text(); !strings.Contains(got, `finish_reason "length"`) {
			t.Errorf("timeline error %q", got)
		}
	})
	t.Run("OTLP exports the reasoning as a reasoning part", func(t *testing.T) {
		out, err := otlp.Export(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), `{\"type\":\"reasoning\",\"content\":\"Six sevens: 7, 14, 21, 28, 35, 42.\"}`) {
			t.Errorf("no reasoning part in %s", out)
		}
		if !strings.Contains(string(out), "gen_ai.usage.cache_read.input_tokens") {
			t.Error("no cached token count")
		}
	})
}
