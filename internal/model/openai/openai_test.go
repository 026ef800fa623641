package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// collector is a Request.Stream callback that keeps the deltas.
type collector struct {
	mu     sync.Mutex
	deltas []string
}

func (c *collector) add(d string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deltas = append(c.deltas, d)
}

func (c *collector) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.deltas...)
}

func userReq(text string) *delegation.Request {
	return &delegation.Request{Purpose: delegation.PurposeTurn,
		Messages: []*delegation.Message{{Role: delegation.RoleUser, Content: text}}}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return string(b)
}

// modes runs a test twice: with a whole answer and with a streamed one.
func modes(t *testing.T, f func(t *testing.T, stream bool, req *delegation.Request)) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			req := userReq("hello")
			if stream {
				req.Stream = func(string) {}
			}
			f(t, stream, req)
		})
	}
}

func TestCompletion(t *testing.T) {
	t.Run("text and usage", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: "The answer is 42.", usage: [2]int{31, 7}})
		})
		m := newModel(t, f.url(), nil)
		resp, err := m.Generate(context.Background(), userReq("What is the answer?"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "The answer is 42." || len(resp.ToolCalls) != 0 {
			t.Fatalf("response %+v", resp)
		}
		if resp.Usage == nil || *resp.Usage != (delegation.Usage{PromptTokens: 31, CompletionTokens: 7}) {
			t.Fatalf("usage %+v", resp.Usage)
		}
		if body := f.requests()[0].Body; body.Stream || body.StreamOptions != nil {
			t.Fatalf("a request without a Stream callback must not stream: %s", f.requests()[0].Raw)
		}
	})

	t.Run("no usage reported is nil, not zero", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: "hi"})
		})
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), userReq("x"))
		if err != nil || resp.Usage != nil {
			t.Fatalf("resp %+v, err %v", resp, err)
		}
	})

	t.Run("parallel tool calls in one message", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{calls: []tcall{
				{"call_1", "read_file", `{"file_path":"/a.md"}`},
				{"call_2", "grep", `{"pattern":"TODO","output_mode":"count"}`},
				{"call_3", "ls", `{"path":"/"}`},
			}, usage: [2]int{100, 20}})
		})
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), userReq("look around"))
		if err != nil {
			t.Fatal(err)
		}
		want := []delegation.ToolCall{
			{ID: "call_1", Name: "read_file", Args: json.RawMessage(`{"file_path":"/a.md"}`)},
			{ID: "call_2", Name: "grep", Args: json.RawMessage(`{"pattern":"TODO","output_mode":"count"}`)},
			{ID: "call_3", Name: "ls", Args: json.RawMessage(`{"path":"/"}`)},
		}
		if mustJSON(t, resp.ToolCalls) != mustJSON(t, want) {
			t.Fatalf("tool calls\n got %s\nwant %s", mustJSON(t, resp.ToolCalls), mustJSON(t, want))
		}
		if resp.Content != "" || resp.Usage == nil || resp.Usage.PromptTokens != 100 {
			t.Fatalf("response %+v", resp)
		}
		// What the server said of its answer, as it said it.
		if m := resp.Meta; m == nil || *m != (delegation.ResponseMeta{ID: "chatcmpl-1", Model: "test-model", FinishReason: "tool_calls"}) {
			t.Fatalf("what the server said of its answer: %+v", m)
		}
	})
}

