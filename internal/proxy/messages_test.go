package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/trace"
)

// POST /v1/messages: Anthropic's Messages API on the recording endpoint,
// over loopback, in front of a fake Anthropic server (or a script), the
// requests written as Anthropic's SDKs write them.

// messagesServer serves the harness's proxy's POST /v1/messages.
func messagesServer(t *testing.T, h *harness) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		h.p.ServeMessages(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type msgAnswer struct {
	status int
	header http.Header
	body   []byte
	events []sseEvent // when streamed
}

type sseEvent struct {
	name string
	data map[string]any
}

// send posts a Messages request; a streamed answer is read event by event.
func send(t *testing.T, base string, body any, header map[string]string) msgAnswer {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := msgAnswer{status: resp.StatusCode, header: resp.Header}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		a.body, _ = io.ReadAll(resp.Body)
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev.data); err != nil {
				t.Fatalf("an event's data is not JSON: %q", line)
			}
		case line == "" && ev.name == "" && ev.data == nil:
			// A blank line after a comment, or a second one: no event, as
			// an SSE client reads it.
		case line == "":
			if ev.data["type"] != ev.name {
				t.Errorf("event %q carries data of type %v", ev.name, ev.data["type"])
			}
			a.events = append(a.events, ev)
			ev = sseEvent{}
		}
	}
	return a
}

func (a msgAnswer) names() string {
	var n []string
	for _, e := range a.events {
		n = append(n, e.name)
	}
	return strings.Join(n, " ")
}

func (a msgAnswer) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("answer %d is not JSON: %s", a.status, a.body)
	}
	return v
}

// anthropicUpstream is a fake Anthropic server a test writes the answers
// of; it keeps what each request carried.
type anthropicUpstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []http.Header
}

func newAnthropic(t *testing.T, answer func(w http.ResponseWriter, body map[string]any)) *anthropicUpstream {
	u := &anthropicUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			http.Error(w, "not here: "+r.URL.Path, http.StatusNotFound)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		u.mu.Lock()
		u.got = append(u.got, r.Header.Clone())
		u.mu.Unlock()
		answer(w, body)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *anthropicUpstream) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.got...)
}

func mustAnthropic(t *testing.T, base, key string) *proxy.AnthropicUpstream {
	t.Helper()
	up, err := proxy.NewAnthropicUpstream(base, key)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

func message(stop string, usage map[string]any, blocks ...map[string]any) map[string]any {
	return map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
		"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
}

func textBlock(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
func useBlock(id, name string, input any) map[string]any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
}
func resultBlock(id, content string, isError bool) map[string]any {
	b := map[string]any{"type": "tool_result", "tool_use_id": id, "content": content}
	if isError {
		b["is_error"] = true
	}
	return b
}

var subagentTool = map[string]any{"name": "subagent", "description": "派一个子 Agent 独立完成一项子任务，返回结论摘要。",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"task": map[string]any{"type": "string"}}, "required": []string{"task"}}}
var grepTool = map[string]any{"name": "grep", "description": "Search files.",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"pattern": map[string]any{"type": "string"}}}}

const loopTask = "Find where the port is read. Return: file and line."

