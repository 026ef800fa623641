package delegation

import "encoding/json"

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Kind says what a message is for (formats.md §2). Most messages have none.
type Kind string

const (
	KindNone         Kind = ""
	KindPrompt       Kind = "prompt"        // the session's opening user message
	KindTask         Kind = "task"          // an isolated child's opening message: the description
	KindForkPreamble Kind = "fork_preamble" // a fork child's opening message: preamble + description
	KindReceipt      Kind = "receipt"       // the tool result that brings a child's report back
	KindSummary      Kind = "summary"       // the message that replaces summarized history
	KindRefusal      Kind = "refusal"       // a refused task call's tool result
)

// ToolCall is one call an assistant message asks for.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Message is one entry of an agent's message list. A message belongs to
// exactly one agent and is stored once; contexts refer to it by position.
type Message struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	Role    Role   `json:"role"`
	Content string `json:"content"`
	// Reasoning is a reasoning model's thinking before this answer: its own
	// part of the message, shown apart and not counted in Tokens, because
	// it is never sent back to the model.
	Reasoning  string     `json:"reasoning,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	ToolCallID string     `json:"tool_call_id"`
	IsError    bool       `json:"is_error"`
	Tokens     int        `json:"tokens"`
	Kind       Kind       `json:"kind"`
	// Evicted is set when the message's text was too big for the model and
	// was moved to a file: Content is then the pointer the model reads
	// (delegation.md §12, evict.go).
	Evicted *Eviction `json:"evicted,omitempty"`
}

// Range names messages From … To-1 of one agent's message list. A model
// call's context is a list of ranges, so a context is never copied: a fork
// child's inherited history is a range of its parent's list.
type Range struct {
	AgentID string `json:"agent_id"`
	From    int    `json:"from"`
	To      int    `json:"to"`
}

// Len is the number of messages in the range.
func (r Range) Len() int { return r.To - r.From }

// RangesLen is the number of messages in ranges.
func RangesLen(rs []Range) int {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// FirstMessages is the first n messages of ranges, as ranges.
func FirstMessages(rs []Range, n int) []Range {
	var out []Range
	for _, r := range rs {
		if n <= 0 {
			break
		}
		if r.Len() > n {
			r.To = r.From + n
		}
		out = append(out, r)
		n -= r.Len()
	}
	return out
}

// AfterMessages is ranges without their first n messages (a
// summarization's folded ones).
func AfterMessages(rs []Range, n int) []Range {
	var out []Range
	for _, r := range rs {
		if n >= r.Len() {
			n -= r.Len()
			continue
		}
		r.From += n
		n = 0
		out = append(out, r)
	}
	return out
}
