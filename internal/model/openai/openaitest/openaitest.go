// Package openaitest serves the chat-completions wire format on loopback,
// for tests of what the studio does with an OpenAI-compatible endpoint: a
// test says how each request is answered, and the server writes the answer
// as a whole completion or, when the request streams, as server-sent events.
package openaitest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Request is a chat-completions request as the server read it.
type Request struct {
	Model    string
	Stream   bool
	Messages []Message
	Tools    []string       // the function tools' names
	Body     map[string]any // the whole body, for the fields not named here
}

// Message is one message of a request.
type Message struct{ Role, Content string }

// HasTool reports whether the request offers the named tool.
func (r Request) HasTool(name string) bool {
	for _, t := range r.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// System is the system prompt, or "".
func (r Request) System() string {
	if len(r.Messages) > 0 && r.Messages[0].Role == "system" {
		return r.Messages[0].Content
	}
	return ""
}

// Last is the request's last message.
func (r Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// Reply is an answer: text, reasoning, tool calls, how it finished, what it
// reports it counted, the completion's id and model.
type Reply struct {
	Content   string
	Reasoning string // sent as reasoning_content
	Calls     []Call
	Finish    string         // "" means stop, or tool_calls with calls
	Usage     map[string]any // sent as is; nil sends none
	ID        string         // "" means "x"
	Model     string         // "" means the request's
}

// Call is a tool call of a reply.
type Call struct{ ID, Name, Args string }

// Task is a call of the task tool.
func Task(id, subagent, description string) Call {
	args, _ := json.Marshal(map[string]string{"description": description, "subagent_type": subagent})
	return Call{ID: id, Name: "task", Args: string(args)}
}

// NewServer starts a server that answers every POST …/chat/completions with
// answer's reply, and stops it when the test ends.
func NewServer(t testing.TB, answer func(Request) Reply) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, `{"error":{"message":"no such path","type":"not_found_error"}}`, http.StatusNotFound)
			return
		}
		req, err := read(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		write(w, req, answer(req))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func read(r *http.Request) (Request, error) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return Request{}, err
	}
	req := Request{Body: body}
	req.Model, _ = body["model"].(string)
	req.Stream, _ = body["stream"].(bool)
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		m, _ := m.(map[string]any)
		role, _ := m["role"].(string)
		content, _ := m["content"].(string)
		req.Messages = append(req.Messages, Message{Role: role, Content: content})
	}
	tools, _ := body["tools"].([]any)
	for _, tl := range tools {
		tl, _ := tl.(map[string]any)
		fn, _ := tl["function"].(map[string]any)
		name, _ := fn["name"].(string)
		req.Tools = append(req.Tools, name)
	}
	return req, nil
}

func write(w http.ResponseWriter, req Request, rep Reply) {
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Reasoning != "" {
		msg["reasoning_content"] = rep.Reasoning
	}
	finish := rep.Finish
	if len(rep.Calls) > 0 {
		var calls []any
		for i, c := range rep.Calls {
			call := map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}}
			if req.Stream {
				call["index"] = i
			}
			calls = append(calls, call)
		}
		msg["tool_calls"] = calls
		if rep.Content == "" {
			msg["content"] = nil
		}
		if finish == "" {
			finish = "tool_calls"
		}
	}
	if finish == "" {
		finish = "stop"
	}
	id, model := cmp.Or(rep.ID, "x"), cmp.Or(rep.Model, req.Model)
	if req.Stream {
		// One chunk with the whole answer, then the usage, then [DONE].
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": msg, "finish_reason": finish}}}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if rep.Usage != nil {
			b, _ = json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "choices": []any{}, "usage": rep.Usage})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	body := map[string]any{"id": id, "object": "chat.completion", "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}}
	if rep.Usage != nil {
		body["usage"] = rep.Usage
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// ThinkerAndRamblerScenario is the scenario ThinkerAndRambler answers, on
// the endpoint at baseURL, streaming off.
func ThinkerAndRamblerScenario(baseURL string) string {
	return fmt.Sprintf(`{"name": "thinking", "prompt": "Ask both helpers.",
		"model": {"provider": "openai", "model": "m", "base_url": %q, "stream": false},
		"subagents": [{"name": "thinker", "description": "Thinks."}, {"name": "rambler", "description": "Talks."}]}`, baseURL)
}

// ThinkerAndRambler answers a team of two subagents as a reasoning model
// would: the parent sends "What is six times seven?" to "thinker" and
// "Explain everything." to "rambler"; thinker answers 42 with its reasoning
// beside, and reports cached and reasoning tokens; rambler is cut off at its
// length limit ("The answer is trunc"); then the parent relays.
func ThinkerAndRambler(req Request) Reply {
	usage := map[string]any{"prompt_tokens": 900, "completion_tokens": 120,
		"prompt_tokens_details": map[string]any{"cached_tokens": 768}, "completion_tokens_details": map[string]any{"reasoning_tokens": 96}}
	switch last := req.Last(); {
	case req.HasTool("task") && last.Role == "user":
		return Reply{Calls: []Call{Task("c1", "thinker", "What is six times seven?"), Task("c2", "rambler", "Explain everything.")}, Usage: usage}
	case req.HasTool("task"):
		return Reply{Content: "One helper says 42; the other was cut off.", Usage: usage}
	case strings.Contains(last.Content, "six times seven"):
		return Reply{Content: "42", Reasoning: "Six sevens: 7, 14, 21, 28, 35, 42.", Usage: usage}
	}
	return Reply{Content: "The answer is trunc", Finish: "length", Usage: usage}
}