func TestStreaming(t *testing.T) {
	t.Run("deltas arrive as they are generated, tool calls reassemble", func(t *testing.T) {
		firstSeen := make(chan struct{})
		var incremental atomic.Bool
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			s.send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
			s.send(chunkText("Hel"))
			// The rest waits until the client has shown the first delta:
			// an adapter that buffers the stream would not show it yet.
			select {
			case <-firstSeen:
				incremental.Store(true)
			case <-time.After(2 * time.Second):
			}
			s.send(chunkText("lo"))
			s.send(chunkText(" world"))
			// Two calls, interleaved by index; id and name come first, the
			// arguments in three or four pieces.
			s.send(chunkCall(0, "call_a", "read_file", ""))
			s.send(chunkCall(1, "call_b", "grep", `{"pat`))
			s.send(chunkCall(0, "", "", `{"file_`))
			s.send(chunkCall(1, "", "", `tern": "x`))
			s.send(chunkCall(0, "", "", `path": "/a`))
			s.send(chunkCall(1, "", "", `", "glob": "*.md"`))
			s.send(chunkCall(0, "", "", `.md"}`))
			s.send(chunkCall(1, "", "", `}`))
			s.send(chunk(map[string]any{}, "tool_calls"))
			s.send(chunkUsage(1234, 56))
			s.done()
		})
		var col collector
		var once sync.Once
		req := userReq("go")
		req.Stream = func(d string) {
			col.add(d)
			once.Do(func() { close(firstSeen) })
		}
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !incremental.Load() {
			t.Error("the first delta reached Request.Stream only after the stream had ended")
		}
		if got := col.got(); !reflect.DeepEqual(got, []string{"Hel", "lo", " world"}) {
			t.Fatalf("deltas %q", got)
		}
		if resp.Content != "Hello world" {
			t.Fatalf("content %q", resp.Content)
		}
		want := []delegation.ToolCall{
			{ID: "call_a", Name: "read_file", Args: json.RawMessage(`{"file_path": "/a.md"}`)},
			{ID: "call_b", Name: "grep", Args: json.RawMessage(`{"pattern": "x", "glob": "*.md"}`)},
		}
		if mustJSON(t, resp.ToolCalls) != mustJSON(t, want) {
			t.Fatalf("tool calls\n got %s\nwant %s", mustJSON(t, resp.ToolCalls), mustJSON(t, want))
		}
		if resp.Usage == nil || *resp.Usage != (delegation.Usage{PromptTokens: 1234, CompletionTokens: 56}) {
			t.Fatalf("usage %+v", resp.Usage)
		}
		if m := resp.Meta; m == nil || *m != (delegation.ResponseMeta{ID: "chatcmpl-1", Model: "m", FinishReason: "tool_calls"}) {
			t.Fatalf("what the stream said of its answer: %+v", m)
		}
		body := f.requests()[0].Body
		if !body.Stream || body.StreamOptions == nil || !body.StreamOptions.IncludeUsage {
			t.Fatalf("request must stream and ask for usage: %s", f.requests()[0].Raw)
		}
	})

	t.Run("NoStream waits for the whole answer", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: "whole"})
		})
		var col collector
		req := userReq("x")
		req.Stream = col.add
		resp, err := newModel(t, f.url(), func(c *Config) { c.NoStream = true }).Generate(context.Background(), req)
		if err != nil || resp.Content != "whole" || f.requests()[0].Body.Stream || len(col.got()) != 0 {
			t.Fatalf("resp %+v err %v stream %v deltas %q", resp, err, f.requests()[0].Body.Stream, col.got())
		}
	})

	t.Run("a stream that breaks before any text is retried", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			if req.N == 0 {
				s.send(chunk(map[string]any{"role": "assistant"}, nil))
				s.send(chunkCall(0, "call_x", "ls", `{"pa`))
				panic(http.ErrAbortHandler) // the connection drops mid-stream
			}
			s.send(chunkText("second try"))
			s.send(chunk(map[string]any{}, "stop"))
			s.done()
		})
		var col collector
		req := userReq("x")
		req.Stream = col.add
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "second try" || len(resp.ToolCalls) != 0 || f.count() != 2 {
			t.Fatalf("resp %+v after %d requests", resp, f.count())
		}
		if got := col.got(); !reflect.DeepEqual(got, []string{"second try"}) {
			t.Fatalf("deltas %q", got)
		}
	})

	t.Run("a stream that breaks after text was shown is an error", func(t *testing.T) {
		for _, how := range []string{"dropped", "ended without finishing"} {
			t.Run(how, func(t *testing.T) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
					s := startSSE(w)
					s.send(chunkText("Hello"))
					if how == "dropped" {
						panic(http.ErrAbortHandler)
					}
					// returns: a clean end with neither finish_reason nor [DONE]
				})
				var col collector
				req := userReq("x")
				req.Stream = col.add
				_, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
				if err == nil || !strings.Contains(err.Error(), "broke off after the model had started writing") {
					t.Fatalf("err %v", err)
				}
				if f.count() != 1 || !reflect.DeepEqual(col.got(), []string{"Hello"}) {
					t.Fatalf("%d requests, deltas %q", f.count(), col.got())
				}
			})
		}
	})

	t.Run("an error event in the stream", func(t *testing.T) {
		errorEvent := func(w http.ResponseWriter, code, msg string) {
			s := startSSE(w)
			fmt.Fprintf(w, "data: {\"error\": {\"message\": %q, \"type\": \"server_error\", \"code\": %q}}\n\n", msg, code)
			s.flush()
		}
		t.Run("context length: not retried", func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				errorEvent(w, "context_length_exceeded", "This model's maximum context length is 8192 tokens.")
			})
			req := userReq("x")
			req.Stream = func(string) {}
			_, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
			if !errors.Is(err, ErrContextLength) || f.count() != 1 {
				t.Fatalf("err %v after %d requests", err, f.count())
			}
		})
		t.Run("other errors before any text: retried", func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				if req.N == 0 {
					errorEvent(w, "server_error", "The server had an error.")
					return
				}
				reply(w, req, turn{content: "recovered"})
			})
			req := userReq("x")
			req.Stream = func(string) {}
			resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
			if err != nil || resp.Content != "recovered" || f.count() != 2 {
				t.Fatalf("resp %+v err %v after %d requests", resp, err, f.count())
			}
		})
	})

	t.Run("finish_reason without [DONE] is a complete answer", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			s.send(chunkText("ok"))
			s.send(chunk(map[string]any{}, "stop"))
		})
		req := userReq("x")
		req.Stream = func(string) {}
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil || resp.Content != "ok" {
			t.Fatalf("resp %+v err %v", resp, err)
		}
	})

	t.Run("[DONE] without finish_reason is a complete answer", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			s.send(chunkText("ok"))
			s.done()
		})
		req := userReq("x")
		req.Stream = func(string) {}
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil || resp.Content != "ok" || f.count() != 1 {
			t.Fatalf("resp %+v err %v", resp, err)
		}
	})
}

