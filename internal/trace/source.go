package trace

import (
	"encoding/json"
	"fmt"
	"iter"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Head is what is known of a session before its parts are read: the
// session, the scenario as run, and the log's last seq at the time of
// reading (a running session's log grows past it).
type Head struct {
	Session  Session
	Scenario json.RawMessage
	LastSeq  int64
}

// File is one file of the main agent's filesystem when the session ended.
type File struct {
	Path    string
	Content string
}

// Source is a session read part by part, each part in the order the trace
// writes it: the store's cursors (db.Reader) or a trace in memory
// (SourceOf). A part's sequence yields a non-nil error at most once, last.
type Source interface {
	Head() Head
	Agents() iter.Seq2[Agent, error]
	Messages() iter.Seq2[Message, error]
	ModelCalls() iter.Seq2[ModelCall, error]
	// Events is the log as the trace writes it: events that introduced a
	// message or a model call refer to it by id.
	Events() iter.Seq2[Event, error]
	Files() iter.Seq2[File, error]
}

// SourceOf reads a trace in memory as a Source, with its log (Log) and its
// message lists (Backward) too, as the store's reader offers them.
func SourceOf(t *Trace) *Memory { return &Memory{t: t} }

// Memory is a trace in memory read as a Source.
type Memory struct {
	t     *Trace
	lists map[string][]*Message
}

// Head returns the trace's session and scenario, and its last seq.
func (m *Memory) Head() Head {
	h := Head{Session: m.t.Session, Scenario: m.t.Scenario}
	if n := len(m.t.Events); n > 0 {
		h.LastSeq = m.t.Events[n-1].Seq
	}
	return h
}

func each[T any](xs []T) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for _, x := range xs {
			if !yield(x, nil) {
				return
			}
		}
	}
}

// Agents yields the trace's agents.
func (m *Memory) Agents() iter.Seq2[Agent, error] { return each(m.t.Agents) }

// Messages yields the trace's messages.
func (m *Memory) Messages() iter.Seq2[Message, error] { return each(m.t.Messages) }

// ModelCalls yields the trace's model calls.
func (m *Memory) ModelCalls() iter.Seq2[ModelCall, error] { return each(m.t.ModelCalls) }

// Events yields the trace's events.
func (m *Memory) Events() iter.Seq2[Event, error] { return each(m.t.Events) }

// Files yields the trace's files in path order.
func (m *Memory) Files() iter.Seq2[File, error] {
	return func(yield func(File, error) bool) {
		for _, p := range SortedPaths(m.t.Files) {
			if !yield(File{Path: p, Content: m.t.Files[p]}, nil) {
				return
			}
		}
	}
}

// Log yields the trace's log, each event as a step with what it
// introduced, as a store keeps it: message.added with its message,
// model.started with its call, model.finished with what it added to the
// call.
func (m *Memory) Log() iter.Seq2[Step, error] {
	return func(yield func(Step, error) bool) {
		msgs := make(map[string]*Message, len(m.t.Messages))
		for i := range m.t.Messages {
			msgs[m.t.Messages[i].ID] = &m.t.Messages[i]
		}
		calls := make(map[string]*ModelCall, len(m.t.ModelCalls))
		for i := range m.t.ModelCalls {
			calls[m.t.ModelCalls[i].ID] = &m.t.ModelCalls[i]
		}
		for _, ev := range m.t.Events {
			st, err := m.step(ev, msgs, calls)
			if !yield(st, err) || err != nil {
				return
			}
		}
	}
}

// step reads one event of the trace's log, with what it introduced.
func (m *Memory) step(ev Event, msgs map[string]*Message, calls map[string]*ModelCall) (Step, error) {
	switch ev.Type {
	case delegation.EventMessageAdded, delegation.EventModelStarted, delegation.EventModelFinished:
	default:
		return StepOf(ev)
	}
	var ref Ref
	if err := json.Unmarshal(ev.Data, &ref); err != nil {
		return Step{Event: ev}, fmt.Errorf("event %d: %w", ev.Seq, err)
	}
	switch ev.Type {
	case delegation.EventMessageAdded:
		msg := msgs[ref.MessageID]
		if msg == nil {
			return Step{Event: ev}, fmt.Errorf("event %d: no message %q", ev.Seq, ref.MessageID)
		}
		return Introduced(ev, ref.Index, msg, nil, nil), nil
	case delegation.EventModelStarted:
		c := calls[ref.ModelCallID]
		if c == nil {
			return Step{Event: ev}, fmt.Errorf("event %d: no model call %q", ev.Seq, ref.ModelCallID)
		}
		return Introduced(ev, 0, nil, c, nil), nil
	default:
		c := calls[ref.ModelCallID]
		if c == nil {
			return Step{Event: ev}, fmt.Errorf("event %d: no model call %q", ev.Seq, ref.ModelCallID)
		}
		return Introduced(ev, 0, nil, nil, c.Finished()), nil
	}
}

// Finished is what a call's model.finished added to it.
func (c *ModelCall) Finished() *delegation.ModelFinished {
	return &delegation.ModelFinished{ModelCallID: c.ID, OutputMessageID: deref(c.OutputMessageID),
		DurationMS: c.DurationMS, Usage: c.Usage, Response: c.Response, Cost: c.Cost, Error: c.Error, StoppedBy: c.StoppedBy}
}

// Backward yields messages to-1 down to from of an agent's message list,
// newest first.
func (m *Memory) Backward(agentID string, from, to int) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		if m.lists == nil {
			m.lists = map[string][]*Message{}
			for i := range m.t.Messages {
				msg := &m.t.Messages[i]
				m.lists[msg.AgentID] = append(m.lists[msg.AgentID], msg)
			}
		}
		list := m.lists[agentID]
		for i := min(to, len(list)) - 1; i >= max(from, 0); i-- {
			if !yield(*list[i], nil) {
				return
			}
		}
	}
}
