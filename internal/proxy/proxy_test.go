package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/internal/trace"
)

// The recording endpoint, driven by a real OpenAI client (go-openai) over
// loopback, in front of upstreams that answer as OpenAI-compatible servers
// do. Sessions are recorded into memory and read back as traces.

// memStore keeps each session's events.
type memStore struct {
	mu       sync.Mutex
	sessions []*memSession
}

type memSession struct {
	id, name string
	origin   *delegation.Origin
	stop     func()
	mu       sync.Mutex
	events   []delegation.Event
	live     []delegation.Event
	done     chan struct{}
}

func (s *memSession) Emit(ev delegation.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Seq == 0 {
		s.live = append(s.live, ev)
		return
	}
	s.events = append(s.events, ev)
}

func (m *memStore) Open(_ context.Context, name string, origin *delegation.Origin, stop func()) (proxy.Recording, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &memSession{id: fmt.Sprintf("s%d", len(m.sessions)+1), name: name, origin: origin, stop: stop, done: make(chan struct{})}
	m.sessions = append(m.sessions, s)
	return proxy.Recording{ID: s.id, Sink: s, Done: func() error { close(s.done); return nil }}, nil
}

func (m *memStore) all() []*memSession {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*memSession(nil), m.sessions...)
}

// trace is a session's log as a store would read it back.
func (s *memSession) trace(t *testing.T) *trace.Trace {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	tr, err := trace.Build(trace.Meta{ID: s.id}, s.events)
	if err != nil {
		t.Fatal(err)
	}
	// What a store reads back must be a valid trace (one still running is
	// checked as if it had been interrupted now: import takes no running).
	status := tr.Session.Status
	if status == delegation.StatusRunning {
		tr.Session.Status = delegation.StatusInterrupted
	}
	raw, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := trace.Parse(raw)
	if err != nil {
		t.Fatalf("the recorded session is not a valid trace: %v", err)
	}
	back.Session.Status = status
	return back
}

type harness struct {
	p      *proxy.Proxy
	store  *memStore
	srv    *httptest.Server
	client *goopenai.Client
	logs   *bytes.Buffer
	now    time.Time
	mu     sync.Mutex
}

type options struct {
	timeout  time.Duration
	header   http.Header // sent with every request
	taskTool string
}

func newHarness(t *testing.T, up proxy.Upstream, o options) *harness {
	t.Helper()
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{store: &memStore{}, logs: &bytes.Buffer{}, now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	log := slog.New(slog.NewTextHandler(syncWriter{h}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.p = proxy.New(proxy.Config{Upstream: up, Store: h.store, Counter: counter, Tokenizer: tokens.Default,
		Timeout: o.timeout, TaskTool: o.taskTool, Now: h.clock, Logger: log})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		h.p.ServeChat(w, r)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { h.p.ServeModels(w, r, "") })
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() { h.srv.Close(); h.p.Close() })
	cfg := goopenai.DefaultConfig("sk-callers-own")
	cfg.BaseURL = h.srv.URL + "/v1"
	if o.header != nil {
		cfg.HTTPClient = &http.Client{Transport: headerTransport{o.header}}
	}
	h.client = goopenai.NewClientWithConfig(cfg)
	return h
}

type syncWriter struct{ h *harness }

func (w syncWriter) Write(b []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.h.logs.Write(b)
}

// latest is the harness's clock now, without moving it.
func (h *harness) latest() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(time.Millisecond)
	return h.now
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = vs
	}
	return http.DefaultTransport.RoundTrip(r)
}

// post sends a raw body and returns the status and the answer.
func (h *harness) post(t *testing.T, body string, header map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// upstream is an OpenAI-compatible server a test writes the answers of.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []seen
}

type seen struct {
	auth string
	body map[string]any
}

func newUpstream(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body map[string]any)) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		u.mu.Lock()
		u.got = append(u.got, seen{auth: r.Header.Get("Authorization"), body: body})
		u.mu.Unlock()
		answer(w, r, body)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.got...)
}