func TestRequestMapping(t *testing.T) {
	readFile := delegation.ToolDef{Name: "read_file", Description: "Read a file.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}`)}
	task := delegation.ToolDef{Name: "task", Description: "Delegate.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"description":{"type":"string"}}}`)}
	req := &delegation.Request{
		Purpose: delegation.PurposeTurn,
		Model:   "override-model",
		System:  "You are the lead.",
		Messages: []*delegation.Message{
			{Role: delegation.RoleUser, Content: "Find the order.", Kind: delegation.KindPrompt},
			{Role: delegation.RoleAssistant, Content: "Let me look.", ToolCalls: []delegation.ToolCall{
				{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"file_path":"/order.md"}`)},
				{ID: "c2", Name: "read_file", Args: json.RawMessage(`{"file_path":"/missing.md"}`)},
			}},
			{Role: delegation.RoleTool, ToolCallID: "c1", Content: "     1\tOrder A-7731"},
			{Role: delegation.RoleTool, ToolCallID: "c2", Content: "Error: file not found", IsError: true},
			{Role: delegation.RoleUser, Kind: delegation.KindSummary, Content: "[Summary] earlier work"},
			{Role: delegation.RoleTool, ToolCallID: "c3", Content: ""},
		},
		Tools: []delegation.ToolDef{readFile, task},
	}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		reply(w, req, turn{content: "ok"})
	})
	if _, err := newModel(t, f.url(), nil).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := f.requests()[0]
	b := got.Body
	if b.Model != "override-model" {
		t.Errorf("model %q: Request.Model must override the config's", b.Model)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer "+testKey {
		t.Errorf("Authorization %q", h)
	}
	var roles []string
	for _, m := range b.Messages {
		roles = append(roles, m.Role)
	}
	if want := []string{"system", "user", "assistant", "tool", "tool", "user", "tool"}; !reflect.DeepEqual(roles, want) {
		t.Fatalf("roles %v, want %v\n%s", roles, want, got.Raw)
	}
	if b.system() != "You are the lead." || b.Messages[1].text() != "Find the order." {
		t.Errorf("system or prompt wrong: %s", got.Raw)
	}
	a := b.Messages[2]
	if a.text() != "Let me look." || len(a.ToolCalls) != 2 {
		t.Fatalf("assistant message %+v", a)
	}
	for i, wc := range []struct{ id, args string }{{"c1", `{"file_path":"/order.md"}`}, {"c2", `{"file_path":"/missing.md"}`}} {
		c := a.ToolCalls[i]
		if c.ID != wc.id || c.Type != "function" || c.Function.Name != "read_file" || c.Function.Arguments != wc.args {
			t.Errorf("tool call %d: %+v", i, c)
		}
	}
	if b.Messages[3].ToolCallID != "c1" || b.Messages[3].text() != "     1\tOrder A-7731" ||
		b.Messages[4].ToolCallID != "c2" || b.Messages[4].text() != "Error: file not found" {
		t.Errorf("tool results: %s", got.Raw)
	}
	if b.Messages[5].text() != "[Summary] earlier work" {
		t.Errorf("summary message: %+v", b.Messages[5])
	}
	// An empty result still has content: endpoints reject a tool message
	// without it.
	if b.Messages[6].Content == nil || *b.Messages[6].Content == "" {
		t.Errorf("empty tool result sent without content: %s", got.Raw)
	}
	if len(b.Tools) != 2 || b.Tools[0].Type != "function" || b.Tools[0].Function.Name != "read_file" ||
		b.Tools[0].Function.Description != "Read a file." || b.Tools[1].Function.Name != "task" {
		t.Fatalf("tools: %s", got.Raw)
	}
	if string(b.Tools[0].Function.Parameters) != string(readFile.Parameters) {
		t.Errorf("parameters %s", b.Tools[0].Function.Parameters)
	}
	if b.ParallelToolCalls == nil || !*b.ParallelToolCalls {
		t.Errorf("parallel_tool_calls must be true with tools: %s", got.Raw)
	}
	if len(b.ResponseFormat) != 0 {
		t.Errorf("no response_format by default: %s", got.Raw)
	}

	t.Run("default model, no system, no key, no tools", func(t *testing.T) {
		m := newModel(t, f.url(), func(c *Config) { c.APIKey = "" })
		if _, err := m.Generate(context.Background(), userReq("hi")); err != nil {
			t.Fatal(err)
		}
		got := f.requests()[len(f.requests())-1]
		if got.Body.Model != "test-model" {
			t.Errorf("model %q", got.Body.Model)
		}
		if h, ok := got.Header["Authorization"]; ok {
			t.Errorf("Authorization sent without a key: %q", h)
		}
		if len(got.Body.Messages) != 1 || got.Body.Messages[0].Role != "user" {
			t.Errorf("an empty system prompt must be omitted: %s", got.Raw)
		}
		if strings.Contains(string(got.Raw), "parallel_tool_calls") || strings.Contains(string(got.Raw), `"tools"`) {
			t.Errorf("no tools, no parallel_tool_calls: %s", got.Raw)
		}
	})
}

func TestSummaryPurpose(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		reply(w, req, turn{content: "The user asked for the order; A-7731 was found in /order.md."})
	})
	req := &delegation.Request{
		Purpose: delegation.PurposeSummary,
		System:  "You are the lead.",
		Messages: []*delegation.Message{
			{Role: delegation.RoleUser, Content: "Find the order."},
			{Role: delegation.RoleAssistant, ToolCalls: []delegation.ToolCall{{ID: "c1", Name: "read_file", Args: json.RawMessage(`{"file_path":"/order.md"}`)}}},
			{Role: delegation.RoleTool, ToolCallID: "c1", Content: "Order A-7731"},
		},
		Tools:          []delegation.ToolDef{{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ResponseFormat: json.RawMessage(`{"title":"Verdict","type":"object"}`),
	}
	m := newModel(t, f.url(), func(c *Config) { c.NativeJSONSchema = true })
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "The user asked for the order; A-7731 was found in /order.md." || len(resp.ToolCalls) != 0 {
		t.Fatalf("resp %+v", resp)
	}
	got := f.requests()[0]
	b := got.Body
	if len(b.Tools) != 0 || b.ParallelToolCalls != nil || len(b.ResponseFormat) != 0 {
		t.Errorf("a summary call has no tools and no response_format: %s", got.Raw)
	}
	if len(b.Messages) != 5 || b.system() != "You are the lead." || b.Messages[2].ToolCalls[0].ID != "c1" {
		t.Fatalf("messages: %s", got.Raw)
	}
	if l := b.last(); l.Role != "user" || l.text() != SummaryInstruction {
		t.Errorf("last message %+v", l)
	}
}

func TestMalformedArguments(t *testing.T) {
	modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{calls: []tcall{
				{"c1", "read_file", `{"file_path": `}, // cut off
				{"c2", "ls", ""},
				{"c3", "grep", `"{\"pattern\": \"x\"}"`}, // encoded twice
				{"c4", "glob", `{"pattern": "*.md"}`},
			}})
		})
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{`"{\"file_path\": "`, `{}`, `{"pattern": "x"}`, `{"pattern": "*.md"}`}
		for i, c := range resp.ToolCalls {
			if !json.Valid(c.Args) || string(c.Args) != want[i] {
				t.Errorf("call %d args %s, want %s", i, c.Args, want[i])
			}
		}
		if len(resp.ToolCalls) != 4 {
			t.Fatalf("calls %+v", resp.ToolCalls)
		}
		// The engine embeds args in events as raw JSON: this must encode.
		if _, err := json.Marshal(delegation.ToolStarted{Args: resp.ToolCalls[0].Args}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestErrorsNotRetried(t *testing.T) {
	cases := []struct {
		name    string
		handle  func(w http.ResponseWriter)
		model   string
		is      error
		want    []string // substrings of the message
		exactly string
	}{
		{name: "401", handle: func(w http.ResponseWriter) {
			apiError(w, 401, "invalid_api_key", "invalid_request_error", "Incorrect API key provided: sk-test-se**********6789. "+testKey)
		}, is: ErrAuth,
			exactly: "the endpoint at BASE rejected the API key in OPENAI_API_KEY (401): check that key, or name the variable that holds the right one with model.api_key_env"},
		{name: "403 echoing the header", handle: func(w http.ResponseWriter) {
			apiError(w, 403, nil, "forbidden", "Request with Authorization: Bearer "+testKey+" is not allowed in your region")
		}, is: ErrAuth, want: []string{"rejected the API key in OPENAI_API_KEY (403)", "not allowed in your region"}},
		{name: "404 model", model: "gpt-nope", handle: func(w http.ResponseWriter) {
			apiError(w, 404, "model_not_found", "invalid_request_error", "The model `gpt-nope` does not exist or you do not have access to it.")
		}, is: ErrModelNotFound, exactly: "model \"gpt-nope\" not found at BASE: check model.model (the endpoint said: The model `gpt-nope` does not exist or you do not have access to it.)"},
		{name: "404 without a JSON body", handle: func(w http.ResponseWriter) {
			http.Error(w, "404 page not found", http.StatusNotFound)
		}, is: ErrModelNotFound, want: []string{`model "test-model" not found at BASE: check model.model`, "check model.base_url"}},
		// Express and NestJS servers (mock-openai-api among them): "error"
		// is a string. go-openai returns an empty APIError for it.
		{name: "404 with a string error, Express style", handle: func(w http.ResponseWriter) {
			writeJSON(w, 404, map[string]any{"error": "Not Found", "message": "Cannot POST /chat/completions", "status": 404})
		}, is: ErrModelNotFound, want: []string{`model "test-model" not found at BASE: check model.model`,
			"check model.base_url too", "(the endpoint said: Not Found: Cannot POST /chat/completions)"}},
		{name: "404 with a string error, NestJS style", handle: func(w http.ResponseWriter) {
			writeJSON(w, 404, map[string]any{"statusCode": 404, "error": "Not Found", "message": "Cannot POST /chat/completions"})
		}, is: ErrModelNotFound, want: []string{"check model.base_url too"}},
		{name: "400 for an unknown model, mock-openai-api", model: "nope", handle: func(w http.ResponseWriter) {
			apiError(w, 400, "invalid_model", "invalid_request_error", "Model 'nope' does not exist")
		}, is: ErrModelNotFound, want: []string{`model "nope" not found at BASE: check model.model`}},
		{name: "404 from Ollama", model: "llama9", handle: func(w http.ResponseWriter) {
			writeJSON(w, 404, map[string]any{"error": `model "llama9" not found, try pulling it first`})
		}, is: ErrModelNotFound, exactly: `model "llama9" not found at BASE: check model.model (the endpoint said: model "llama9" not found, try pulling it first)`},
		{name: "405: not a chat-completions API", handle: func(w http.ResponseWriter) {
			http.Error(w, "<html><head><title>405 Not Allowed</title></head></html>", http.StatusMethodNotAllowed)
		}, is: ErrModelNotFound, want: []string{"does not take chat completions (405 Method Not Allowed): check model.base_url", `an HTML page titled "405 Not Allowed"`}},
		{name: "context length, OpenAI", handle: func(w http.ResponseWriter) {
			apiError(w, 400, "context_length_exceeded", "invalid_request_error", "Your input exceeds the context window of this model.")
		}, is: ErrContextLength, want: []string{"the context is longer than the model accepts: Your input exceeds", "summarization.max_tokens"}},
		{name: "context length, vLLM", handle: func(w http.ResponseWriter) {
			writeJSON(w, 400, map[string]any{"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
				"type": "BadRequestError", "param": nil, "code": 400})
		}, is: ErrContextLength, want: []string{"the context is longer than the model accepts", "4096"}},
		{name: "context length, llama.cpp", handle: func(w http.ResponseWriter) {
			apiError(w, 400, 400, "exceed_context_size_error", "the request exceeds the available context size, try increasing it")
		}, is: ErrContextLength, want: []string{"the context is longer than the model accepts"}},
		{name: "other 400", handle: func(w http.ResponseWriter) {
			apiError(w, 400, nil, "invalid_request_error", "Invalid schema for function 'x'.")
		}, is: ErrRefused, want: []string{"the endpoint at BASE refused the request (400 Bad Request): Invalid schema for function 'x'."}},
		{name: "422 from a FastAPI server", handle: func(w http.ResponseWriter) {
			writeJSON(w, 422, map[string]any{"detail": []any{map[string]any{"loc": []any{"body", "messages", 0, "role"}, "msg": "field required", "type": "missing"}}})
		}, is: ErrRefused, want: []string{"(422 Unprocessable Entity): body.messages.0.role: field required"}},
		{name: "a model without tools, Ollama", handle: func(w http.ResponseWriter) {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "registry.ollama.ai/library/gemma:2b does not support tools", "type": "api_error"}})
		}, is: ErrRefused, want: []string{`model "test-model" at BASE cannot call tools: pick a model with tool support`}},
		{name: "out of quota", handle: func(w http.ResponseWriter) {
			apiError(w, 429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota.")
		}, is: ErrQuota, want: []string{"out of quota or credit", "(429 Too Many Requests)", "a retry will not help"}},
		{name: "an error with status 200", handle: func(w http.ResponseWriter) {
			writeJSON(w, 200, map[string]any{"error": map[string]any{"message": "Invalid API key", "code": "invalid_api_key"}})
		}, is: ErrAuth, want: []string{"rejected the API key in OPENAI_API_KEY"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) { tc.handle(w) })
				req.Model = tc.model
				_, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
				if err == nil {
					t.Fatal("no error")
				}
				msg := err.Error()
				if f.count() != 1 {
					t.Errorf("%d requests: this error must not be retried", f.count())
				}
				if tc.is != nil && !errors.Is(err, tc.is) {
					t.Errorf("errors.Is(%v) is false for %q", tc.is, msg)
				}
				if tc.exactly != "" && msg != strings.ReplaceAll(tc.exactly, "BASE", f.url()) {
					t.Errorf("message\n got %q\nwant %q", msg, strings.ReplaceAll(tc.exactly, "BASE", f.url()))
				}
				for _, w := range tc.want {
					if w = strings.ReplaceAll(w, "BASE", f.url()); !strings.Contains(msg, w) {
						t.Errorf("message %q lacks %q", msg, w)
					}
				}
				if strings.Contains(msg, testKey) || strings.Contains(msg, "secret") {
					t.Errorf("the API key leaked into the error: %q", msg)
				}
			})
		})
	}
}

func TestRetries(t *testing.T) {
	t.Run("429 then success, Retry-After honoured", func(t *testing.T) {
		modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				if req.N == 0 {
					w.Header().Set("Retry-After", "1")
					apiError(w, 429, "rate_limit_exceeded", "requests", "Rate limit reached.")
					return
				}
				reply(w, req, turn{content: "after the wait"})
			})
			start := time.Now()
			resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
			if err != nil || resp.Content != "after the wait" {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if f.count() != 2 {
				t.Errorf("%d requests", f.count())
			}
			if el := time.Since(start); el < 950*time.Millisecond {
				t.Errorf("waited %s for Retry-After: 1 (backoff is 1ms)", el)
			}
		})
	})

	t.Run("503 every time: attempts and status named", func(t *testing.T) {
		modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				apiError(w, 503, nil, "server_error", "The engine is currently overloaded.")
			})
			var attempts []int
			var logs bytes.Buffer
			m := newModel(t, f.url(), func(c *Config) {
				c.Backoff = func(n int) time.Duration { attempts = append(attempts, n); return time.Millisecond }
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			_, err := m.Generate(context.Background(), req)
			want := "failed 3 attempts in a row; the last one got 503 Service Unavailable: The engine is currently overloaded."
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), f.url()) {
				t.Fatalf("err %v", err)
			}
			if f.count() != 3 || !reflect.DeepEqual(attempts, []int{1, 2}) {
				t.Fatalf("%d requests, backoff asked for %v", f.count(), attempts)
			}
			// Each retry is logged, without the key.
			if n := strings.Count(logs.String(), "retrying"); n != 2 || strings.Contains(logs.String(), testKey) {
				t.Errorf("%d retries logged:\n%s", n, logs.String())
			}
		})
	})

	t.Run("500 and 502 then success", func(t *testing.T) {
		modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				switch req.N {
				case 0:
					apiError(w, 500, nil, "server_error", "boom")
				case 1:
					http.Error(w, "<html>Bad Gateway</html>", http.StatusBadGateway)
				default:
					reply(w, req, turn{content: "fine"})
				}
			})
			resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
			if err != nil || resp.Content != "fine" || f.count() != 3 {
				t.Fatalf("resp %+v err %v after %d requests", resp, err, f.count())
			}
		})
	})

	t.Run("connection refused: not retried, nothing listens there", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		url := srv.URL + "/v1"
		srv.Close()
		var tries atomic.Int32
		m := newModel(t, url, func(c *Config) {
			c.Backoff = func(int) time.Duration { tries.Add(1); return time.Millisecond }
		})
		_, err := m.Generate(context.Background(), userReq("x"))
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "nothing is listening at "+url+" (connection refused): start the server, or fix model.base_url") {
			t.Fatalf("err %v", err)
		}
		if tries.Load() != 0 {
			t.Errorf("retried %d times", tries.Load())
		}
	})

	t.Run("a connection cut mid-answer is retried", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			if req.N == 0 {
				hj, _ := w.(http.Hijacker)
				conn, _, _ := hj.Hijack()
				conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{\"id\":"))
				conn.Close()
				return
			}
			reply(w, req, turn{content: "second time"})
		})
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), userReq("x"))
		if err != nil || resp.Content != "second time" || f.count() != 2 {
			t.Fatalf("resp %+v err %v after %d requests", resp, err, f.count())
		}
	})

	t.Run("slow answer beyond CallTimeout", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			waitOrDone(r, 5*time.Second)
		})
		m := newModel(t, f.url(), func(c *Config) { c.CallTimeout = 100 * time.Millisecond; c.MaxRetries = 1 })
		start := time.Now()
		_, err := m.Generate(context.Background(), userReq("x"))
		if err == nil || !strings.Contains(err.Error(), "failed 2 attempts in a row; the last one got no answer within 100ms") {
			t.Fatalf("err %v", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Error("an attempt's timeout must not look like the caller's deadline")
		}
		if f.count() != 2 {
			t.Fatalf("%d requests in %s", f.count(), time.Since(start))
		}
	})

	t.Run("silent stream beyond CallTimeout", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			s.send(chunk(map[string]any{"role": "assistant"}, nil))
			waitOrDone(r, 5*time.Second)
		})
		m := newModel(t, f.url(), func(c *Config) { c.CallTimeout = 100 * time.Millisecond; c.MaxRetries = 1 })
		req := userReq("x")
		req.Stream = func(string) {}
		_, err := m.Generate(context.Background(), req)
		if err == nil || !strings.Contains(err.Error(), "failed 2 attempts in a row; the last one got no data for 100ms") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("a stream that keeps arriving outlasts CallTimeout", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			s := startSSE(w)
			// Gaps far below the timeout, even on a loaded machine, and
			// in all far beyond it.
			for i := range 6 {
				time.Sleep(100 * time.Millisecond)
				s.send(chunkText(fmt.Sprint(i)))
			}
			s.send(chunk(map[string]any{}, "stop"))
			s.done()
		})
		m := newModel(t, f.url(), func(c *Config) { c.CallTimeout = 400 * time.Millisecond })
		req := userReq("x")
		req.Stream = func(string) {}
		resp, err := m.Generate(context.Background(), req)
		if err != nil || resp.Content != "012345" {
			t.Fatalf("resp %+v err %v", resp, err)
		}
	})
}

func TestCancel(t *testing.T) {
	t.Run("during a call", func(t *testing.T) {
		modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
			ctx, cancel := context.WithCancel(context.Background())
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				cancel() // the call is under way: stop it now
				waitOrDone(r, 30*time.Second)
			})
			start := time.Now()
			_, err := newModel(t, f.url(), nil).Generate(ctx, req)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v", err)
			}
			// Well before the server's own wait ends.
			if el := time.Since(start); el > 20*time.Second || f.count() != 1 {
				t.Fatalf("stopped after %s and %d requests", el, f.count())
			}
		})
	})

	t.Run("during the backoff", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			apiError(w, 503, nil, "server_error", "overloaded")
		})
		m := newModel(t, f.url(), func(c *Config) { c.Backoff = func(int) time.Duration { return 10 * time.Second } })
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := m.Generate(ctx, userReq("x"))
		if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second || f.count() != 1 {
			t.Fatalf("err %v after %s and %d requests", err, time.Since(start), f.count())
		}
	})

	t.Run("the caller's deadline stays recognisable", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			waitOrDone(r, 5*time.Second)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
		defer cancel()
		_, err := newModel(t, f.url(), nil).Generate(ctx, userReq("x"))
		// The engine tells a child's timeout by context.DeadlineExceeded.
		if !errors.Is(err, context.DeadlineExceeded) || f.count() != 1 {
			t.Fatalf("err %v after %d requests", err, f.count())
		}
	})
}

func TestNativeJSONSchema(t *testing.T) {
	schema := json.RawMessage(`{"title":"Verdict","type":"object","properties":{"ok":{"type":"boolean"},"reason":{"type":"string"}},"required":["ok"]}`)
	tools := []delegation.ToolDef{
		{Name: "read_file", Description: "Read.", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "Verdict", Description: "Give your answer.", Parameters: schema},
	}
	modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: "{\n  \"ok\": true,\n  \"reason\": \"all good\"\n}"})
		})
		req.Tools, req.ResponseFormat = tools, schema
		// The history holds an earlier JSON answer the engine rejected.
		req.Messages = append(req.Messages,
			&delegation.Message{Role: delegation.RoleAssistant, ToolCalls: []delegation.ToolCall{{ID: "v1", Name: "Verdict", Args: json.RawMessage(`{"ok":"yes"}`)}}},
			&delegation.Message{Role: delegation.RoleTool, ToolCallID: "v1", IsError: true, Content: "Invalid arguments for Verdict: at '/ok': got string, want boolean."},
		)
		m := newModel(t, f.url(), func(c *Config) { c.NativeJSONSchema = true })
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := []delegation.ToolCall{{Name: "Verdict", Args: json.RawMessage(`{"ok":true,"reason":"all good"}`)}}
		if mustJSON(t, resp.ToolCalls) != mustJSON(t, want) || resp.Content != "" {
			t.Fatalf("resp %+v, calls %s", resp, mustJSON(t, resp.ToolCalls))
		}
		got := f.requests()[0]
		if !reflect.DeepEqual(got.Body.toolNames(), []string{"read_file"}) {
			t.Errorf("the structured tool must not be offered: %v", got.Body.toolNames())
		}
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict *bool           `json:"strict"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(got.Body.ResponseFormat, &rf); err != nil {
			t.Fatalf("response_format: %v in %s", err, got.Raw)
		}
		if rf.Type != "json_schema" || rf.JSONSchema.Name != "Verdict" || string(rf.JSONSchema.Schema) != string(schema) ||
			rf.JSONSchema.Strict == nil || *rf.JSONSchema.Strict {
			t.Errorf("response_format %s", got.Body.ResponseFormat)
		}
		// The rejected answer goes back as what the model wrote, and the
		// verdict as a user message: no call of a tool it was not offered.
		n := len(got.Body.Messages)
		prev, verdict := got.Body.Messages[n-2], got.Body.Messages[n-1]
		if prev.Role != "assistant" || prev.text() != `{"ok":"yes"}` || len(prev.ToolCalls) != 0 ||
			verdict.Role != "user" || !strings.Contains(verdict.text(), "at '/ok'") {
			t.Errorf("history: %s", got.Raw)
		}
	})

	t.Run("text that is not JSON stays text", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: "I think it is fine."})
		})
		req := userReq("x")
		req.Tools, req.ResponseFormat = tools, schema
		resp, err := newModel(t, f.url(), func(c *Config) { c.NativeJSONSchema = true }).Generate(context.Background(), req)
		if err != nil || resp.Content != "I think it is fine." || len(resp.ToolCalls) != 0 {
			t.Fatalf("resp %+v err %v", resp, err)
		}
	})

	t.Run("off by default: the tool is offered, no response_format", func(t *testing.T) {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
			reply(w, req, turn{content: `{"ok":true}`})
		})
		req := userReq("x")
		req.Tools, req.ResponseFormat = tools, schema
		resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
		if err != nil || resp.Content != `{"ok":true}` || len(resp.ToolCalls) != 0 {
			t.Fatalf("resp %+v err %v", resp, err)
		}
		b := f.requests()[0].Body
		if !b.hasTool("Verdict") || len(b.ResponseFormat) != 0 {
			t.Errorf("request %s", f.requests()[0].Raw)
		}
	})
}

