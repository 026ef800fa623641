package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/scenario"
)

// An endpoint the engine calls that echoes the operator's key inside its
// answers — the text, the reasoning, a write_file call's arguments (as
// written and \u-escaped), split across deltas, streamed and whole, in
// OpenAI's and Anthropic's shapes — has it kept out of what is recorded:
// no piece of the key of 8 bytes is in the database file, its WAL, the
// trace export, the OTLP export, the page or /metrics, and the arguments
// stay JSON.
func TestAnEchoedKeyIsNotRecordedFromTheEngine(t *testing.T) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	key := "sk-" + hex.EncodeToString(raw)
	t.Setenv("STUDIO_TEST_ECHO_KEY", key)
	endpoint, seen := keyEchoingModel(t)

	dbPath := filepath.Join(t.TempDir(), "studio.db")
	var eps []Endpoint
	for _, p := range []string{scenario.ProviderOpenAI, scenario.ProviderAnthropic} {
		base := endpoint.URL + "/v1"
		if p == scenario.ProviderAnthropic {
			base = endpoint.URL
		}
		eps = append(eps, Endpoint{Name: p + "-streamed", Provider: p, BaseURL: base, KeyEnv: "STUDIO_TEST_ECHO_KEY", Model: "m"},
			Endpoint{Name: p + "-whole", Provider: p, BaseURL: base, KeyEnv: "STUDIO_TEST_ECHO_KEY", Model: "m", NoStream: true})
	}
	s := startStudioOn(t, dbPath, Config{Endpoints: eps})
	s.t = t

	places := map[string]string{}
	for _, ep := range eps {
		doc := `{"name": "` + ep.Name + `", "prompt": "write the key down", "model": {"endpoint": "` + ep.Name + `"}}`
		res, body := s.api("POST", "/api/sessions", "application/json", []byte(doc))
		var created struct{ ID string }
		if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
			t.Fatalf("%s: status %d: %s", ep.Name, res.StatusCode, body)
		}
		s.waitDone(created.ID)
		_, tr := s.api("GET", "/api/sessions/"+created.ID+"/trace", "", nil)
		_, ot := s.api("GET", "/api/sessions/"+created.ID+"/otlp", "", nil)
		places["the trace export of "+ep.Name], places["the OTLP export of "+ep.Name] = string(tr), string(ot)
		_, page := s.raw("GET", "/sessions/"+created.ID, nil, "")
		places["the page of "+ep.Name] = page
		checkEchoedSession(t, ep.Name, tr)
	}
	for _, k := range seen() {
		if k != key {
			t.Fatalf("the endpoint got key %q: the key did not reach it", k)
		}
	}
	_, metrics := s.raw("GET", "/metrics", nil, "")
	places["/metrics"] = metrics
	s.srv.Shutdown(context.Background())
	keyNowhere(t, key, dbPath, places)
}

// checkEchoedSession checks that a session ran against the endpoint to its
// end, the key replaced with the marker in its answer, its reasoning and
// its file, and the write_file call's arguments still JSON.
func checkEchoedSession(t *testing.T, name string, trace []byte) {
	t.Helper()
	var tr struct {
		Session  struct{ Status string }
		Messages []struct {
			Content, Reasoning string
			ToolCalls          []struct {
				Name string
				Args json.RawMessage
			} `json:"tool_calls"`
		}
		Files map[string]string
	}
	if err := json.Unmarshal(trace, &tr); err != nil {
		t.Fatalf("%s: the trace: %v", name, err)
	}
	var all strings.Builder
	calls := 0
	for _, m := range tr.Messages {
		all.WriteString(m.Content + "\n" + m.Reasoning + "\n")
		for _, c := range m.ToolCalls {
			calls++
			if !json.Valid(c.Args) {
				t.Errorf("%s: the redacted arguments are not JSON: %s", name, c.Args)
			}
			all.Write(c.Args)
		}
	}
	if tr.Session.Status != "done" || calls == 0 {
		t.Fatalf("%s: the session ended %q with %d tool calls: %.800s", name, tr.Session.Status, calls, trace)
	}
	for _, want := range []string{"Done: [redacted].", "Thinking of [redacted]", `key [redacted] and escaped [redacted]`} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("%s: the recorded messages lack %q: %.1500s", name, want, all.String())
		}
	}
}

