package proxy_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/trace"
)

// heldKey is the operator's key in the tests of what is held back of it.
const heldKey = "sk-held-0123456789abcdef"

// Text that ends with the start of the key, but not the key, is held back
// only until its channel ends — its choice's finish, or [DONE] when none
// comes — and then goes out whole: the caller and the recording lose
// nothing of an answer that merely looks like the key's start.
func TestTheKeysStartGoesOutAtTheChannelsEnd(t *testing.T) {
	for _, finish := range []bool{true, false} {
		t.Run(fmt.Sprintf("finish=%v", finish), func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
				w.Header().Set("Content-Type", "text/event-stream")
				sse(w, chunk(map[string]any{"role": "assistant", "content": "Keys start with sk-he"}, nil))
				sse(w, chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
					"function": map[string]any{"name": "note", "arguments": `{"k":"sk-held`}}}}, nil))
				if finish {
					sse(w, chunk(map[string]any{}, "tool_calls"))
				}
				fmt.Fprint(w, "data: [DONE]\n\n")
			})
			h := newHarness(t, mustHTTP(t, up.srv.URL, heldKey), options{})
			status, got := h.post(t, `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Keys?"}]}`, nil)
			if status != 200 {
				t.Fatalf("%d %s", status, got)
			}
			text, args := relayedTexts(t, string(got))
			if text != "Keys start with sk-he" || args != `{"k":"sk-held` {
				t.Errorf("the caller got text %q, arguments %q; want them as sent", text, args)
			}
			out := trace.Lists(h.store.all()[0].trace(t))["main"][1]
			if out.Content != "Keys start with sk-he" || len(out.ToolCalls) != 1 {
				t.Fatalf("recorded %q, tool calls %+v", out.Content, out.ToolCalls)
			}
		})
	}
}

// relayedTexts puts a relayed chat stream back together: its content and
// its first tool call's arguments.
func relayedTexts(t *testing.T, body string) (text, args string) {
	t.Helper()
	var tb, ab strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("an event that is not a chunk: %s", data)
		}
		for _, ch := range c.Choices {
			tb.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				ab.WriteString(tc.Function.Arguments)
			}
		}
	}
	return tb.String(), ab.String()
}

// The same on /v1/messages: a block's held text goes out before the
// content_block_stop that ends it.
func TestTheKeysStartGoesOutAtTheBlocksEnd(t *testing.T) {
	up := newAnthropic(t, func(w http.ResponseWriter, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range [][2]string{
			{"message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`},
			{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
			{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Keys start with sk-he"}}`},
			{"content_block_stop", `{"type":"content_block_stop","index":0}`},
			{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`},
			{"message_stop", `{"type":"message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
		}
	})
	h := newHarness(t, mustAnthropic(t, up.srv.URL, heldKey), options{})
	a := send(t, messagesServer(t, h), map[string]any{"model": "m", "max_tokens": 5, "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "Keys?"}}}, nil)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if blocks, _ := assemble(t, a.events); len(blocks) != 1 || blocks[0].(map[string]any)["text"] != "Keys start with sk-he" {
		t.Errorf("the caller put together %v (events %s); want the text as sent", blocks, a.names())
	}
	if out := trace.Lists(h.store.all()[0].trace(t))["main"][1]; out.Content != "Keys start with sk-he" {
		t.Errorf("recorded %q, want the text as sent", out.Content)
	}
}

// The legacy function_call's arguments are a channel too: the key split
// across two of its pieces is redacted, and what is held goes out at the
// finish.
func TestAKeySplitInALegacyFunctionCall(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range []string{`{"k":"` + heldKey[:7], heldKey[7:] + `", "s":"sk-h`} {
			sse(w, chunk(map[string]any{"function_call": map[string]any{"name": "note", "arguments": p}}, nil))
		}
		sse(w, chunk(map[string]any{}, "function_call"))
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, heldKey), options{})
	status, got := h.post(t, `{"model": "m", "stream": true, "messages": [{"role": "user", "content": "Call."}]}`, nil)
	var args strings.Builder
	for _, line := range strings.Split(string(got), "\n") {
		var c struct {
			Choices []struct {
				Delta struct {
					FunctionCall *struct{ Arguments string } `json:"function_call"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &c) == nil && len(c.Choices) > 0 && c.Choices[0].Delta.FunctionCall != nil {
			args.WriteString(c.Choices[0].Delta.FunctionCall.Arguments)
		}
	}
	if want := `{"k":"[redacted]", "s":"sk-h`; status != 200 || args.String() != want {
		t.Errorf("the caller got %d, arguments %q; want %q", status, args.String(), want)
	}
}