func TestMessagesWholeAnswersForwardedAndRecorded(t *testing.T) {
	// The third article's loop: main calls its subagent tool; the child,
	// a request whose first user message is the task, greps (a failing
	// tool, is_error) and answers; main's next request holds the receipt.
	up := newAnthropic(t, func(w http.ResponseWriter, body map[string]any) {
		msgs := body["messages"].([]any)
		first := msgs[0].(map[string]any)["content"]
		usage := map[string]any{"input_tokens": 12, "output_tokens": 7, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 30}
		var ans map[string]any
		switch {
		case first == "Where is the port read?" && len(msgs) == 1:
			ans = message("tool_use", usage, textBlock("I will delegate."), useBlock("toolu_1", "subagent", map[string]string{"task": loopTask}))
		case first == loopTask && len(msgs) == 1:
			ans = message("tool_use", usage, useBlock("toolu_2", "grep", map[string]string{"pattern": "PORT"}))
		case first == loopTask:
			ans = message("end_turn", usage, textBlock("config.py:3."))
		default:
			ans = message("end_turn", usage, textBlock("It is read in config.py, line 3."))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_011")
		w.Header().Set("Anthropic-Ratelimit-Requests-Remaining", "99")
		_ = json.NewEncoder(w).Encode(ans)
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL, "sk-ant-operator"), options{taskTool: "subagent"})
	base := messagesServer(t, h)
	key := map[string]string{"X-Api-Key": "sk-ant-callers-own"}
	call := func(msgs []any, tools ...any) map[string]any {
		t.Helper()
		a := send(t, base, map[string]any{"model": "claude-opus-5-5", "max_tokens": 8000, "tools": tools, "messages": msgs}, key)
		if a.status != 200 || a.header.Get("Request-Id") != "req_011" || a.header.Get("Anthropic-Ratelimit-Requests-Remaining") != "99" {
			t.Fatalf("answer %d %v: %s", a.status, a.header, a.body)
		}
		return a.json(t)
	}
	prompt := map[string]any{"role": "user", "content": "Where is the port read?"}
	c1 := call([]any{prompt}, subagentTool, grepTool)
	if c1["stop_reason"] != "tool_use" {
		t.Fatalf("main's first answer: %v", c1)
	}
	task := map[string]any{"role": "user", "content": loopTask}
	g1 := call([]any{task}, grepTool)
	g2 := call([]any{task, map[string]any{"role": "assistant", "content": g1["content"]},
		map[string]any{"role": "user", "content": []any{resultBlock("toolu_2", "grep: /src: no such directory", true)}}}, grepTool)
	receipt := g2["content"].([]any)[0].(map[string]any)["text"].(string)
	call([]any{prompt, map[string]any{"role": "assistant", "content": c1["content"]},
		map[string]any{"role": "user", "content": []any{resultBlock("toolu_1", receipt, false)}}}, subagentTool, grepTool)

	for i, hd := range up.headers() {
		if hd.Get("X-Api-Key") != "sk-ant-callers-own" || hd.Get("Anthropic-Version") != "2023-06-01" {
			t.Errorf("request %d reached the upstream with x-api-key %q, anthropic-version %q: the caller's go through",
				i, hd.Get("X-Api-Key"), hd.Get("Anthropic-Version"))
		}
	}
	tr := h.store.all()[0].trace(t)
	if len(h.store.all()) != 1 || len(tr.Agents) != 2 {
		t.Fatalf("%d sessions, agents %+v", len(h.store.all()), tr.Agents)
	}
	if o := tr.Session.Origin; o == nil || o.Provider != "anthropic" {
		t.Errorf("a session opened on /v1/messages speaks anthropic: origin %+v", o)
	}
	child := tr.Agents[1]
	if child.Name != delegation.GeneralPurposeName || deref(child.Mode) != "isolated" || deref(child.ParentID) != "main" || len(tr.ModelCalls) != 4 {
		t.Errorf("the child: %s %s under %s, of %d calls; want general-purpose, isolated, under main, of 4",
			child.Name, deref(child.Mode), deref(child.ParentID), len(tr.ModelCalls))
	}
	var receipts, errs int
	for _, m := range tr.Messages {
		if m.AgentID == "main" && m.Kind == string(delegation.KindReceipt) && m.Content == "config.py:3." {
			receipts++
		}
		if m.AgentID == child.ID && m.Role == "tool" && m.IsError {
			errs++
		}
	}
	if receipts != 1 || errs != 1 {
		t.Errorf("main holds %d receipts, the child %d failed tool results; want 1 and 1", receipts, errs)
	}
	mc := tr.ModelCalls[0]
	if mc.Usage == nil || mc.Usage.PromptTokens != 142 || mc.Usage.CachedTokens != 30 || mc.Usage.CompletionTokens != 7 {
		t.Errorf("usage %+v: the prompt's tokens are input + cache writes + cache reads (142), 30 read from the cache", mc.Usage)
	}
	if r := mc.Response; r == nil || *r != (delegation.ResponseMeta{ID: "msg_1", Model: "claude-opus-5-5", FinishReason: "tool_use"}) {
		t.Errorf("what the upstream said of its answer: %+v, want its id, model and stop_reason as sent", r)
	}
	if !strings.Contains(fmt.Sprint(tr.Messages[1].ToolCalls), "subagent") {
		t.Errorf("main's answer recorded without its tool call: %+v", tr.Messages[1])
	}
}

// streamEvents writes Anthropic's events for an answer of text then one
// tool call, its input in two pieces.
func streamEvents(w http.ResponseWriter, flush bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Request-Id", "req_s")
	w.WriteHeader(200)
	ev := func(name string, v map[string]any) {
		v["type"] = name
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flush {
			w.(http.Flusher).Flush()
		}
	}
	ev("message_start", map[string]any{"message": map[string]any{"id": "msg_s", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
		"content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 20, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 80}}})
	ev("ping", map[string]any{})
	ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "Let me "}})
	ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": "delegate."}})
	ev("content_block_stop", map[string]any{"index": 0})
	ev("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{"type": "tool_use", "id": "toolu_s", "name": "subagent", "input": map[string]any{}}})
	ev("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"task": "Find `}})
	ev("content_block_delta", map[string]any{"index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": `the port."}`}})
	ev("content_block_stop", map[string]any{"index": 1})
	ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 15}})
	ev("message_stop", map[string]any{})
}

