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
	srv, auths := fakeAnthropic(t)
	for _, keyEnv := range []string{"", "A_API_KEY"} {
		auths.reset()
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
		if got := auths.all(); len(got) != 3 || strings.Join(got, "|") != strings.Repeat(want+"|", 2)+want {
			t.Errorf("api_key_env %q: credentials sent %q", keyEnv, got)
		}
	}
}

// An endpoint of Anthropic's kind (serve's and run's --endpoint
// NAME=anthropic:URL,KEY_ENV,MODEL) drives a scenario that names it, with
// no provider of its own (model.endpoint implies openai), on the Anthropic
// adapter: its key variable's key goes there, and its model is the one
// called. Under Only, as serve runs sessions.
func TestRunAnthropicEndpoint(t *testing.T) {
	srv, auths := fakeAnthropic(t)
	t.Setenv("CLAUDE_API_KEY", "key-c")
	ep, err := ParseEndpoint("claude=anthropic:" + srv.URL + ",CLAUDE_API_KEY,claude-x")
	if err != nil || ep.Provider != scenario.ProviderAnthropic || ep.BaseURL != srv.URL {
		t.Fatalf("parse: %v %+v", err, ep)
	}
	if err := ep.Verify(); err != nil {
		t.Fatal(err)
	}
	doc := `{"name": "anthropic endpoint", "prompt": "go", "agent": {"system_prompt": "MAIN"},
		"model": {"endpoint": "claude", "stream": false},
		"subagents": [{"name": "kid", "description": "d", "system_prompt": "KID"}]}`
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(delegation.Event) {}),
		Endpoints: Endpoints{List: []Endpoint{ep}, Only: true}})
	if err != nil || res.Status != delegation.StatusDone || res.Answer != "all done" {
		t.Fatalf("run: %v %+v", err, res)
	}
	if got := auths.all(); strings.Join(got, "|") != "Bearer key-c|Bearer key-c|Bearer key-c" {
		t.Errorf("credentials sent %q", got)
	}
}

// A provider the endpoint does not know is refused, naming the field and
// the two it may be.
func TestEndpointProviderChecked(t *testing.T) {
	_, err := ParseEndpoint("claude=antropic:https://api.anthropic.com")
	if err == nil || !strings.Contains(err.Error(), `provider "antropic"`) || !strings.Contains(err.Error(), "anthropic:https://") {
		t.Errorf("parse: %v", err)
	}
	err = Endpoint{Name: "c", Provider: "claude"}.Check()
	if err == nil || !strings.Contains(err.Error(), `"provider"`) || !strings.Contains(err.Error(), "openai") {
		t.Errorf("check: %v", err)
	}
	if e, err := ParseEndpoint("local=http://127.0.0.1:8080/v1"); err != nil || e.Provider != "" || e.Kind() != scenario.ProviderOpenAI {
		t.Errorf("openai by default: %v %+v", err, e)
	}
}

// credentials are the keys a fake server was sent, in order.
type credentials struct {
	mu   sync.Mutex
	list []string
}

func (c *credentials) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, s)
}

func (c *credentials) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = nil
}

func (c *credentials) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.list...)
}

// fakeAnthropic is an Anthropic server whose MAIN agent delegates "say hi"
// to kid once, then answers "all done"; every other agent says hi. It
// keeps the credentials each call carried.
func fakeAnthropic(t *testing.T) (*httptest.Server, *credentials) {
	auths := &credentials{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			System   []struct{ Text string } `json:"system"`
			Messages []struct{ Role string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		auths.add(r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"))
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
	t.Cleanup(srv.Close)
	return srv, auths
}