func mustHTTP(t *testing.T, base, key string) *proxy.HTTPUpstream {
	t.Helper()
	up, err := proxy.NewHTTPUpstream(base, key)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_123")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func completion(msg map[string]any, finish string) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}
}

func taskCall(id, typ, desc string) map[string]any {
	args, _ := json.Marshal(map[string]string{"description": desc, "subagent_type": typ})
	return map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "task", "arguments": string(args)}}
}

var taskTool = goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "task",
	Description: "Delegate.", Parameters: json.RawMessage(`{"type":"object","properties":{"description":{"type":"string"},"subagent_type":{"type":"string"}}}`)}}

func TestWholeAnswersRelayedAndRecorded(t *testing.T) {
	// The parent delegates to two children in one answer (parallel tool
	// calls); their requests come; the parent's next request holds both
	// receipts.
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		msgs := body["messages"].([]any)
		last := msgs[len(msgs)-1].(map[string]any)
		switch {
		case last["role"] == "user" && strings.HasPrefix(last["content"].(string), "Find"):
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				taskCall("call_a", "researcher", "Look up order A-7731."), taskCall("call_b", "forker", "Report it.")}}, "tool_calls"))
		case last["role"] == "tool":
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "All done."}, "stop"))
		case strings.Contains(last["content"].(string), "A-7731"):
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "Order A-7731 is late."}, "stop"))
		default:
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "It is A-7731."}, "stop"))
		}
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	ctx := context.Background()
	system := goopenai.ChatCompletionMessage{Role: "system", Content: "You are main."}
	prompt := goopenai.ChatCompletionMessage{Role: "user", Content: "Find order A-7731, then report."}
	schema := &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{Name: "answer", Schema: json.RawMessage(`{"type":"object"}`)}}
	first, err := h.client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Tools: []goopenai.Tool{taskTool},
		ParallelToolCalls: true, ResponseFormat: schema, Messages: []goopenai.ChatCompletionMessage{system, prompt}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(first.Choices[0].Message.ToolCalls); got != 2 {
		t.Fatalf("the answer relayed holds %d tool calls, want 2", got)
	}
	if got := first.Header().Get("X-Request-Id"); got != "req_123" {
		t.Errorf("the upstream's request id was not relayed: %q", got)
	}
	// The children, the fork's request after the isolated child's.
	iso, err := h.client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{
		{Role: "system", Content: "You research."}, {Role: "user", Content: "Look up order A-7731."}}})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := h.client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{
		system, prompt, {Role: "user", Content: "You continue as a subagent.\n\nReport it."}}})
	if err != nil {
		t.Fatal(err)
	}
	answer := first.Choices[0].Message
	last, err := h.client.CreateChatCompletion(ctx, goopenai.ChatCompletionRequest{Model: "m", Tools: []goopenai.Tool{taskTool},
		Messages: []goopenai.ChatCompletionMessage{system, prompt, answer,
			{Role: "tool", ToolCallID: "call_a", Content: iso.Choices[0].Message.Content},
			{Role: "tool", ToolCallID: "call_b", Content: fork.Choices[0].Message.Content}}})
	if err != nil || last.Choices[0].Message.Content != "All done." {
		t.Fatalf("last answer: %v %+v", err, last)
	}

	reqs := up.requests()
	if len(reqs) != 4 {
		t.Fatalf("the upstream got %d requests, want 4", len(reqs))
	}
	if got := reqs[0].auth; got != "Bearer sk-callers-own" {
		t.Errorf("the caller's Authorization went on as %q", got)
	}
	if rf, _ := reqs[0].body["response_format"].(map[string]any); rf["type"] != "json_schema" || reqs[0].body["parallel_tool_calls"] != true {
		t.Errorf("the body was not forwarded whole: %v", reqs[0].body)
	}
	sessions := h.store.all()
	if len(sessions) != 1 {
		t.Fatalf("%d sessions, want 1", len(sessions))
	}
	tr := sessions[0].trace(t)
	var agents []string
	for _, a := range tr.Agents {
		agents = append(agents, fmt.Sprintf("%s/%s/%s", a.ID, a.Name, deref(a.Mode)))
	}
	if got := strings.Join(agents, " "); got != "main/main/- a1/researcher/isolated a2/forker/fork" {
		t.Errorf("agents: %s", got)
	}
	lists := trace.Lists(tr)
	main := lists["main"]
	if got := fmt.Sprintf("%d %s %s", len(main), main[2].Kind, main[3].Kind); got != "5 receipt receipt" {
		t.Errorf("the main agent's list: %s (want its prompt, the answer with two calls, two receipts, the answer)", got)
	}
	if got := fmt.Sprint(tr.ModelCalls[2].Context); got != "[{main 0 1} {a2 0 1}]" {
		t.Errorf("the fork's context is %s: its inherited part is a range of the parent's list", got)
	}
	if u := tr.ModelCalls[0].Usage; u == nil || u.PromptTokens != 50 {
		t.Errorf("the reported usage was not recorded beside ours: %+v", u)
	}
	if r := tr.ModelCalls[0].Response; r == nil || *r != (delegation.ResponseMeta{ID: "chatcmpl-1", Model: "m", FinishReason: "tool_calls"}) {
		t.Errorf("what the upstream said of its answer: %+v, want its id, model and finish_reason as sent", r)
	}
	if o := tr.Session.Origin; o == nil || o.Kind != delegation.OriginProxy || o.Upstream != up.srv.URL || o.Provider != "openai" || !strings.Contains(o.Service, "OpenAI") && o.Service == "" {
		t.Errorf("origin: %+v", o)
	}
	// Stored once: 4 calls, 5 + 2 + 2 messages, not the sum of the contexts.
	if got := len(tr.Messages); got != 9 {
		t.Errorf("%d messages stored, want 9: each once", got)
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// sse writes one event and flushes it.
func sse(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

func chunk(delta map[string]any, finish any) map[string]any {
	return map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
}

func TestStreamRelayedChunkByChunk(t *testing.T) {
	// The upstream holds the rest of its answer until the client has read
	// the first piece: a proxy that buffered would never let it go on.
	release := make(chan struct{})
	var held sync.WaitGroup // done once the upstream goes on
	held.Add(1)
	waitedInVain := false
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, chunk(map[string]any{"role": "assistant", "content": "Hel"}, nil))
		select {
		case <-release:
		case <-time.After(10 * time.Second):
			waitedInVain = true // the client never got the first piece
		case <-r.Context().Done():
			return
		}
		held.Done()
		sse(w, chunk(map[string]any{"content": "lo."}, nil))
		sse(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
			"function": map[string]any{"name": "ls", "arguments": `{"pa`}}}}, nil))
		sse(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `th":"/"}`}}}}, nil))
		sse(w, chunk(map[string]any{}, "tool_calls"))
		sse(w, map[string]any{"id": "c", "object": "chat.completion.chunk", "choices": []any{},
			"usage": map[string]any{"prompt_tokens": 11, "completion_tokens": 7}})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	st, err := h.client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Stream: true,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
		Messages:      []goopenai.ChatCompletionMessage{{Role: "user", Content: "Say hello, then list the files."}}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	first, err := st.Recv()
	if err != nil || first.Choices[0].Delta.Content != "Hel" {
		t.Fatalf("first chunk: %v %+v", err, first)
	}
	// While the upstream waits, the studio already shows the text.
	s := h.store.all()[0]
	s.mu.Lock()
	live := append([]delegation.Event(nil), s.live...)
	s.mu.Unlock()
	if len(live) != 1 || live[0].Type != delegation.EventModelDelta {
		t.Errorf("live events while the answer streams: %+v", live)
	}
	close(release)
	var text, args strings.Builder
	text.WriteString(first.Choices[0].Delta.Content)
	var usage *goopenai.Usage
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	held.Wait()
	if waitedInVain {
		t.Fatal("the first chunk reached the client only after the upstream gave up waiting: the stream was buffered")
	}
	if text.String() != "Hello." || args.String() != `{"path":"/"}` || usage == nil || usage.PromptTokens != 11 {
		t.Errorf("the client read %q, %q, usage %+v", text.String(), args.String(), usage)
	}
	tr := s.trace(t)
	out := trace.Lists(tr)["main"][1]
	if out.Content != "Hello." || len(out.ToolCalls) != 1 || string(out.ToolCalls[0].Args) != `{"path":"/"}` || out.ToolCalls[0].ID != "call_1" {
		t.Errorf("the recorded answer: %+v", out)
	}
	if u := tr.ModelCalls[0].Usage; u == nil || u.CompletionTokens != 7 {
		t.Errorf("usage: %+v", u)
	}
	if r := tr.ModelCalls[0].Response; r == nil || *r != (delegation.ResponseMeta{ID: "c", Model: "m", FinishReason: "tool_calls"}) {
		t.Errorf("what the stream said of its answer: %+v", r)
	}
}

