package delegation

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventType names an event of formats.md §3.
type EventType string

const (
	EventSessionStarted     EventType = "session.started"
	EventSessionFinished    EventType = "session.finished"
	EventAgentStarted       EventType = "agent.started"
	EventAgentFinished      EventType = "agent.finished"
	EventModelStarted       EventType = "model.started"
	EventModelFinished      EventType = "model.finished"
	EventModelDelta         EventType = "model.delta" // live only: never stored
	EventModelRetry         EventType = "model.retry" // live only: never stored
	EventMessageAdded       EventType = "message.added"
	EventToolStarted        EventType = "tool.started"
	EventToolFinished       EventType = "tool.finished"
	EventDelegationStarted  EventType = "delegation.started"
	EventDelegationFinished EventType = "delegation.finished"
	EventDelegationRefused  EventType = "delegation.refused"
	EventSummarization      EventType = "summarization"
	EventFilesChanged       EventType = "files.changed"
	EventTodosChanged       EventType = "todos.changed"
	// EventSpanReceived keeps a span of a received trace that maps to none
	// of the events above (a framework's own step, a middleware), so that
	// nothing received is dropped: the session page lists it.
	EventSpanReceived EventType = "span.received"
)

// Event is one entry of a session's log. Seq counts from 1 per session; the
// engine hands events to its Sink in seq order.
type Event struct {
	Seq     int64           `json:"seq"`
	Type    EventType       `json:"type"`
	AgentID string          `json:"agent_id"` // "" for session events; null in JSON
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data"`
	// Payload is Data before encoding, when the event comes straight from
	// the engine (one of the payload types below). The engine leaves the
	// encoding to whoever needs it (Encode), off its own path; readers use
	// the payload to skip decoding. It is never serialized itself.
	Payload any `json:"-"`
}

// Encode fills Data from Payload, once; events read back from a store or a
// trace have Data already.
func (e *Event) Encode() error {
	if e.Data != nil || e.Payload == nil {
		return nil
	}
	b, err := json.Marshal(e.Payload)
	if err != nil {
		return fmt.Errorf("encode %s event %d: %w", e.Type, e.Seq, err)
	}
	e.Data = b
	return nil
}

// DataAs returns an event's data as T: the engine's own value when the
// event comes straight from it, else its JSON decoded.
func DataAs[T any](ev Event) (T, error) {
	switch v := ev.Payload.(type) {
	case T:
		return v, nil
	case *T:
		if v != nil {
			return *v, nil
		}
	}
	var out T
	if len(ev.Data) == 0 {
		return out, fmt.Errorf("%s event %d has no data", ev.Type, ev.Seq)
	}
	err := json.Unmarshal(ev.Data, &out)
	return out, err
}

type eventJSON struct {
	Seq     int64           `json:"seq"`
	Type    EventType       `json:"type"`
	AgentID *string         `json:"agent_id"`
	At      time.Time       `json:"at"`
	Data    json.RawMessage `json:"data"`
}

