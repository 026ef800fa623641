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
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/scenario"
)

// endpointRecorder answers chat completions in SSE and records which
// system prompts it served and with which key.
type endpointRecorder struct {
	mu      sync.Mutex
	systems []string
	keys    []string
}

func (e *endpointRecorder) server(t *testing.T, answer func(hasTask bool, last string) map[string]any) *httptest.Server {
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
		e.mu.Lock()
		if len(req.Messages) > 0 && req.Messages[0].Role == "system" {
			e.systems = append(e.systems, req.Messages[0].Content)
		}
		e.keys = append(e.keys, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		e.mu.Unlock()
		delta := answer(hasTask, req.Messages[len(req.Messages)-1].Role)
		w.Header().Set("Content-Type", "text/event-stream")
		chunk, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": "stop"}}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEachSubagentOnItsEndpoint(t *testing.T) {
	t.Setenv("KEY_A", "key-a")
	t.Setenv("KEY_B", "key-b")
	var a, b endpointRecorder
	srvA := a.server(t, func(hasTask bool, last string) map[string]any {
		if hasTask && last == "user" {
			return map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"index": 0, "id": "c1", "type": "function", "function": map[string]any{"name": "task", "arguments": `{"description":"one","subagent_type":"cloud"}`}},
				map[string]any{"index": 1, "id": "c2", "type": "function", "function": map[string]any{"name": "task", "arguments": `{"description":"two","subagent_type":"local"}`}}}}
		}
		if hasTask {
			return map[string]any{"role": "assistant", "content": "both reported"}
		}
		return map[string]any{"role": "assistant", "content": "from A"}
	})
	srvB := b.server(t, func(bool, string) map[string]any { return map[string]any{"role": "assistant", "content": "from B"} })
	doc := fmt.Sprintf(`{"name": "two endpoints", "prompt": "go",
		"agent": {"system_prompt": "MAIN"},
		"model": {"provider": "openai", "model": "m", "base_url": %q, "api_key_env": "KEY_A"},
		"subagents": [
		  {"name": "cloud", "description": "d", "system_prompt": "CLOUD"},
		  {"name": "local", "description": "d", "system_prompt": "LOCAL", "base_url": %q, "api_key_env": "KEY_B", "model": "small"}]}`,
		srvA.URL+"/v1", srvB.URL+"/v1")
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var receipts []string
	res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(e delegation.Event) {
		if e.Type == delegation.EventMessageAdded {
			if d, ok := e.Payload.(delegation.MessageAdded); ok && d.Message.Kind == delegation.KindReceipt {
				receipts = append(receipts, d.Message.Content)
			}
		}
	})})
	if err != nil || res.Status != delegation.StatusDone {
		t.Fatalf("run: %v %+v", err, res)
	}
	if strings.Join(receipts, "|") != "from A|from B" {
		t.Fatalf("receipts = %v", receipts)
	}
	if got := strings.Join(a.systems, ","); got != "MAIN,CLOUD,MAIN" {
		t.Fatalf("endpoint A served %s", got)
	}
	if got := strings.Join(b.systems, ","); got != "LOCAL" {
		t.Fatalf("endpoint B served %s", got)
	}
	for _, k := range a.keys {
		if k != "key-a" {
			t.Fatalf("endpoint A got key %q", k)
		}
	}
	if len(b.keys) != 1 || b.keys[0] != "key-b" {
		t.Fatalf("endpoint B got keys %v", b.keys)
	}
}

// TestSettingsPerAgent: each agent's request settings reach the wire with
// its calls, inherited where the agent sets none.
func TestSettingsPerAgent(t *testing.T) {
	var mu sync.Mutex
	bodies := map[string][]map[string]any{} // by system prompt
	srv := openaitest.NewServer(t, func(req openaitest.Request) openaitest.Reply {
		mu.Lock()
		bodies[req.System()] = append(bodies[req.System()], req.Body)
		mu.Unlock()
		if req.System() == "MAIN" && len(req.Messages) == 2 {
			return openaitest.Reply{Calls: []openaitest.Call{openaitest.Task("c1", "helper", "x")}}
		}
		return openaitest.Reply{Content: "done"}
	})
	doc := fmt.Sprintf(`{"name": "settings", "prompt": "go",
		"agent": {"system_prompt": "MAIN", "temperature": 0, "tool_choice": "auto"},
		"model": {"provider": "openai", "model": "m", "base_url": %q, "seed": 3, "max_tokens": 500},
		"subagents": [{"name": "helper", "description": "d", "system_prompt": "HELPER", "max_tokens": 50, "parallel_tool_calls": false}]}`,
		srv.URL+"/v1")
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(delegation.Event) {})})
	if err != nil || res.Status != delegation.StatusDone {
		t.Fatalf("run: %v %+v", err, res)
	}
	main, helper := bodies["MAIN"], bodies["HELPER"]
	if len(main) != 2 || len(helper) != 1 {
		t.Fatalf("%d main calls, %d helper calls", len(main), len(helper))
	}
	for key, want := range map[string]any{"temperature": 0.0, "seed": 3.0, "max_tokens": 500.0, "tool_choice": "auto", "parallel_tool_calls": true} {
		if got := main[0][key]; got != want {
			t.Errorf("main %s = %v, want %v", key, got, want)
		}
	}
	for key, want := range map[string]any{"temperature": 0.0, "seed": 3.0, "max_tokens": 50.0, "tool_choice": nil, "parallel_tool_calls": false} {
		if got := helper[0][key]; got != want {
			t.Errorf("helper %s = %v, want %v", key, got, want)
		}
	}
}
