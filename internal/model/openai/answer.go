package openai

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// Answer reads a chat-completions answer off the wire as this adapter reads
// its own: a stream chunk by chunk, or a whole completion, mended first
// where servers differ (wire_fix.go), tool calls put back together from
// their pieces and their arguments made safe. The recording endpoint reads
// what it relays with it, so an answer means the same thing whichever way
// it reached the studio.
type Answer struct {
	acc   accumulator
	whole *result
}

// Chunk reads one streamed chunk, the JSON of an SSE data line, and returns
// its text deltas. A chunk that is an error ({"error": …}, which some
// servers send mid-stream) is returned as an error with the server's words.
func (a *Answer) Chunk(data []byte) ([]string, error) {
	if e, ok := errorEvent(data); ok {
		return nil, errors.New(cmp.Or(e.Msg, "the stream carried an error"))
	}
	var chunk goopenai.ChatCompletionStreamResponse
	if err := json.Unmarshal(mendAnswer(data), &chunk); err != nil {
		return nil, fmt.Errorf("a stream chunk that is not a chat completion chunk: %v", err)
	}
	return a.acc.add(chunk), nil
}

// Whole reads a whole (not streamed) completion.
func (a *Answer) Whole(body []byte) error {
	if e, ok := errorEvent(body); ok {
		return errors.New(cmp.Or(e.Msg, "the answer is an error"))
	}
	var resp goopenai.ChatCompletionResponse
	if err := json.Unmarshal(mendAnswer(body), &resp); err != nil {
		return fmt.Errorf("an answer that is not a chat completion: %v", err)
	}
	r, ok := fromCompletion(resp)
	if !ok {
		return errors.New("a chat completion without choices")
	}
	a.whole = r
	return nil
}

// Complete reports whether the answer came to its end: a whole completion,
// or a stream that gave its finish_reason.
func (a *Answer) Complete() bool { return a.whole != nil || a.acc.finished }

// FinishReason is why the model stopped ("stop", "tool_calls", "length"…).
func (a *Answer) FinishReason() string {
	if a.whole != nil {
		return a.whole.finishReason
	}
	return a.acc.finish
}

// Response is the answer as the engine's Response: text, reasoning, tool
// calls (ids as sent, arguments as cleanArgs makes them) and the usage the
// server reported.
func (a *Answer) Response() *delegation.Response {
	r := a.whole
	if r == nil {
		r = a.acc.result()
	}
	return (&call{}).finish(r)
}

// ErrorText is what a server's error body says, read whatever its shape
// (OpenAI's {"error": {"message"}}, Express's, FastAPI's, plain text, an
// HTML page), for a person.
func ErrorText(body []byte) string { return remote.ErrorText(body) }
