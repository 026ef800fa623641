// Package trace builds the trace of formats.md §2 from a session's event
// log, and turns a trace back into that log. The log is the truth; the
// trace's agents, messages, model calls and files are views of it.
//
// In the trace each message and model call is written once: the events that
// introduced them (message.added, model.started, summarization) refer to them
// by id instead of repeating them, so a trace stays linear in size.
package trace

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Format and Version identify the document.
const (
	Format  = "delegation-studio.trace"
	Version = 1
)

// Trace is the exported document.
type Trace struct {
	Format     string            `json:"format"`
	Version    int               `json:"version"`
	Session    Session           `json:"session"`
	Scenario   json.RawMessage   `json:"scenario"`
	Agents     []Agent           `json:"agents"`
	Messages   []Message         `json:"messages"`
	ModelCalls []ModelCall       `json:"model_calls"`
	Events     []Event           `json:"events"`
	Files      map[string]string `json:"files"`
}

// Session describes the session.
type Session struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Title      string     `json:"title,omitempty"`
	Prompt     string     `json:"prompt"`
	Status     string     `json:"status"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	Tokenizer  string     `json:"tokenizer"`
	// Origin says where the session came from (session.started's origin);
	// nil: our engine ran it.
	Origin *delegation.Origin `json:"origin,omitempty"`
}

// Agent is a node of the delegation tree.
type Agent struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	ParentID     *string    `json:"parent_id"`
	Mode         *string    `json:"mode"`
	TaskCallID   *string    `json:"task_call_id"`
	Status       string     `json:"status"`
	Error        string     `json:"error,omitempty"`
	Invocation   int        `json:"invocation"`
	SystemPrompt string     `json:"system_prompt"`
	SystemTokens int        `json:"system_tokens"`
	Tools        []ToolCost `json:"tools"`
	Steps        int        `json:"steps"`
	// Model is the model its calls asked for, Endpoint where they went, as
	// its agent.started says (empty for a scripted agent of no model);
	// Price what its tokens cost, when known.
	Model    string            `json:"model,omitempty"`
	Endpoint string            `json:"endpoint,omitempty"`
	Price    *delegation.Price `json:"price,omitempty"`
}

// ToolCost is a tool definition's tokens.
type ToolCost = delegation.ToolCost

// Message is one message, written once.
type Message struct {
	ID         string     `json:"id"`
	AgentID    string     `json:"agent_id"`
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Reasoning  string     `json:"reasoning,omitempty"` // a reasoning model's thinking, apart from the content
	ToolCalls  []ToolCall `json:"tool_calls"`
	ToolCallID *string    `json:"tool_call_id"`
	IsError    bool       `json:"is_error"`
	Tokens     int        `json:"tokens"`
	Kind       string     `json:"kind"`
	// Evicted says the text was moved to a file and Content is the pointer
	// the model read instead (delegation.md §12).
	Evicted *delegation.Eviction `json:"evicted,omitempty"`
}

// ToolCall is a call an assistant message asks for.
type ToolCall = delegation.ToolCall

// ModelCall is one model call: what it received, as ranges of message
// lists, and what that cost.
type ModelCall struct {
	ID              string             `json:"id"`
	AgentID         string             `json:"agent_id"`
	Index           int                `json:"index"`
	Purpose         string             `json:"purpose"`
	SystemPrompt    string             `json:"system_prompt"`
	SystemTokens    int                `json:"system_tokens"`
	Context         []delegation.Range `json:"context"`
	Tools           []ToolCost         `json:"tools"`
	ToolTokens      int                `json:"tool_tokens"`
	MessageTokens   int                `json:"message_tokens"`
	InheritedTokens int                `json:"inherited_tokens"`
	InputTokens     int                `json:"input_tokens"`
	// CachedPrefixTokens are the tokens of the longest prefix of its input
	// that an earlier request of the session had too (delegation/prefix.go).
	CachedPrefixTokens int       `json:"cached_prefix_tokens"`
	OutputMessageID    *string   `json:"output_message_id"`
	StartedAt          time.Time `json:"started_at"`
	DurationMS         int64     `json:"duration_ms"`
	Error              string    `json:"error,omitempty"`
	// StoppedBy is why a stop from outside cut the call (a delegation.Stop*
	// code); absent when none did.
	StoppedBy string            `json:"stopped_by,omitempty"`
	Usage     *delegation.Usage `json:"usage,omitempty"`
	// Response is what the endpoint said of its answer: its id, the model
	// that answered, why it stopped; absent when it said none of it.
	Response *delegation.ResponseMeta `json:"response,omitempty"`
	Cost     *delegation.Cost         `json:"cost,omitempty"`
}

// Event is a log entry as the trace writes it: events that introduced a
// message or a model call refer to it by id.
type Event = delegation.Event

// Meta is what the log does not say about a session: its id, its status
// when it did not finish, and its scenario.
type Meta struct {
	ID       string
	Title    string
	Status   string // "" means as the log says: running until session.finished
	Scenario json.RawMessage
}

// Build makes the trace of a session from its log. Events of seq 0 (live
// only) are skipped.
func Build(meta Meta, events []delegation.Event) (*Trace, error) {
	b := NewBuilder(meta)
	for _, ev := range events {
		if _, err := b.Add(ev); err != nil {
			return nil, err
		}
	}
	return b.Trace(), nil
}

// Builder builds a trace one event at a time, for a view that follows a
// running session.
type Builder struct {
	meta   Meta
	t      *Trace
	agents map[string]int
	calls  map[string]int
	files  map[string]string
}

// NewBuilder starts an empty trace.
func NewBuilder(meta Meta) *Builder {
	t := &Trace{Format: Format, Version: Version, Scenario: meta.Scenario,
		Session:  Session{ID: meta.ID, Title: meta.Title, Status: delegation.StatusRunning},
		Agents:   []Agent{},
		Messages: []Message{}, ModelCalls: []ModelCall{}, Events: []Event{}}
	if len(t.Scenario) == 0 {
		t.Scenario = json.RawMessage("{}")
	}
	return &Builder{meta: meta, t: t, agents: map[string]int{}, calls: map[string]int{}}
}

// Trace returns the trace so far. It is the builder's own: read it, do not
// keep it past the next Add.
func (b *Builder) Trace() *Trace {
	t := b.t
	if b.meta.Status != "" && t.Session.Status == delegation.StatusRunning {
		t.Session.Status = b.meta.Status
	}
	t.Files = b.files
	if t.Files == nil {
		t.Files = map[string]string{}
	}
	return t
}

// Add takes the next event of the log and returns its step. Events of seq
// 0 are read but change nothing.
func (b *Builder) Add(ev delegation.Event) (Step, error) {
	st, err := StepOf(ev)
	if err != nil || ev.Seq == 0 {
		return st, err
	}
	return st, b.AddStep(st)
}

// AddStep folds the next step of the log into the trace.
func (b *Builder) AddStep(st Step) error {
	t := b.t
	ev := st.Event
	out, err := st.Stored()
	if err != nil {
		return err
	}
	switch {
	case st.SessionStarted != nil:
		d := st.SessionStarted
		t.Session.Name, t.Session.Prompt, t.Session.Tokenizer = d.Name, d.Prompt, d.Tokenizer
		t.Session.CreatedAt, t.Session.Origin = ev.At, d.Origin
	case st.SessionFinished != nil:
		d := st.SessionFinished
		t.Session.Status, t.Session.Error = d.Status, d.Error
		at := ev.At
		t.Session.FinishedAt = &at
		if st.Files != nil {
			b.files = copyFiles(st.Files)
		}
	case st.AgentStarted != nil:
		d := st.AgentStarted
		b.agents[d.Agent.ID] = len(t.Agents)
		t.Agents = append(t.Agents, Agent{ID: d.Agent.ID, Name: d.Agent.Name,
			ParentID: optional(d.Agent.ParentID), Mode: optional(string(d.Agent.Mode)),
			TaskCallID: optional(d.Agent.TaskCallID), Status: delegation.StatusRunning,
			Invocation: d.Agent.Invocation, SystemPrompt: d.SystemPrompt,
			SystemTokens: d.SystemTokens, Tools: d.Tools, Model: d.Model, Endpoint: d.Endpoint, Price: d.Price})
	case st.AgentFinished != nil:
		d := st.AgentFinished
		i, ok := b.agents[ev.AgentID]
		if !ok {
			return fmt.Errorf("event %d: agent.finished for unknown agent %q", ev.Seq, ev.AgentID)
		}
		t.Agents[i].Status, t.Agents[i].Error, t.Agents[i].Steps = d.Status, d.Error, d.Steps
	case st.Message != nil:
		t.Messages = append(t.Messages, *st.Message)
	case st.Call != nil:
		b.calls[st.Call.ID] = len(t.ModelCalls)
		c := *st.Call
		c.StartedAt = ev.At.UTC()
		t.ModelCalls = append(t.ModelCalls, c)
	case st.Finished != nil:
		f := st.Finished
		i, ok := b.calls[f.ModelCallID]
		if !ok {
			return fmt.Errorf("event %d: model.finished for unknown model call %q", ev.Seq, f.ModelCallID)
		}
		c := &t.ModelCalls[i]
		c.OutputMessageID, c.DurationMS, c.Error, c.Usage, c.Cost = optional(f.OutputMessageID), f.DurationMS, f.Error, f.Usage, f.Cost
		c.Response, c.StoppedBy = f.Response, f.StoppedBy
	}
	if changes, whole := st.MainFiles(); whole || len(changes) > 0 {
		if whole {
			b.files = map[string]string{}
		}
		if b.files != nil {
			applyChanges(b.files, changes)
		}
	}
	t.Events = append(t.Events, out)
	return nil
}

// The data of events that refer to what the trace writes once.
type messageRef struct {
	Index     int    `json:"index"`
	MessageID string `json:"message_id"`
}

type callRef struct {
	ModelCallID string `json:"model_call_id"`
}

type toolRef struct {
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// Ref is what the data of an event that refers to a message or a model
// call written once says of it.
type Ref struct {
	Index       int    `json:"index"`
	MessageID   string `json:"message_id"`
	ModelCallID string `json:"model_call_id"`
}

// MessageAddedData and ModelCallData are the data of the events a store
// reads back from its message and model-call rows.
func MessageAddedData(index int, messageID string) json.RawMessage {
	return mustJSON(messageRef{Index: index, MessageID: messageID})
}

// ToolStartedData is the data of tool.started in a trace: the call's id
// and name (its arguments are in its assistant message).
func ToolStartedData(callID, name string) json.RawMessage {
	return mustJSON(toolRef{ToolCallID: callID, Name: name})
}

// ModelCallData is the data of model.started and model.finished in a trace.
func ModelCallData(callID string) json.RawMessage {
	return mustJSON(callRef{ModelCallID: callID})
}

func messageOf(m *delegation.Message) Message {
	calls := m.ToolCalls
	if calls == nil {
		calls = []ToolCall{}
	}
	return Message{ID: m.ID, AgentID: m.AgentID, Role: string(m.Role), Content: m.Content, Reasoning: m.Reasoning, ToolCalls: calls,
		ToolCallID: optional(m.ToolCallID), IsError: m.IsError, Tokens: m.Tokens, Kind: string(m.Kind), Evicted: m.Evicted}
}

// Domain is the message as the engine holds it.
func (m Message) Domain() *delegation.Message {
	out := &delegation.Message{ID: m.ID, AgentID: m.AgentID, Role: delegation.Role(m.Role), Content: m.Content,
		Reasoning: m.Reasoning, ToolCalls: m.ToolCalls, IsError: m.IsError, Tokens: m.Tokens, Kind: delegation.Kind(m.Kind), Evicted: m.Evicted}
	if len(out.ToolCalls) == 0 {
		out.ToolCalls = nil
	}
	if m.ToolCallID != nil {
		out.ToolCallID = *m.ToolCallID
	}
	return out
}

// Domain is the call as the engine's model.started carries it.
func (c ModelCall) Domain() delegation.ModelCall {
	return delegation.ModelCall{ID: c.ID, AgentID: c.AgentID, Index: c.Index,
		Purpose: delegation.Purpose(c.Purpose), SystemPrompt: c.SystemPrompt, SystemTokens: c.SystemTokens,
		Context: c.Context, Tools: c.Tools, ToolTokens: c.ToolTokens, MessageTokens: c.MessageTokens,
		InheritedTokens: c.InheritedTokens, InputTokens: c.InputTokens, CachedPrefixTokens: c.CachedPrefixTokens}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs are encoded here
	}
	return b
}

func copyFiles(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func applyChanges(files map[string]string, changes []delegation.FileChange) {
	for _, c := range changes {
		if c.Deleted {
			delete(files, c.Path)
		} else {
			files[c.Path] = c.Content
		}
	}
}

// SortedPaths lists a file map's paths in order.
func SortedPaths(files map[string]string) []string {
	out := make([]string, 0, len(files))
	for p := range files {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Inflate turns a trace back into the log as the engine emitted it: the
// events that introduced a message or a model call carry it again, and
// model.finished and session.finished carry what the trace keeps in the
// call and the files. (tool.started's arguments stay in their assistant
// message.) Feeding the result to a Builder rebuilds the trace.
func Inflate(t *Trace) ([]delegation.Event, error) {
	msgs := make(map[string]*Message, len(t.Messages))
	for i := range t.Messages {
		msgs[t.Messages[i].ID] = &t.Messages[i]
	}
	calls := make(map[string]*ModelCall, len(t.ModelCalls))
	for i := range t.ModelCalls {
		calls[t.ModelCalls[i].ID] = &t.ModelCalls[i]
	}
	out := make([]delegation.Event, 0, len(t.Events))
	for _, ev := range t.Events {
		var ref Ref
		switch ev.Type {
		case delegation.EventMessageAdded:
			if err := json.Unmarshal(ev.Data, &ref); err != nil {
				return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			m, ok := msgs[ref.MessageID]
			if !ok {
				return nil, fmt.Errorf("event %d: no message %q", ev.Seq, ref.MessageID)
			}
			ev.Payload, ev.Data = delegation.MessageAdded{Index: ref.Index, Message: m.Domain()}, nil
		case delegation.EventModelStarted, delegation.EventModelFinished:
			if err := json.Unmarshal(ev.Data, &ref); err != nil {
				return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			c, ok := calls[ref.ModelCallID]
			if !ok {
				return nil, fmt.Errorf("event %d: no model call %q", ev.Seq, ref.ModelCallID)
			}
			if ev.Type == delegation.EventModelStarted {
				ev.Payload = delegation.ModelStarted{Call: c.Domain()}
			} else {
				fin := *c.Finished()
				if m := msgs[fin.OutputMessageID]; m != nil {
					fin.OutputTokens = m.Tokens
				}
				ev.Payload = fin
			}
			ev.Data = nil
		case delegation.EventSessionFinished:
			var d delegation.SessionFinished
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("event %d: %w", ev.Seq, err)
			}
			d.Files = t.Files
			ev.Payload, ev.Data = d, nil
		}
		out = append(out, ev)
	}
	return out, nil
}