func TestMessagesStreamRelayedEventByEvent(t *testing.T) {
	up := newAnthropic(t, func(w http.ResponseWriter, body map[string]any) {
		if body["stream"] != true {
			http.Error(w, "expected a stream", 400)
			return
		}
		streamEvents(w, true)
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL+"/v1", ""), options{taskTool: "subagent"})
	a := send(t, messagesServer(t, h), map[string]any{"model": "claude-opus-5-5", "max_tokens": 100, "stream": true,
		"system": []any{map[string]any{"type": "text", "text": "You are main.", "cache_control": map[string]string{"type": "ephemeral"}}},
		"tools":  []any{subagentTool}, "messages": []any{map[string]any{"role": "user", "content": "Where is the port read?"}}}, nil)
	want := "message_start ping content_block_start content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if a.status != 200 || a.names() != want || a.header.Get("Request-Id") != "req_s" {
		t.Fatalf("relayed %d: %s, want every event, named, in order: %s", a.status, a.names(), want)
	}
	if d := a.events[8].data["delta"].(map[string]any); d["partial_json"] != `the port."}` {
		t.Errorf("an input_json_delta relayed as %v", d)
	}
	tr := h.store.all()[0].trace(t)
	mc := tr.ModelCalls[0]
	out := tr.Messages[len(tr.Messages)-1]
	if out.Content != "Let me delegate." || len(out.ToolCalls) != 1 || string(out.ToolCalls[0].Args) != `{"task":"Find the port."}` {
		t.Errorf("recorded %q %+v: the text and the tool call put together from their pieces", out.Content, out.ToolCalls)
	}
	if mc.Usage == nil || mc.Usage.PromptTokens != 100 || mc.Usage.CachedTokens != 80 || mc.Usage.CompletionTokens != 15 {
		t.Errorf("usage %+v", mc.Usage)
	}
	if r := mc.Response; r == nil || *r != (delegation.ResponseMeta{ID: "msg_s", Model: "claude-opus-5-5", FinishReason: "tool_use"}) {
		t.Errorf("what the stream said of its answer: %+v, want message_start's id and model, message_delta's stop_reason", r)
	}
	if tr.Agents[0].SystemPrompt != "You are main." {
		t.Errorf("system prompt %q: a system of blocks is its text", tr.Agents[0].SystemPrompt)
	}
}