func TestPiecesAtHandGoTogetherNoneWaits(t *testing.T) {
	// The upstream sends two whole events and the start of a third in one
	// write, then holds the rest until the client has the two: the relay
	// may send the two in one write, but must not hold them for the third.
	release := make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let() // a failing test must not leave the upstream waiting
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		a, _ := json.Marshal(chunk(map[string]any{"role": "assistant", "content": "One"}, nil))
		b, _ := json.Marshal(chunk(map[string]any{"content": " two"}, nil))
		c, _ := json.Marshal(chunk(map[string]any{"content": " three."}, "stop"))
		fmt.Fprintf(w, "data: %s\n\ndata: %s\n\ndata: %s", a, b, c[:10])
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, "%s\n\ndata: [DONE]\n\n", c[10:])
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	got := make(chan string, 10) // what the client has read so far, after each piece
	go func() {
		defer close(got)
		st, err := h.client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Stream: true,
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Count to three."}}})
		if err != nil {
			got <- err.Error()
			return
		}
		defer st.Close()
		var text strings.Builder
		for {
			c, err := st.Recv()
			if err != nil {
				return
			}
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
			got <- text.String()
		}
	}()
	for _, want := range []string{"One", "One two"} {
		select {
		case text := <-got:
			if text != want {
				t.Fatalf("the client read %q, want %q", text, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the client did not get %q while the upstream held the rest: the relay waited for the next event", want)
		}
	}
	let()
	if text := <-got; text != "One two three." {
		t.Errorf("the client read %q at the end", text)
	}
	for range got {
	}
	if out := trace.Lists(h.store.all()[0].trace(t))["main"][1]; out.Content != "One two three." {
		t.Errorf("recorded %q", out.Content)
	}
}

func TestAnswerRecordedBeforeItsLastBytes(t *testing.T) {
	// A client may send its next request the moment it has read [DONE]; by
	// then the answer's task call must be waiting for its child.
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		msgs := body["messages"].([]any)
		if len(msgs) == 1 && strings.HasPrefix(msgs[0].(map[string]any)["content"].(string), "Delegate") {
			sse(w, chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "t1", "type": "function",
				"function": map[string]any{"name": "task", "arguments": `{"description":"Count to three.","subagent_type":"counter"}`}}}}, "tool_calls"))
		} else {
			sse(w, chunk(map[string]any{"role": "assistant", "content": "1 2 3"}, "stop"))
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	for i := 0; i < 20; i++ {
		for _, content := range []string{fmt.Sprintf("Delegate, run %d.", i), "Count to three."} {
			st, err := h.client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Stream: true,
				Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: content}}})
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.Recv(); err != nil {
					break
				}
			}
			st.Close()
		}
	}
	for i, s := range h.store.all() {
		tr := s.trace(t)
		if len(tr.Agents) != 2 || deref(tr.Agents[1].Mode) != "isolated" {
			t.Fatalf("run %d: the child's request did not find its task call: %+v", i, tr.Agents)
		}
	}
	if n := len(h.store.all()); n != 20 {
		t.Errorf("%d sessions, want 20 (one per run: each opens with its own prompt)", n)
	}
}