// keyEchoingModel is a model endpoint, both OpenAI's chat completions and
// Anthropic's messages, that writes back the key it got: first a
// write_file call whose file holds it, then an answer that says it; and
// the keys it got.
func keyEchoingModel(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if k := r.Header.Get("X-Api-Key"); k != "" {
			key = k
		}
		mu.Lock()
		got = append(got, key)
		mu.Unlock()
		var req struct{ Stream bool }
		_ = json.Unmarshal(body, &req)
		answered := bytes.Contains(body, []byte(`"tool"`)) || bytes.Contains(body, []byte(`"tool_result"`))
		e := keyEcho{key: key, answered: answered}
		w.Header().Set("Content-Type", "application/json")
		anthropic := r.URL.Path == "/v1/messages"
		switch {
		case anthropic && req.Stream:
			e.anthropicStream(sseTo(w))
		case anthropic:
			_, _ = w.Write(e.anthropicWhole())
		case req.Stream:
			e.chatStream(sseTo(w))
		default:
			_, _ = w.Write(e.chatWhole())
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func sseTo(w http.ResponseWriter) func(name, data string) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	return func(name, data string) {
		if name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		fl.Flush()
	}
}

// keyEcho is one answer of keyEchoingModel.
type keyEcho struct {
	key      string
	answered bool // the file is written: the answer is the text
}

// split cuts the key into three, so that no delta holds it whole.
func (e keyEcho) split(head, tail string) []string {
	return []string{head + e.key[:5], e.key[5:13], e.key[13:] + tail}
}

func (e keyEcho) text() []string      { return e.split("Done: ", ".") }
func (e keyEcho) reasoning() []string { return e.split("Thinking of ", " now") }

// args are the write_file call's arguments in pieces: the key as written,
// then with its first character \u-escaped, as JSON may write it.
func (e keyEcho) args() []string {
	parts := e.split(`{"file_path":"/key.md","content":"key `, ` and escaped \u00`)
	return append(parts, fmt.Sprintf(`%x`, e.key[0])+e.key[1:9], e.key[9:]+`"}`)
}

func (e keyEcho) chatStream(ev func(name, data string)) {
	const head = `{"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":`
	ev("", head+`{"role":"assistant","content":""},"finish_reason":null}]}`)
	if e.answered {
		for _, s := range e.text() {
			ev("", head+`{"content":`+jsonString(s)+`},"finish_reason":null}]}`)
		}
		ev("", head+`{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`)
		ev("", "[DONE]")
		return
	}
	for _, s := range e.reasoning() {
		ev("", head+`{"reasoning_content":`+jsonString(s)+`},"finish_reason":null}]}`)
	}
	ev("", head+`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":""}}]},"finish_reason":null}]}`)
	for _, s := range e.args() {
		ev("", head+`{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(s)+`}}]},"finish_reason":null}]}`)
	}
	ev("", head+`{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":9}}`)
	ev("", "[DONE]")
}

func (e keyEcho) chatWhole() []byte {
	msg := map[string]any{"role": "assistant", "content": strings.Join(e.text(), "")}
	finish := "stop"
	if !e.answered {
		msg = map[string]any{"role": "assistant", "content": nil, "reasoning_content": strings.Join(e.reasoning(), ""),
			"tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "write_file", "arguments": strings.Join(e.args(), "")}}}}
		finish = "tool_calls"
	}
	b, _ := json.Marshal(map[string]any{"id": "c2", "object": "chat.completion", "model": "m",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 3, "completion_tokens": 5}})
	return b
}

func (e keyEcho) anthropicStream(ev func(name, data string)) {
	ev("message_start", `{"type":"message_start","message":{"id":"m1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`)
	block := func(i int, start, kind, field string, parts []string) {
		ev("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, start))
		for _, s := range parts {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%s}}`, i, kind, field, jsonString(s)))
		}
		ev("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
	}
	stop := "end_turn"
	if e.answered {
		block(0, `{"type":"text","text":""}`, "text_delta", "text", e.text())
	} else {
		block(0, `{"type":"thinking","thinking":"","signature":""}`, "thinking_delta", "thinking", e.reasoning())
		block(1, `{"type":"tool_use","id":"toolu_1","name":"write_file","input":{}}`, "input_json_delta", "partial_json", e.args())
		stop = "tool_use"
	}
	ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":9}}`)
	ev("message_stop", `{"type":"message_stop"}`)
}

func (e keyEcho) anthropicWhole() []byte {
	content, stop := []any{map[string]any{"type": "text", "text": strings.Join(e.text(), "")}}, "end_turn"
	if !e.answered {
		content = []any{map[string]any{"type": "thinking", "thinking": strings.Join(e.reasoning(), ""), "signature": "s"},
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": json.RawMessage(strings.Join(e.args(), ""))}}
		stop = "tool_use"
	}
	b, _ := json.Marshal(map[string]any{"id": "m2", "type": "message", "role": "assistant", "model": "m", "content": content,
		"stop_reason": stop, "usage": map[string]any{"input_tokens": 3, "output_tokens": 5}})
	return b
}

// keyNowhere fails the test when the key, or any 8-byte piece of it, is in
// one of the places or in the database's files (the WAL among them).
func keyNowhere(t *testing.T, key, dbPath string, places map[string]string) {
	t.Helper()
	files, _ := filepath.Glob(dbPath + "*")
	if len(files) < 2 {
		t.Fatalf("database files: %v; want the WAL beside the file", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		places[filepath.Base(f)] = string(b)
	}
	for where, text := range places {
		for i := 0; i+8 <= len(key); i++ {
			if strings.Contains(text, key[i:i+8]) {
				t.Errorf("a piece of the key (%q) is in %s", key[i:i+8], where)
				break
			}
		}
	}
}
