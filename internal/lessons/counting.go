package lessons

import (
	"encoding/json"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/internal/trace"
)

// The articles counted tokens with LangChain's count_tokens_approximately,
// the estimator deepagents itself uses (tokens.CountLangChain): a whole
// message — its text, its role, an AI message's tool calls as Python
// writes them, a tool message's call id — a quarter token a character,
// three more a message. A lesson figure that depends only on deepagents'
// texts is also counted that way, beside ours, so the article's figure and
// ours can be compared on the same scale.

// articleTokens is what call c received, counted as the articles count
// it: the system prompt as one message (even an empty one costs its role
// and its three), then every message of its context. Tool definitions are
// not messages and are not counted, as the articles' "input" figures
// leave them out.
func (v *view) articleTokens(c trace.ModelCall) int {
	msgs := []tokens.LangChainMessage{{Role: "system", Content: c.SystemPrompt}}
	for _, m := range v.context(c) {
		msgs = append(msgs, langChainMessage(m))
	}
	return tokens.CountLangChain(msgs...)
}

// articleMessageTokens is one message counted as the articles count it.
func articleMessageTokens(m trace.Message) int { return tokens.CountLangChain(langChainMessage(m)) }

// langChainMessage is a message of ours as LangChain holds it: the role
// OpenAI's wire names, the tool calls with their ids, a tool message's id.
func langChainMessage(m trace.Message) tokens.LangChainMessage {
	out := tokens.LangChainMessage{Role: m.Role, Content: m.Content}
	if m.ToolCallID != nil {
		out.ToolCallID = *m.ToolCallID
	}
	if m.Role == string(delegation.RoleAssistant) {
		for _, tc := range m.ToolCalls {
			out.ToolCalls = append(out.ToolCalls, tokens.LangChainToolCall{Name: tc.Name, ID: tc.ID, Args: tc.Args})
		}
	}
	return out
}

// articleCallTokens is one tool call as the articles count the message
// that makes it: an AI message with no text and that one call.
func articleCallTokens(c trace.ToolCall) int {
	return tokens.CountLangChain(langChainMessage(trace.Message{Role: string(delegation.RoleAssistant), ToolCalls: []trace.ToolCall{c}}))
}

// withDescription is a task call with another description, its other
// arguments as they were (in their order).
func withDescription(c trace.ToolCall, description string) (trace.ToolCall, error) {
	var args struct {
		Description  string `json:"description"`
		SubagentType string `json:"subagent_type"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return c, fmt.Errorf("task call %s: %w", c.ID, err)
	}
	args.Description = description
	b, err := json.Marshal(args)
	if err != nil {
		return c, err
	}
	c.Args = b
	return c, nil
}