// MarshalJSON writes a session-level event's agent_id as null.
func (e Event) MarshalJSON() ([]byte, error) {
	if err := e.Encode(); err != nil {
		return nil, err
	}
	j := eventJSON{Seq: e.Seq, Type: e.Type, At: e.At.UTC(), Data: e.Data}
	if e.AgentID != "" {
		j.AgentID = &e.AgentID
	}
	if j.Data == nil {
		j.Data = json.RawMessage("{}")
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (e *Event) UnmarshalJSON(b []byte) error {
	var j eventJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Event{Seq: j.Seq, Type: j.Type, At: j.At, Data: j.Data}
	if j.AgentID != nil {
		e.AgentID = *j.AgentID
	}
	return nil
}

// Sink receives a session's events, one at a time and in seq order. The
// engine does not implement it: the session recorder, the live hub and the
// CLI do. Emit must not block for long: it is called while the engine holds
// the lock that orders events.
type Sink interface {
	Emit(Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(Event)

// Emit calls f.
func (f SinkFunc) Emit(e Event) { f(e) }

// The payloads of each event's Data, as the engine writes them.

// SessionStarted is the data of session.started.
type SessionStarted struct {
	SessionID string            `json:"session_id"`
	Name      string            `json:"name"`
	Prompt    string            `json:"prompt"`
	Tokenizer string            `json:"tokenizer"`
	Files     map[string]string `json:"files"`
	// Origin says where the session came from; nil means our engine ran it.
	Origin *Origin `json:"origin,omitempty"`
}

// Origins of a session (design.md, "Where sessions come from").
const (
	OriginEngine = "engine" // our engine ran it
	OriginOTLP   = "otlp"   // built from a received or imported OTLP trace
	OriginProxy  = "proxy"  // recorded by the OpenAI-compatible endpoint
)

// Origins are the kinds of Origin, in a list's order.
func Origins() []string { return []string{OriginEngine, OriginOTLP, OriginProxy} }

// Origin says where a session came from and, for one built from someone
// else's program, what that program said of itself.
type Origin struct {
	Kind string `json:"kind"` // engine, otlp or proxy
	// Service is the program's name (an OTLP resource's service.name).
	Service string `json:"service,omitempty"`
	// Convention is how its spans were read: openinference or genai.
	Convention string `json:"convention,omitempty"`
	// Instrumentation names the libraries that made the spans, each as
	// "name version" (OTLP instrumentation scopes).
	Instrumentation []string `json:"instrumentation,omitempty"`
	// SDK is the telemetry SDK, as "name language version".
	SDK string `json:"sdk,omitempty"`
	// TraceID is the OTLP trace the session was built from.
	TraceID string `json:"trace_id,omitempty"`
	// Upstream is where the recording endpoint sent the calls: a base URL,
	// or "script:" and the scenario that answered them.
	Upstream string `json:"upstream,omitempty"`
	// Provider is whose API the calls spoke, as a GenAI provider name: for
	// a recorded session, the route of its first call (openai for
	// /v1/chat/completions, anthropic for /v1/messages); for a received
	// trace, what its first span naming one said (gen_ai.provider.name,
	// gen_ai.system, llm.provider or llm.system). Empty: unknown.
	Provider string `json:"provider,omitempty"`
}

// OriginKind is a session's origin, engine when it has none.
func (o *Origin) OriginKind() string {
	if o == nil || o.Kind == "" {
		return OriginEngine
	}
	return o.Kind
}

// SessionFinished is the data of session.finished.
type SessionFinished struct {
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Code is why it failed, as an error code (EFULL: the store's disk
	// filled), when the studio rather than the run ended it; pages say it
	// in their language.
	Code string `json:"code,omitempty"`
	// StoppedBy says, as a code (Stop*), why an interrupted session was
	// stopped; the edge words it. Logs written before it have only Error.
	StoppedBy string            `json:"stopped_by,omitempty"`
	Answer    string            `json:"answer"`
	Files     map[string]string `json:"files,omitempty"`
}

// AgentInfo describes an agent in the tree.
type AgentInfo struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	ParentID   string `json:"parent_id,omitempty"`
	Mode       Mode   `json:"mode,omitempty"`
	TaskCallID string `json:"task_call_id,omitempty"`
	Invocation int    `json:"invocation"`
}

// ToolCost is a tool definition's size as the model receives it.
type ToolCost struct {
	Name   string `json:"name"`
	Tokens int    `json:"tokens"`
}

// AgentStarted is the data of agent.started.
type AgentStarted struct {
	Agent        AgentInfo  `json:"agent"`
	SystemPrompt string     `json:"system_prompt"`
	SystemTokens int        `json:"system_tokens"`
	Tools        []ToolCost `json:"tools"`
	MaxSteps     int        `json:"max_steps"`
	// Model is the model the agent's calls ask for (the spec's, or the
	// endpoint's own), and Endpoint where they go (a base URL, never a
	// key); both empty for a scripted agent whose team names no model.
	Model    string `json:"model,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Price is what its tokens cost, when known (the scenario's pricing, or
	// the price table's for its model); nil: its calls are not priced.
	Price *Price `json:"price,omitempty"`
}

// AgentFinished is the data of agent.finished.
type AgentFinished struct {
	Status string `json:"status"` // done or failed
	Error  string `json:"error,omitempty"`
	// StoppedBy is set (a Stop* code) when the agent failed because its
	// session was stopped from outside, not on its own.
	StoppedBy string `json:"stopped_by,omitempty"`
	// Code is why it failed, when the engine knows it as a rule of its own
	// (Finish*); Error keeps the text. Logs written before it have only
	// Error: trace.StepOf reads the code from it.
	Code    string `json:"code,omitempty"`
	Steps   int    `json:"steps"`
	Receipt string `json:"receipt"`
}

// Why an agent failed, as AgentFinished.Code says it.
const (
	// FinishStepLimit: it used up its model calls before a final answer.
	FinishStepLimit = "step_limit"
	// FinishCancelled: its context was cancelled under it.
	FinishCancelled = "cancelled"
)

// ModelCall records one model call: what it received, as ranges of message
// lists, and what that cost.
type ModelCall struct {
	ID              string     `json:"id"`
	AgentID         string     `json:"agent_id"`
	Index           int        `json:"index"`
	Purpose         Purpose    `json:"purpose"`
	SystemPrompt    string     `json:"system_prompt"`
	SystemTokens    int        `json:"system_tokens"`
	Context         []Range    `json:"context"`
	Tools           []ToolCost `json:"tools"`
	ToolTokens      int        `json:"tool_tokens"`
	MessageTokens   int        `json:"message_tokens"`
	InheritedTokens int        `json:"inherited_tokens"`
	InputTokens     int        `json:"input_tokens"`
	// CachedPrefixTokens are the tokens of the longest prefix of this
	// call's input (tools, system prompt, messages, in that order) that a
	// request made earlier in the session had too: what a prompt cache can
	// serve (prefix.go). InputTokens - CachedPrefixTokens are new.
	CachedPrefixTokens int    `json:"cached_prefix_tokens"`
	OutputMessageID    string `json:"output_message_id"`
	Usage              *Usage `json:"usage,omitempty"`
}

// ModelStarted is the data of model.started: sent before the call, so a slow
// call shows as running.
type ModelStarted struct {
	Call ModelCall `json:"call"`
}

// ModelFinished is the data of model.finished.
type ModelFinished struct {
	ModelCallID     string `json:"model_call_id"`
	OutputMessageID string `json:"output_message_id,omitempty"`
	OutputTokens    int    `json:"output_tokens"`
	DurationMS      int64  `json:"duration_ms"`
	Usage           *Usage `json:"usage,omitempty"`
	// Response is what the endpoint said of its answer (its id, model and
	// finish reason), when it said any of it.
	Response *ResponseMeta `json:"response,omitempty"`
	// Cost is what the call cost, when its agent has a price.
	Cost  *Cost  `json:"cost,omitempty"`
	Error string `json:"error,omitempty"`
	// StoppedBy is why the call was cut, when a stop from outside cut it:
	// a Stop* code, worded by the edge (Error keeps the plain text, for
	// readers that do not know the code).
	StoppedBy string `json:"stopped_by,omitempty"`
}

// ModelDelta is the data of model.delta.
type ModelDelta struct {
	ModelCallID string `json:"model_call_id"`
	Text        string `json:"text"`
}

// ModelRetry is the data of model.retry: an attempt of a model call failed
// and is about to be made again.
type ModelRetry struct {
	ModelCallID string `json:"model_call_id"`
	Attempt     int    `json:"attempt"`  // the attempt that failed, from 1
	Attempts    int    `json:"attempts"` // how many may be made in all
	// Cause is rate_limit, server_error, timeout, connection or stream.
	Cause  string `json:"cause"`
	Error  string `json:"error"`
	WaitMS int64  `json:"wait_ms"`
}

// MessageAdded is the data of message.added.
type MessageAdded struct {
	Index   int      `json:"index"` // position in the agent's message list
	Message *Message `json:"message"`
}

// ToolStarted is the data of tool.started.
type ToolStarted struct {
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Args       json.RawMessage `json:"args"`
}

// ToolFinished is the data of tool.finished.
type ToolFinished struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
	IsError    bool   `json:"is_error,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
}

// DelegationStarted is the data of delegation.started.
type DelegationStarted struct {
	ToolCallID   string `json:"tool_call_id"`
	ChildID      string `json:"child_id"`
	SubagentType string `json:"subagent_type"`
	Mode         Mode   `json:"mode"`
	Description  string `json:"description"`
}

// DelegationFinished is the data of delegation.finished, sent when the
// receipt enters the parent.
type DelegationFinished struct {
	ToolCallID       string   `json:"tool_call_id"`
	ChildID          string   `json:"child_id"`
	ReceiptMessageID string   `json:"receipt_message_id"`
	IsError          bool     `json:"is_error"`
	Returned         []string `json:"returned"`  // state that came back: receipt, files
	HeldBack         []string `json:"held_back"` // state that did not: messages, todos, structured_response
}

// Refusal reasons of delegation.refused.
const (
	RefusedNested      = "nested"
	RefusedUnknownType = "unknown_type"
)

// DelegationRefused is the data of delegation.refused.
type DelegationRefused struct {
	ToolCallID   string `json:"tool_call_id"`
	Reason       string `json:"reason"`
	SubagentType string `json:"subagent_type"`
	Message      string `json:"message"`
}

// Summarized is the data of summarization (delegation.md §7).
type Summarized struct {
	// CutoffIndex is a position in the agent's raw message list, the list
	// deepagents' state holds: for a fork the history it inherited, then its
	// own messages, in both cases without summary messages. Every later call
	// sees [SummaryMessage] + raw[CutoffIndex:].
	CutoffIndex    int      `json:"cutoff_index"`
	SummaryMessage *Message `json:"summary_message"`
	FilePath       string   `json:"file_path"`
	FoldedMessages int      `json:"folded_messages"`
	TokensBefore   int      `json:"tokens_before"`
	TokensAfter    int      `json:"tokens_after"`
}

// FileChange is one write or delete.
type FileChange struct {
	Path    string `json:"path"`
	Content string `json:"content,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// SpanReceived is the data of span.received: a received span kept as it
// came, its attribute values cut at a documented length (docs/ingest.md).
type SpanReceived struct {
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id,omitempty"`
	Name         string            `json:"name"`
	Kind         string            `json:"kind,omitempty"` // the convention's kind (CHAIN, RETRIEVER…) or OTLP's
	StartedAt    time.Time         `json:"started_at"`
	DurationMS   int64             `json:"duration_ms"`
	Status       string            `json:"status,omitempty"` // ok or error
	Error        string            `json:"error,omitempty"`
	Orphan       bool              `json:"orphan,omitempty"` // its parent never arrived
	Attributes   map[string]string `json:"attributes,omitempty"`
}

// TodosChanged is the data of todos.changed: an agent's todo list is now
// Todos (write_todos). A child's todos stay in the child: they are held
// back when its receipt comes back.
type TodosChanged struct {
	Todos []Todo `json:"todos"`
}

// FilesChanged is the data of files.changed: an agent's filesystem changed,
// by its own tool or by a child's changes merged back (From names the child).
type FilesChanged struct {
	From    string       `json:"from,omitempty"`
	Changes []FileChange `json:"changes"`
}
