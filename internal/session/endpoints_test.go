package session

import (
	"context"
	"encoding/json"
	"errors"
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
	t.Setenv("A_API_KEY", "key-a")
	t.Setenv("B_API_KEY", "key-b")
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
		"model": {"provider": "openai", "model": "m", "base_url": %q, "api_key_env": "A_API_KEY"},
		"subagents": [
		  {"name": "cloud", "description": "d", "system_prompt": "CLOUD"},
		  {"name": "local", "description": "d", "system_prompt": "LOCAL", "base_url": %q, "api_key_env": "B_API_KEY", "model": "small"}]}`,
		srvA.URL+"/v1", srvB.URL+"/v1")
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var receipts []string
	started := map[string]delegation.AgentStarted{}
	res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(e delegation.Event) {
		if d, ok := e.Payload.(delegation.AgentStarted); ok {
			started[d.Agent.Name] = d
		}
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
	t.Run("agent.started says each agent's model and endpoint", func(t *testing.T) {
		for name, want := range map[string][2]string{"main": {"m", srvA.URL + "/v1"}, "cloud": {"m", srvA.URL + "/v1"},
			"local": {"small", srvB.URL + "/v1"}} {
			if d := started[name]; d.Model != want[0] || d.Endpoint != want[1] {
				t.Errorf("%s: model %q at %q, want %q at %q", name, d.Model, d.Endpoint, want[0], want[1])
			}
		}
	})
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

// answerOnce is an endpoint that answers every call with text.
func answerOnce(t *testing.T, e *endpointRecorder) *httptest.Server {
	return e.server(t, func(bool, string) map[string]any { return map[string]any{"role": "assistant", "content": "ok"} })
}

func runWith(t *testing.T, doc string, eps Endpoints) error {
	t.Helper()
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		return err
	}
	res, err := Run(context.Background(), sc, RunOptions{Endpoints: eps, Sink: delegation.SinkFunc(func(delegation.Event) {})})
	if err != nil {
		return err
	}
	if res.Status != delegation.StatusDone {
		t.Fatalf("the session ended %s: %v", res.Status, res.Err)
	}
	return nil
}

// fieldsOf returns err's problems as "field: message" lines.
func fieldsOf(t *testing.T, err error) []string {
	t.Helper()
	var fe delegation.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want field errors", err)
	}
	var out []string
	for _, e := range fe {
		out = append(out, e.Error())
	}
	return out
}

// Finding 2 of issue 21: under serve, base_url and api_key_env came from
// the submitted scenario, so a scenario decided where the server's keys
// went (STUDIO_TOKEN and AWS_SECRET_ACCESS_KEY were sent out this way).
func TestServerEndpointsOnly(t *testing.T) {
	t.Setenv("LOCAL_API_KEY", "key-local")
	t.Setenv("OTHER_API_KEY", "key-other")
	t.Setenv("OPENAI_API_KEY", "key-openai")
	var local, other endpointRecorder
	srvL, srvO := answerOnce(t, &local), answerOnce(t, &other)
	eps := Endpoints{Only: true, List: []Endpoint{
		{Name: "local", BaseURL: srvL.URL + "/v1", KeyEnv: "LOCAL_API_KEY", Model: "m"},
		{Name: "other", BaseURL: srvO.URL + "/v1", KeyEnv: "OTHER_API_KEY"},
	}}
	t.Run("a scenario names an endpoint; the server's key goes to it", func(t *testing.T) {
		if err := runWith(t, `{"name": "x", "prompt": "p", "model": {"endpoint": "other", "model": "m"}}`, eps); err != nil {
			t.Fatal(err)
		}
		if len(other.keys) != 1 || other.keys[0] != "key-other" {
			t.Fatalf("other got keys %v", other.keys)
		}
	})
	t.Run("with no endpoint named, the first is the default", func(t *testing.T) {
		if err := runWith(t, `{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m"}}`, eps); err != nil {
			t.Fatal(err)
		}
		if len(local.keys) != 1 || local.keys[0] != "key-local" {
			t.Fatalf("local got keys %v", local.keys)
		}
	})
	t.Run("an endpoint named without a model brings its own", func(t *testing.T) {
		if err := runWith(t, `{"name": "x", "prompt": "p", "model": {"endpoint": "local"}}`, eps); err != nil {
			t.Fatal(err)
		}
		if err := runWith(t, `{"name": "x", "prompt": "p", "model": {"endpoint": "other"}}`, eps); err == nil ||
			!strings.Contains(err.Error(), "model.model: name the model to call: endpoint other has no model of its own") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("a URL or a key variable in the scenario is refused at its field", func(t *testing.T) {
		err := runWith(t, `{"name": "x", "prompt": "p", "agent": {"base_url": "http://attacker.example/v1"},
			"model": {"provider": "openai", "model": "m", "base_url": "http://attacker.example/v1", "api_key_env": "OPENAI_API_KEY"},
			"subagents": [{"name": "s", "description": "d", "base_url": "http://attacker.example/v1", "api_key_env": "LOCAL_API_KEY"}]}`, eps)
		got := strings.Join(fieldsOf(t, err), "\n")
		for _, field := range []string{"agent.base_url: this studio sends model calls only to the endpoints it was started with (local, other)",
			"model.api_key_env: this studio reads only the key variables", "subagents[0].base_url:", "subagents[0].api_key_env:"} {
			if !strings.Contains(got, field) {
				t.Errorf("errors lack %q:\n%s", field, got)
			}
		}
	})
	t.Run("an unknown endpoint is refused", func(t *testing.T) {
		err := runWith(t, `{"name": "x", "prompt": "p", "model": {"endpoint": "nope", "model": "m"}}`, eps)
		if got := fieldsOf(t, err); len(got) != 1 || got[0] != `model.endpoint: no endpoint "nope": the endpoints are local, other` {
			t.Fatalf("errors %v", got)
		}
	})
	t.Run("a studio without endpoints says how to configure one", func(t *testing.T) {
		err := runWith(t, `{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m"}}`, Endpoints{Only: true})
		if got := fieldsOf(t, err); len(got) != 1 || !strings.Contains(got[0], "--endpoint NAME=URL,KEY_ENV") {
			t.Fatalf("errors %v", got)
		}
	})
	t.Run("no scenario names a variable other than *_API_KEY", func(t *testing.T) {
		for _, name := range []string{"STUDIO_TOKEN", "AWS_SECRET_ACCESS_KEY", "HOME"} {
			_, err := scenario.Parse([]byte(`{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m", "api_key_env": "` + name + `"}}`))
			if got := fieldsOf(t, err); len(got) != 1 || !strings.HasPrefix(got[0], "model.api_key_env: \""+name+"\" cannot hold an API key here") {
				t.Fatalf("%s: errors %v", name, got)
			}
		}
	})
}

func TestCommandLineEndpoints(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "key-openai")
	var e endpointRecorder
	srv := answerOnce(t, &e)
	t.Run("a scenario's own URL gets no key it did not name", func(t *testing.T) {
		doc := fmt.Sprintf(`{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m", "base_url": %q}}`, srv.URL+"/v1")
		if err := runWith(t, doc, Endpoints{}); err != nil {
			t.Fatal(err)
		}
		if got := e.keys[len(e.keys)-1]; got != "" {
			t.Fatalf("the scenario's endpoint got key %q: OPENAI_API_KEY is for OpenAI only", got)
		}
	})
	t.Run("a 401 there says the key was withheld and how to send it (issue 28)", func(t *testing.T) {
		deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error": {"message": "You didn't provide an API key.", "type": "invalid_request_error", "code": null}}`)
		}))
		t.Cleanup(deny.Close)
		doc := fmt.Sprintf(`{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m", "base_url": %q}}`, deny.URL+"/v1")
		sc, err := scenario.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(delegation.Event) {})})
		if err != nil || res.Status != delegation.StatusFailed {
			t.Fatalf("run: %v %+v", err, res)
		}
		msg := res.Err.Error()
		for _, want := range []string{"OPENAI_API_KEY is set but was withheld", "OPENAI_BASE_URL=" + deny.URL + "/v1", "model.api_key_env"} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "set OPENAI_API_KEY") {
			t.Errorf("error %q says to set the key that is set", msg)
		}
	})
	t.Run("a named key variable that is unset is an error, not another key", func(t *testing.T) {
		doc := fmt.Sprintf(`{"name": "x", "prompt": "p", "model": {"provider": "openai", "model": "m", "base_url": %q, "api_key_env": "UNSET_FOR_TEST_API_KEY"}}`, srv.URL+"/v1")
		got := fieldsOf(t, runWith(t, doc, Endpoints{}))
		if len(got) != 1 || !strings.HasPrefix(got[0], "model.api_key_env: UNSET_FOR_TEST_API_KEY is not set in the environment") {
			t.Fatalf("errors %v", got)
		}
	})
	t.Run("OPENAI_API_KEY goes to OpenAI's own URL", func(t *testing.T) {
		for base, want := range map[string]string{"": "key-openai", "https://api.openai.com/v1": "key-openai",
			"http://api.openai.com/v1": "", "https://api.openai.com.attacker.example/v1": "", "http://127.0.0.1:8080/v1": ""} {
			if got := (target{url: base}).apiKey(); got != want {
				t.Errorf("key for %q = %q, want %q", base, got, want)
			}
		}
	})
	t.Run("--endpoint specs", func(t *testing.T) {
		got, err := ParseEndpoint("or=https://openrouter.ai/api/v1,OPENROUTER_API_KEY,qwen/qwen3-32b")
		if err != nil || got != (Endpoint{Name: "or", BaseURL: "https://openrouter.ai/api/v1", KeyEnv: "OPENROUTER_API_KEY", Model: "qwen/qwen3-32b"}) {
			t.Fatalf("got %+v, %v", got, err)
		}
		for _, bad := range []string{"local", "=http://x/v1", "l=ftp://x", "l=http://x/v1,STUDIO_TOKEN", "l="} {
			if _, err := ParseEndpoint(bad); err == nil {
				t.Errorf("%q was accepted", bad)
			}
		}
	})
}