func TestUpstreamErrorsRelayedWithTheirStatus(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		writeJSON(w, 500, map[string]any{"error": map[string]any{"message": "The server had an error while processing your request.",
			"type": "server_error", "param": nil, "code": nil}})
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	_, err := h.client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m",
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Hi."}}})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 || apiErr.Message != "The server had an error while processing your request." || apiErr.Type != "server_error" {
		t.Fatalf("the client got %v", err)
	}
	tr := h.store.all()[0].trace(t)
	if fin := finished(t, tr); fin[0].Error != "the upstream answered 500 Internal Server Error: The server had an error while processing your request." {
		t.Errorf("recorded error: %q", fin[0].Error)
	}
}

// finished is the calls of a trace: their errors, in the order they began.
func finished(_ *testing.T, tr *trace.Trace) []trace.ModelCall { return tr.ModelCalls }

func TestSilentUpstreamIsCut(t *testing.T) {
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, chunk(map[string]any{"role": "assistant", "content": "Let me"}, nil))
		}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{timeout: 200 * time.Millisecond})
	t.Run("before the answer starts: 504", func(t *testing.T) {
		_, err := h.client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m",
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Hang."}}})
		var apiErr *goopenai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 504 || !strings.Contains(apiErr.Message, "sent nothing for 200ms") {
			t.Fatalf("the client got %v", err)
		}
	})
	t.Run("in the middle of a stream: an error event", func(t *testing.T) {
		st, err := h.client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Stream: true,
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Hang later."}}})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if c, err := st.Recv(); err != nil || c.Choices[0].Delta.Content != "Let me" {
			t.Fatalf("first chunk: %v", err)
		}
		_, err = st.Recv()
		if err == nil || !strings.Contains(err.Error(), "sent nothing for 200ms") {
			t.Fatalf("after the silence the client read %v", err)
		}
	})
	for _, s := range h.store.all() {
		if fin := finished(t, s.trace(t)); len(fin) != 1 || !strings.Contains(fin[0].Error, "the call was cut") {
			t.Errorf("recorded: %+v", fin)
		}
	}
}