// TestToolChoiceRequired: an agent with a response_format must answer
// through its tool (delegation.md §10), so the request requires a tool call;
// in native JSON mode the answer is the text, and nothing is forced.
func TestToolChoiceRequired(t *testing.T) {
	tools := []delegation.ToolDef{{Name: "Verdict", Description: "Answer.", Parameters: json.RawMessage(`{"type":"object"}`)}}
	for _, c := range []struct {
		name   string
		native bool
		choice string
		want   string
	}{
		{"required when asked", false, delegation.ToolChoiceRequired, `"required"`},
		{"left to the model otherwise", false, "", ""},
		{"not forced in native JSON mode", true, delegation.ToolChoiceRequired, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				reply(w, req, turn{content: `{"ok":true}`})
			})
			req := userReq("x")
			req.Tools, req.ToolChoice = tools, c.choice
			if c.native {
				req.ResponseFormat = json.RawMessage(`{"title":"Verdict","type":"object"}`)
			}
			if _, err := newModel(t, f.url(), func(cfg *Config) { cfg.NativeJSONSchema = c.native }).Generate(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if got := string(f.requests()[0].Body.ToolChoice); got != c.want {
				t.Fatalf("tool_choice = %s, want %s", got, c.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"ftp://example.com/v1", "localhost:8080/v1", "/v1", "http://", "not a url", "http://x/v1?key=k"} {
		if _, err := New(Config{BaseURL: bad, Model: "m"}); err == nil || !strings.Contains(err.Error(), "model.base_url") {
			t.Errorf("base URL %q: err %v", bad, err)
		}
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:8080/v1"}); err == nil || !strings.Contains(err.Error(), "model.model") {
		t.Errorf("no model: err %v", err)
	}
	m, err := New(Config{Model: "gpt-4.1-mini", APIKey: testKey})
	if err != nil || m.baseURL != DefaultBaseURL || m.retrier.MaxRetries != DefaultMaxRetries || m.callTimeout != DefaultCallTimeout {
		t.Fatalf("defaults: %+v %v", m, err)
	}
	if m, _ := New(Config{BaseURL: "http://user:pw@x/v1/", Model: "m", MaxRetries: -1}); m.retrier.MaxRetries != 0 || m.baseURL != "http://x/v1" {
		t.Errorf("MaxRetries -1 means none; got %d, base %q", m.retrier.MaxRetries, m.baseURL)
	}
	for _, s := range []string{fmt.Sprint(Config{APIKey: testKey}), fmt.Sprintf("%+v", Config{APIKey: testKey}),
		fmt.Sprintf("%#v", Config{APIKey: testKey}), fmt.Sprintf("%+v", m), fmt.Sprintf("%+v", *m)} {
		if strings.Contains(s, "secret") {
			t.Errorf("the key is printed: %s", s)
		}
	}
}

func TestKeyFromEnv(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "from-default")
	t.Setenv("MY_KEY", "from-named")
	if got := KeyFromEnv("MY_KEY"); got != "from-named" {
		t.Errorf("named: %q", got)
	}
	// OPENAI_API_KEY's key is for OpenAI: a scenario that names another
	// variable for another endpoint must never be sent it.
	if got := KeyFromEnv("UNSET_KEY_VAR_FOR_TEST"); got != "" {
		t.Errorf("an unset named variable must not fall back to OPENAI_API_KEY: got %q", got)
	}
	if got := KeyFromEnv(""); got != "from-default" {
		t.Errorf("default: %q", got)
	}
	t.Setenv("OPENAI_API_KEY", "")
	if got := KeyFromEnv(""); got != "" {
		t.Errorf("none: %q", got)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		h    map[string]string
		want time.Duration
		ok   bool
	}{
		{map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{map[string]string{"Retry-After-Ms": "250"}, 250 * time.Millisecond, true},
		{map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 3 * time.Second, true},
		{map[string]string{"Retry-After": "3600"}, remote.MaxRetryAfter, true},
		{map[string]string{"Retry-After": "soon"}, 0, false},
		{map[string]string{}, 0, false},
	}
	for _, c := range cases {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		got, ok := remote.RetryAfter(h, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: got %s %v, want %s %v", c.h, got, ok, c.want, c.ok)
		}
	}
	for n := 1; n <= 10; n++ {
		if d := remote.DefaultBackoff(n); d <= 0 || d > 8*time.Second {
			t.Errorf("backoff %d: %s", n, d)
		}
	}
	if d := remote.DefaultBackoff(1); d < 125*time.Millisecond || d > 250*time.Millisecond {
		t.Errorf("first backoff %s", d)
	}
}
