package session

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// A scenario with model.provider "anthropic" runs on the Anthropic adapter:
// the lead delegates to a child, which answers, and the session is done;
// the key of api_key_env goes to the server named by base_url, and no
// ANTHROPIC_API_KEY goes to a server that is not Anthropic's.
func TestRunAnthropicProvider(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-this-server")
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			System   []struct{ Text string } `json:"system"`
			Messages []struct{ Role string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		content := []any{map[string]any{"type": "text", "text": "child says hi"}}
		stop := "end_turn"
		if len(body.System) > 0 && body.System[0].Text == "MAIN" {
			if len(body.Messages) == 1 {
				content = []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "task",
					"input": map[string]any{"description": "say hi", "subagent_type": "kid"}}}
				stop = "tool_use"
			} else {
				content = []any{map[string]any{"type": "text", "text": "all done"}}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "claude-x",
			"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 5, "output_tokens": 2}})
	}))
	defer srv.Close()
	for _, keyEnv := range []string{"", "A_API_KEY"} {
		auths = nil
		t.Setenv("A_API_KEY", "key-a")
		extra := ""
		if keyEnv != "" {
			extra = fmt.Sprintf(`, "api_key_env": %q`, keyEnv)
		}
		doc := fmt.Sprintf(`{"name": "anthropic", "prompt": "go", "agent": {"system_prompt": "MAIN"},
			"model": {"provider": "anthropic", "model": "claude-x", "base_url": %q, "stream": false%s},
			"subagents": [{"name": "kid", "description": "d", "system_prompt": "KID"}]}`, srv.URL, extra)
		sc, err := scenario.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(delegation.Event) {})})
		if err != nil || res.Status != delegation.StatusDone || res.Answer != "all done" {
			t.Fatalf("run: %v %+v", err, res)
		}
		want := ""
		if keyEnv != "" {
			want = "Bearer key-a"
		}
		if len(auths) != 3 || strings.Join(auths, "|") != strings.Repeat(want+"|", 2)+want {
			t.Errorf("api_key_env %q: credentials sent %q", keyEnv, auths)
		}
	}
}
