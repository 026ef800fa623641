package remote

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// SummaryInstruction is the user message appended to a PurposeSummary call:
// the messages to fold come first, then this request for their summary.
const SummaryInstruction = "Write a concise summary of the conversation above. It will replace those messages in your " +
	"context, so keep everything needed to continue the work: the task and its constraints, the facts and decisions " +
	"established, the files read or written (with their paths), what is done and what remains. Reply with the summary only."

// EmptyContent stands in for a message without text, which both wire
// formats refuse (chat completions on user and tool messages, Anthropic's
// messages on any text block).
const EmptyContent = "(empty)"

// NonEmpty is s, or EmptyContent when s is empty.
func NonEmpty(s string) string {
	if s == "" {
		return EmptyContent
	}
	return s
}

// DefaultHTTPClient bounds connecting, not answering: a generation may take
// minutes, and an adapter's CallTimeout already bounds each attempt. A
// Client.Timeout would also cut long streams that are still arriving.
func DefaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	// Sibling subagents call the same host at once.
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}
}

// CleanArgs makes a tool call's arguments safe for the engine, whose events
// embed them as raw JSON and would fail to encode anything else:
//   - empty arguments are {};
//   - valid JSON is kept, except a JSON string that holds an object, which
//     some servers send for arguments encoded twice: the object is used;
//   - anything else (a truncated or malformed object) becomes a JSON string
//     holding the raw text, so the engine answers the model with an error
//     tool result about its arguments that it can act on.
func CleanArgs(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t == "" {
		return json.RawMessage("{}")
	}
	if json.Valid([]byte(t)) {
		if t[0] == '"' {
			var inner string
			if json.Unmarshal([]byte(t), &inner) == nil {
				if in := strings.TrimSpace(inner); strings.HasPrefix(in, "{") && json.Valid([]byte(in)) {
					return json.RawMessage(in)
				}
			}
		}
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(s) // a Go string always encodes
	return b
}

// MessagesUsage is the engine's Usage for what Anthropic's Messages API
// reports: its input_tokens are only those neither written to nor read from
// the prompt cache, so the prompt is all three; the cache's reads are the
// cached tokens, its writes the cache-creation tokens. nil when nothing was
// reported, so that no count of zero is recorded as if it were one;
// cacheRead is nil when the reply did not say.
func MessagesUsage(input, output int, cacheRead *int, cacheCreation int) *delegation.Usage {
	read := 0
	if cacheRead != nil {
		read = *cacheRead
	}
	if input == 0 && output == 0 && read == 0 && cacheCreation == 0 {
		return nil
	}
	return &delegation.Usage{PromptTokens: input + cacheCreation + read, CompletionTokens: output,
		CachedTokens: read, CachedReported: cacheRead != nil, CacheCreationTokens: cacheCreation}
}