func TestMessagesUpstreamErrorsInAnthropicShape(t *testing.T) {
	overloaded := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	up := newAnthropic(t, func(w http.ResponseWriter, body map[string]any) {
		if body["stream"] == true {
			// An error in a stream under way: an error event.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: message_start\ndata: %s\n\n", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", overloaded)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Should-Retry", "true")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, overloaded)
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL, ""), options{})
	base := messagesServer(t, h)
	req := map[string]any{"model": "claude-opus-5-5", "max_tokens": 100, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}
	a := send(t, base, req, nil)
	if a.status != 529 || string(a.body) != overloaded || a.header.Get("X-Should-Retry") != "true" {
		t.Errorf("relayed %d %q (x-should-retry %q), want 529 and the upstream's body as it is", a.status, a.body, a.header.Get("X-Should-Retry"))
	}
	req["stream"] = true
	s := send(t, base, req, map[string]string{proxy.SessionHeader: "streamed"})
	if s.names() != "message_start error" {
		t.Errorf("the stream relayed %q, want message_start error", s.names())
	}
	for _, sess := range h.store.all() {
		tr := sess.trace(t)
		if e := tr.ModelCalls[0].Error; !strings.Contains(e, "Overloaded") {
			t.Errorf("session %s: the call recorded with error %q, want the upstream's Overloaded", sess.name, e)
		}
	}

	// The studio's own refusals, in Anthropic's shape, the field named.
	for _, c := range []struct {
		body any
		want string
	}{
		{map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}, "max_tokens: Field required"},
		{map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "system", "content": "Hi."}}}, "messages.0.role: Input should be 'user' or 'assistant'"},
		{map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result"}}}}}, "messages.0.content.0.tool_use_id: Field required"},
		{map[string]any{"model": "m", "max_tokens": 5, "tools": []any{map[string]any{"name": "grep"}}, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}, "tools.0.input_schema: Field required"},
		{map[string]any{"model": "m", "max_tokens": 5, "tool_choice": map[string]any{"type": "some"}, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}, "tool_choice: Input tag 'some'"},
	} {
		a := send(t, base, c.body, nil)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal(a.body, &e)
		if a.status != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || !strings.HasPrefix(e.Error.Message, c.want) {
			t.Errorf("%v: answered %d %s, want 400 invalid_request_error %q", c.body, a.status, a.body, c.want)
		}
	}
	if n := len(up.headers()); n != 2 {
		t.Errorf("the upstream got %d requests, want 2: a request the studio refuses goes nowhere", n)
	}
}

func TestMessagesOperatorKeyNeverLeaves(t *testing.T) {
	up := newAnthropic(t, func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(message("end_turn", map[string]any{"input_tokens": 1, "output_tokens": 1}, textBlock("Hello.")))
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL, "sk-ant-operator-secret"), options{})
	a := send(t, messagesServer(t, h), map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}, nil)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if got := up.headers()[0].Get("X-Api-Key"); got != "sk-ant-operator-secret" {
		t.Errorf("a call with no key of its own reached the upstream with x-api-key %q, want the operator's", got)
	}
	raw, _ := json.Marshal(h.store.all()[0].trace(t))
	if strings.Contains(string(raw), "operator-secret") || strings.Contains(h.logs.String(), "operator-secret") {
		t.Error("the operator's key is in the recorded session or the logs")
	}
}

