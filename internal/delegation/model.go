package delegation

import (
	"context"
	"encoding/json"
)

// Model is where an agent's next turn comes from: a scripted model that
// plays a scenario's script, or an OpenAI-compatible endpoint. The engine
// calls it; adapters implement it.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Describer is a Model that says, for an agent, which model its calls ask
// for (given its spec's model name, "" meaning the adapter's default) and
// the endpoint they go to (a base URL, never a key): the engine records
// both in the agent's agent.started and prices the agent by that model. A model that is not one (scripted) has
// its agents' spec models recorded and no endpoint.
type Describer interface {
	Describe(c Caller, model string) (requested, endpoint string)
}

// Purpose says why the engine asks the model.
type Purpose string

const (
	PurposeTurn    Purpose = "turn"    // the agent's next turn
	PurposeSummary Purpose = "summary" // a summary of Request.Messages, to replace them
)

// Caller identifies the agent a request is for. Name is "main" for the main
// agent and the subagent's spec name for a child; Invocation counts the
// times that subagent has been started, from 0, in tool-call order.
type Caller struct {
	AgentID    string
	Name       string
	Invocation int
}

// ToolDef is a tool as the model sees it.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call: everything the model receives.
type Request struct {
	Caller   Caller
	Purpose  Purpose
	Model    string // the spec's model name; "" means the adapter's default
	System   string
	Messages []*Message
	Tools    []ToolDef
	// ResponseFormat is the JSON Schema of the agent's structured response,
	// when it has one; adapters that support a native JSON mode may use it.
	ResponseFormat json.RawMessage
	// ToolChoice is ToolChoiceRequired when the model must answer with a
	// tool call (an agent with a response_format gives its answer only
	// through its structured tool); "" leaves it to the model.
	ToolChoice string
	// Stream, when set, receives text as the model produces it.
	Stream func(delta string)
	// Retry, when set, is told of each failed attempt the adapter is about
	// to make again, so a slow call shows why it is slow.
	Retry func(ModelRetry)
}

// ToolChoiceRequired asks the model for a tool call, not text.
const ToolChoiceRequired = "required"

// Usage is what an endpoint reports it counted; the engine records it beside
// its own count.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens the endpoint read from its prompt
	// cache (a fork's shared prefix is what makes them).
	CachedTokens int `json:"cached_tokens,omitempty"`
	// CachedReported says the endpoint sent its cached count, 0 among
	// them: an endpoint that says nothing of its cache is not one that
	// read 0 from it (CacheReported).
	CachedReported bool `json:"cached_reported,omitempty"`
	// CacheCreationTokens are the prompt tokens the endpoint wrote to its
	// prompt cache for later calls to read (Anthropic's
	// cache_creation_input_tokens); they are in PromptTokens too.
	CacheCreationTokens int `json:"cache_creation_tokens,omitempty"`
	// ReasoningTokens are the completion tokens a reasoning model spent
	// thinking, not in its answer.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// CacheReported reports whether the endpoint said how many prompt tokens it
// read from its cache. A log written before CachedReported says so only of
// a count above 0.
func (u *Usage) CacheReported() bool { return u != nil && (u.CachedReported || u.CachedTokens > 0) }

// Response is the model's answer: text, tool calls, or both. For
// PurposeSummary, Content is the summary.
type Response struct {
	Content string
	// Reasoning is what a reasoning model wrote before its answer, when
	// the endpoint returns it (reasoning_content). It is kept on the
	// message, apart from its content, and never sent back to the model.
	Reasoning string
	ToolCalls []ToolCall
	Usage     *Usage
	// Meta is what the endpoint said of its answer; nil when it said
	// nothing (the scripted model).
	Meta *ResponseMeta
}

// ResponseMeta is what an endpoint said of its answer, as it said it: the
// response's id, the model that answered (which may not be the one asked
// for: an alias resolved, a dated version) and why it stopped (OpenAI's
// finish_reason, "tool_calls" and all; Anthropic's stop_reason). Each is ""
// when the endpoint did not say it.
type ResponseMeta struct {
	ID           string `json:"id,omitempty"`
	Model        string `json:"model,omitempty"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// MetaOf is what an endpoint said, nil when it said none of it.
func MetaOf(id, model, finishReason string) *ResponseMeta {
	if id == "" && model == "" && finishReason == "" {
		return nil
	}
	return &ResponseMeta{ID: id, Model: model, FinishReason: finishReason}
}