func TestClientThatLeavesIsRecorded(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		sse(w, chunk(map[string]any{"role": "assistant", "content": "Working"}, nil))
		<-r.Context().Done()
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := h.client.CreateChatCompletionStream(ctx, goopenai.ChatCompletionRequest{Model: "m", Stream: true,
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Go."}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	st.Close()
	s := h.store.all()[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.events)
		last := s.events[n-1].Type
		s.mu.Unlock()
		if last == delegation.EventModelFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fin := finished(t, s.trace(t)); fin[0].Error != "the client closed the connection before the answer was complete" {
		t.Errorf("recorded: %q", fin[0].Error)
	}
}

func TestMalformedRequestsAnsweredAsOpenAIWould(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		t.Error("a malformed request reached the upstream")
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	for _, c := range []struct{ body, param, code, msg string }{
		{`{"model": "m", "messages": [`, "", "", "We could not parse the JSON body"},
		{`[1, 2]`, "", "", "expected a JSON object"},
		{`{"messages": [{"role": "user", "content": "hi"}]}`, "", "", "you must provide a model parameter"},
		{`{"model": "m"}`, "messages", "missing_required_parameter", "Missing required parameter: 'messages'."},
		{`{"model": "m", "messages": []}`, "messages", "empty_array", "Invalid 'messages': empty array."},
		{`{"model": "m", "messages": [{"content": "hi"}]}`, "messages[0].role", "missing_required_parameter", "Missing required parameter: 'messages[0].role'."},
		{`{"model": "m", "messages": [{"role": "bot", "content": "hi"}]}`, "messages[0].role", "invalid_value", "Invalid value: 'bot'."},
		{`{"model": "m", "messages": [{"role": "user", "content": 7}]}`, "messages[0].content", "invalid_type", "expected one of a string or array of objects, but got an integer instead"},
		{`{"model": "m", "messages": [{"role": "user"}]}`, "messages[0].content", "missing_required_parameter", ""},
		{`{"model": "m", "messages": [{"role": "tool", "content": "x"}]}`, "messages[0].tool_call_id", "missing_required_parameter", ""},
		{`{"model": "m", "stream": "yes", "messages": [{"role": "user", "content": "hi"}]}`, "stream", "invalid_type", "expected a boolean, but got a string instead"},
		{`{"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": {}}}]}]}`,
			"messages[0].tool_calls[0].function.arguments", "invalid_type", ""},
		{`{"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "bad name"}}]}`,
			"tools[0].function.name", "invalid_value", ""},
		{`{"model": "m", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "yaml"}}`, "response_format.type", "invalid_value", ""},
		{`{"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]}`, "messages[0].content[0].type", "invalid_value", ""},
	} {
		status, body := h.post(t, c.body, nil)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Errorf("%s: not an error object: %s", c.body, body)
			continue
		}
		if status != 400 || e.Error.Type != "invalid_request_error" || deref(e.Error.Param) != orDash(c.param) ||
			deref(e.Error.Code) != orDash(c.code) || !strings.Contains(e.Error.Message, c.msg) {
			t.Errorf("%s:\n got %d %s", c.body, status, body)
		}
	}
	if n := len(h.store.all()); n != 0 {
		t.Errorf("%d sessions were opened by malformed requests", n)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func TestKeyFromTheEnvironmentNeverLeaves(t *testing.T) {
	const key = "sk-studio-operators-secret-0123456789"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "Hi."}, "stop"))
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, key), options{})
	if status, body := h.post(t, `{"model": "m", "messages": [{"role": "user", "content": "Hi."}]}`, nil); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	h.post(t, `{"model": "m", "messages": [{"role": "user", "content": "Again."}]}`, map[string]string{"Authorization": "Bearer sk-mine"})
	reqs := up.requests()
	if reqs[0].auth != "Bearer "+key || reqs[1].auth != "Bearer sk-mine" {
		t.Errorf("Authorization sent: %q, then %q: the environment's key without one, the caller's own with one", reqs[0].auth, reqs[1].auth)
	}
	h.p.Close()
	for _, s := range h.store.all() {
		raw, _ := json.Marshal(s.trace(t))
		if bytes.Contains(raw, []byte("sk-")) {
			t.Errorf("a key is in the recorded session: %s", raw)
		}
	}
	h.mu.Lock()
	logs := h.logs.String()
	h.mu.Unlock()
	if strings.Contains(logs, "sk-") {
		t.Errorf("a key is in the logs:\n%s", logs)
	}
}