// An upstream that echoes the x-api-key it got — in an error's body and
// headers, in a whole answer, in a stream — has none of it relayed to a
// caller who sent no key, or recorded.
func TestMessagesEchoedKeyNeverRelayed(t *testing.T) {
	const key = "sk-ant-operator-echoed-0123456789"
	up := newAnthropic(t, func(w http.ResponseWriter, body map[string]any) {
		echo := key // what a careless gateway writes back
		w.Header().Set("X-Debug-Key", echo)
		switch body["model"] {
		case "fail":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"bad key %s (Authorization: Bearer %s)"}}`, echo, echo)
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": key %s\n", echo)
			fmt.Fprintf(w, "event: message_start\ndata: %s\n\n", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
			fmt.Fprintf(w, "event: content_block_start\ndata: %s\n\n", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"your key is %s\"}}\n\n", echo)
			fmt.Fprintf(w, "event: content_block_stop\ndata: %s\n\n", `{"type":"content_block_stop","index":0}`)
			fmt.Fprintf(w, "event: message_delta\ndata: %s\n\n", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`)
			fmt.Fprintf(w, "event: message_stop\ndata: %s\n\n", `{"type":"message_stop"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(message("end_turn", map[string]any{"input_tokens": 1, "output_tokens": 1}, textBlock("your key is "+echo)))
		}
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL, key), options{})
	base := messagesServer(t, h)
	var seen strings.Builder
	for _, c := range []struct {
		model  string
		stream bool
		status int
	}{{"fail", false, 500}, {"whole", false, 200}, {"stream", true, 200}} {
		req := map[string]any{"model": c.model, "max_tokens": 5, "stream": c.stream, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}
		a := send(t, base, req, map[string]string{proxy.SessionHeader: c.model})
		if a.status != c.status {
			t.Fatalf("%s: answered %d %s, want %d", c.model, a.status, a.body, c.status)
		}
		fmt.Fprintf(&seen, "%v %s %v\n", a.header, a.body, a.events)
	}
	if got := up.headers()[0].Get("X-Api-Key"); got != key {
		t.Fatalf("the upstream got x-api-key %q: the test's echo would prove nothing", got)
	}
	for _, sess := range h.store.all() {
		raw, _ := json.Marshal(sess.trace(t))
		seen.Write(raw)
	}
	seen.WriteString(h.logs.String())
	if strings.Contains(seen.String(), "operator-echoed") {
		t.Errorf("the operator's key, echoed by the upstream, reached the caller, the recorded sessions or the logs:\n%s", seen.String())
	}
	if !strings.Contains(seen.String(), "[redacted]") {
		t.Error("nothing was redacted: the echo did not go through the relay")
	}
}

func TestMessagesNeedAnAnthropicUpstream(t *testing.T) {
	h := newHarness(t, mustHTTP(t, "http://127.0.0.1:1/v1", ""), options{})
	a := send(t, messagesServer(t, h), map[string]any{"model": "m", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "Hi."}}}, nil)
	if a.status != 404 || !strings.Contains(string(a.body), "--upstream-provider anthropic") || !strings.Contains(string(a.body), `"type":"error"`) {
		t.Errorf("an OpenAI upstream answered Messages with %d %s", a.status, a.body)
	}
}

// playLoop runs the third article's loop against base, as its program
// sends it: main with the subagent tool, the child with read-only tools,
// tool results fed back until stop_reason is not tool_use.
func playLoop(t *testing.T, base string, stream bool) (answer, receipt string) {
	t.Helper()
	readOnly := []any{grepTool, map[string]any{"name": "list_dir", "description": "List a directory.",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}}}
	var run func(input string, tools []any) string
	run = func(input string, tools []any) string {
		msgs := []any{map[string]any{"role": "user", "content": input}}
		for step := 0; step < 20; step++ {
			a := send(t, base, map[string]any{"model": "claude-opus-5-5", "max_tokens": 8000, "stream": stream, "tools": tools, "messages": msgs}, nil)
			if a.status != 200 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			var content []any
			var stop string
			if stream {
				content, stop = assemble(t, a.events)
			} else {
				v := a.json(t)
				content, stop = v["content"].([]any), v["stop_reason"].(string)
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
			if stop != "tool_use" {
				for _, b := range content {
					if b := b.(map[string]any); b["type"] == "text" {
						return b["text"].(string)
					}
				}
				return ""
			}
			var results []any
			for _, b := range content {
				b := b.(map[string]any)
				if b["type"] != "tool_use" {
					continue
				}
				out := "config.py\nserver.py"
				if b["name"] == "subagent" {
					out = run(b["input"].(map[string]any)["task"].(string), readOnly)
					receipt = out
				}
				results = append(results, resultBlock(b["id"].(string), out, false))
			}
			msgs = append(msgs, map[string]any{"role": "user", "content": results})
		}
		return "(子任务达到步数上限未完成)"
	}
	return run("Find where the service reads its port, and tell me the file and line.", append([]any{subagentTool}, readOnly...)), receipt
}

// assemble puts a streamed message's content together, as the SDKs do.
func assemble(t *testing.T, events []sseEvent) ([]any, string) {
	t.Helper()
	var blocks []map[string]any
	var partial []string
	stop := ""
	for _, e := range events {
		switch e.name {
		case "content_block_start":
			blocks = append(blocks, e.data["content_block"].(map[string]any))
			partial = append(partial, "")
		case "content_block_delta":
			i := int(e.data["index"].(float64))
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			}
		case "message_delta":
			stop = e.data["delta"].(map[string]any)["stop_reason"].(string)
		case "error":
			t.Fatalf("an error event: %v", e.data)
		}
	}
	out := make([]any, len(blocks))
	for i, b := range blocks {
		if partial[i] != "" {
			var in map[string]any
			if err := json.Unmarshal([]byte(partial[i]), &in); err != nil {
				t.Fatalf("tool input %q: %v", partial[i], err)
			}
			b["input"] = in
		}
		out[i] = b
	}
	if names := events[len(events)-1].name; names != "message_stop" {
		t.Fatalf("the stream ended with %s", names)
	}
	return out, stop
}

func TestScriptPlaysTheArticleLoop(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			h := newHarness(t, scriptUpstream(t, "../../examples/article-loop.json"), options{taskTool: "subagent"})
			answer, receipt := playLoop(t, messagesServer(t, h), stream)
			if answer != "The port is read in /src/config.py, line 3, from $PORT (8080 when it is not set)." ||
				receipt != "/src/config.py:3 reads PORT from the environment, 8080 by default." {
				t.Fatalf("the loop ended with %q, its receipt %q", answer, receipt)
			}
			tr := h.store.all()[0].trace(t)
			checkArticleLoop(t, tr)
		})
	}
}

// checkArticleLoop checks what the article's loop records: main and one
// isolated general-purpose child of three calls, whose answer is main's
// receipt.
func checkArticleLoop(t *testing.T, tr *trace.Trace) {
	t.Helper()
	if len(tr.Agents) != 2 {
		t.Fatalf("agents %+v", tr.Agents)
	}
	child := tr.Agents[1]
	calls := map[string]int{}
	for _, c := range tr.ModelCalls {
		calls[c.AgentID]++
	}
	if calls["main"] != 2 || child.Name != delegation.GeneralPurposeName || deref(child.Mode) != "isolated" || calls[child.ID] != 3 {
		t.Errorf("main %d calls; child %s %s, %d calls: want 2, and general-purpose isolated with 3", calls["main"], child.Name, deref(child.Mode), calls[child.ID])
	}
	var receipt *trace.Message
	for i, m := range tr.Messages {
		if m.AgentID == "main" && m.Kind == string(delegation.KindReceipt) {
			receipt = &tr.Messages[i]
		}
	}
	if receipt == nil || receipt.Content != "/src/config.py:3 reads PORT from the environment, 8080 by default." {
		t.Errorf("main's receipt: %+v", receipt)
	}
}
