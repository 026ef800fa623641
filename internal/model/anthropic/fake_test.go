package anthropic

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A fake Anthropic server: POST /v1/messages, answered whole or as the
// API's event stream (message_start, content_block_start/delta/stop with
// text_delta and input_json_delta, message_delta, message_stop), its errors
// in Anthropic's shape.

const testKey = "sk-ant-test-0123456789abcdef"

type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   *bool           `json:"is_error,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// resultText is a tool_result's text.
func (b wireBlock) resultText() string {
	var parts []wireBlock
	if json.Unmarshal(b.Content, &parts) == nil {
		var s strings.Builder
		for _, p := range parts {
			s.WriteString(p.Text)
		}
		return s.String()
	}
	var s string
	_ = json.Unmarshal(b.Content, &s)
	return s
}

type wireMsg struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type wireBody struct {
	Model       string          `json:"model"`
	MaxTokens   int             `json:"max_tokens"`
	Stream      bool            `json:"stream"`
	System      []wireBlock     `json:"system"`
	Messages    []wireMsg       `json:"messages"`
	Tools       []wireTool      `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	Temperature *float64        `json:"temperature"`
}

func (b wireBody) system() string {
	var s strings.Builder
	for _, p := range b.System {
		s.WriteString(p.Text)
	}
	return s.String()
}

func (b wireBody) assistants() int {
	n := 0
	for _, m := range b.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// result is the tool_result block answering id.
func (b wireBody) result(id string) (wireBlock, bool) {
	for _, m := range b.Messages {
		for _, blk := range m.Content {
			if blk.Type == "tool_result" && blk.ToolUseID == id {
				return blk, true
			}
		}
	}
	return wireBlock{}, false
}

type wireReq struct {
	Header http.Header
	Raw    string
	Body   wireBody
}

type fakeServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []*wireReq
}

func newFake(t *testing.T, handle func(w http.ResponseWriter, req *wireReq)) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		req := &wireReq{Header: r.Header.Clone(), Raw: string(raw)}
		if err := json.Unmarshal(raw, &req.Body); err != nil {
			t.Errorf("request body: %v: %s", err, raw)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		handle(w, req)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) requests() []*wireReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*wireReq(nil), f.reqs...)
}

// tcall is a tool_use the fake answers with.
type tcall struct{ id, name, input string }

// turn is one answer.
type turn struct {
	text  string
	calls []tcall
	stop  string // "" is end_turn, or tool_use with calls
	// usage: input, output, cache read, cache creation.
	usage [4]int
}

func (tr turn) stopReason() string {
	switch {
	case tr.stop != "":
		return tr.stop
	case len(tr.calls) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func (tr turn) usageJSON() map[string]any {
	u := tr.usage
	if u == [4]int{} {
		u = [4]int{10, 5, 0, 0}
	}
	return map[string]any{"input_tokens": u[0], "output_tokens": u[1], "cache_read_input_tokens": u[2], "cache_creation_input_tokens": u[3]}
}

// reply answers as the request asked: whole, or streamed.
func reply(w http.ResponseWriter, req *wireReq, tr turn) {
	if req.Body.Stream {
		replyStream(w, req, tr)
		return
	}
	var content []map[string]any
	if tr.text != "" {
		content = append(content, map[string]any{"type": "text", "text": tr.text})
	}
	for _, c := range tr.calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": json.RawMessage(c.input)})
	}
	writeJSON(w, 200, map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": req.Body.Model,
		"content": content, "stop_reason": tr.stopReason(), "stop_sequence": nil, "usage": tr.usageJSON()})
}

// replyStream sends the answer as Anthropic's event stream: the text in
// two deltas, each tool_use's input in two input_json_delta pieces.
func replyStream(w http.ResponseWriter, req *wireReq, tr turn) {
	s := startSSE(w)
	u := tr.usageJSON()
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message",
		"role": "assistant", "model": req.Body.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u["input_tokens"], "output_tokens": 1,
			"cache_read_input_tokens": u["cache_read_input_tokens"], "cache_creation_input_tokens": u["cache_creation_input_tokens"]}}})
	s.event("ping", map[string]any{"type": "ping"})
	i := 0
	if tr.text != "" {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		half := len(tr.text) / 2
		for _, part := range []string{tr.text[:half], tr.text[half:]} {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	for _, c := range tr.calls {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
			"content_block": map[string]any{"type": "tool_use", "id": c.id, "name": c.name, "input": map[string]any{}}})
		half := len(c.input) / 2
		for _, part := range []string{c.input[:half], c.input[half:]} {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": tr.stopReason(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u["output_tokens"]}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

type sseWriter struct {
	w http.ResponseWriter
}

func startSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	return &sseWriter{w: w}
}

func (s *sseWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// apiError answers in Anthropic's error shape.
func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