func TestNoUpstream(t *testing.T) {
	h := newHarness(t, nil, options{})
	status, body := h.post(t, `{"model": "m", "messages": [{"role": "user", "content": "Hi."}]}`, nil)
	if status != 503 || !strings.Contains(string(body), "--upstream-url") {
		t.Errorf("%d %s", status, body)
	}
}

// OpenAI refuses a string of more than 10,485,760 characters, naming it
// and its length; one of exactly that many is taken, however many bytes
// they are.
func TestStringsAreCappedAsOpenAICapsThem(t *testing.T) {
	for _, c := range []struct{ body, param, msg string }{
		{`{"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "` + strings.Repeat("é", proxy.MaxString+1) + `"}]}`,
			"messages[1].content", fmt.Sprintf("Invalid 'messages[1].content': string too long. "+
				"Expected a string with maximum length 10485760, but got a string with length %d instead.", proxy.MaxString+1)},
		{`{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "` + strings.Repeat("a", proxy.MaxString+1) + `"}]}]}`,
			"messages[0].content[0].text", "Invalid 'messages[0].content[0].text': string too long."},
	} {
		_, err := proxy.Parse([]byte(c.body))
		if err == nil || err.Status != 400 || err.Param != c.param || err.Code != "string_above_max_length" || !strings.Contains(err.Message, c.msg) {
			t.Errorf("%s: got %+v", c.param, err)
		}
	}
	body := `{"model": "m", "messages": [{"role": "user", "content": "` + strings.Repeat("é", proxy.MaxString) + `"}]}`
	if _, err := proxy.Parse([]byte(body)); err != nil {
		t.Errorf("%d characters (%d bytes) refused: %s", proxy.MaxString, 2*proxy.MaxString, err.Message)
	}
}
