package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeServer speaks the chat-completions wire format on 127.0.0.1: it
// records every request and answers through a handler.
type fakeServer struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []*wireReq
	handle func(w http.ResponseWriter, r *http.Request, req *wireReq)
}

// wireReq is one recorded request.
type wireReq struct {
	Header http.Header
	Raw    []byte
	Body   wireBody
	N      int // 0 for the first request the server got
}

type wireBody struct {
	Model         string     `json:"model"`
	Messages      []wireMsg  `json:"messages"`
	Tools         []wireTool `json:"tools"`
	Stream        bool       `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    json.RawMessage `json:"response_format"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
}

type wireMsg struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []wireCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
}

func (m wireMsg) text() string {
	if m.Content == nil {
		return ""
	}
	return *m.Content
}

type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

func (b wireBody) system() string {
	if len(b.Messages) > 0 && b.Messages[0].Role == "system" {
		return b.Messages[0].text()
	}
	return ""
}

func (b wireBody) last() wireMsg {
	if len(b.Messages) == 0 {
		return wireMsg{}
	}
	return b.Messages[len(b.Messages)-1]
}

func (b wireBody) toolNames() []string {
	var out []string
	for _, t := range b.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

func (b wireBody) hasTool(name string) bool {
	for _, t := range b.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// assistants counts the assistant messages: how far an agent has got.
func (b wireBody) assistants() int {
	n := 0
	for _, m := range b.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// contains searches every message's text and tool calls.
func (b wireBody) contains(s string) bool {
	for _, m := range b.Messages {
		if strings.Contains(m.text(), s) {
			return true
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Function.Arguments, s) {
				return true
			}
		}
	}
	return false
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, req *wireReq)) *fakeServer {
	t.Helper()
	f := &fakeServer{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &wireReq{Header: r.Header.Clone(), Raw: raw}
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			t.Errorf("request body is not JSON: %v\n%s", err, raw)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		req.N = len(f.reqs)
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		f.handle(w, r, req)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the base URL the adapter is given.
func (f *fakeServer) url() string { return f.srv.URL + "/v1" }

func (f *fakeServer) requests() []*wireReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wireReq(nil), f.reqs...)
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// turn is a model answer the fake server sends, as JSON or as a stream,
// whichever the request asked for.
type turn struct {
	content string
	calls   []tcall
	usage   [2]int // prompt, completion; zero: none
}

type tcall struct{ id, name, args string }

func reply(w http.ResponseWriter, req *wireReq, tr turn) {
	if req.Body.Stream {
		replyStream(w, req, tr)
		return
	}
	msg := map[string]any{"role": "assistant", "content": tr.content}
	if tr.content == "" && len(tr.calls) > 0 {
		msg["content"] = nil
	}
	finish := "stop"
	if len(tr.calls) > 0 {
		var calls []any
		for _, c := range tr.calls {
			calls = append(calls, map[string]any{"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	body := map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Body.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}}
	if tr.usage != [2]int{} {
		body["usage"] = map[string]any{"prompt_tokens": tr.usage[0], "completion_tokens": tr.usage[1],
			"total_tokens": tr.usage[0] + tr.usage[1]}
	}
	writeJSON(w, http.StatusOK, body)
}

// replyStream sends a turn as SSE: the text word by word, each tool call's
// arguments in three pieces, the calls interleaved by index.
func replyStream(w http.ResponseWriter, req *wireReq, tr turn) {
	s := startSSE(w)
	s.send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, word := range strings.SplitAfter(tr.content, " ") {
		if word != "" {
			s.send(chunkText(word))
		}
	}
	for i, c := range tr.calls {
		s.send(chunkCall(i, c.id, c.name, ""))
	}
	for p := range 3 {
		for i, c := range tr.calls {
			s.send(chunkCall(i, "", "", third(c.args, p)))
		}
	}
	finish := "stop"
	if len(tr.calls) > 0 {
		finish = "tool_calls"
	}
	s.send(chunk(map[string]any{}, finish))
	if tr.usage != [2]int{} && req.Body.StreamOptions != nil && req.Body.StreamOptions.IncludeUsage {
		s.send(chunkUsage(tr.usage[0], tr.usage[1]))
	}
	s.done()
}

// third is the p-th of three pieces of s.
func third(s string, p int) string {
	n := len(s)
	return s[n*p/3 : n*(p+1)/3]
}

type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sseWriter{w: w, f: f}
	s.flush()
	return s
}

func (s *sseWriter) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sseWriter) send(v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

func (s *sseWriter) done() {
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.flush()
}

func chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func chunkText(s string) map[string]any { return chunk(map[string]any{"content": s}, nil) }

func chunkCall(index int, id, name, args string) map[string]any {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	if name != "" {
		tc["function"].(map[string]any)["name"] = name
	}
	return chunk(map[string]any{"tool_calls": []any{tc}}, nil)
}

func chunkUsage(prompt, completion int) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion,
			"total_tokens": prompt + completion}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers with an error in OpenAI's shape.
func apiError(w http.ResponseWriter, status int, code any, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil}})
}

// waitOrDone blocks until the client gives up on the request, or d passes:
// a slow endpoint that a test does not leave hanging.
func waitOrDone(r *http.Request, d time.Duration) {
	select {
	case <-r.Context().Done():
	case <-time.After(d):
	}
}

// testKey is the key the tests send; no error may contain it.
const testKey = "sk-test-secret-0123456789"

func newModel(t *testing.T, baseURL string, mod func(*Config)) *Model {
	t.Helper()
	cfg := Config{BaseURL: baseURL, Model: "test-model", APIKey: testKey, MaxRetries: 2,
		Backoff: func(int) time.Duration { return time.Millisecond }, CallTimeout: 3 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}
