package trace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Step is one event of a session's log and what it means, read in one place
// for every reader of the log: the store derives its rows from it, the
// trace is built from it (Builder), and the page state (internal/view) and
// the OTLP export fold it. Each event type's data is decoded once, from the
// engine's payload or from the stored or exported JSON, into the field of
// its type; the rest stay nil.
//
// What an event introduced is written once, elsewhere: a message, a model
// call, the end of a call, the main agent's files at the end. Event is the
// event as a trace and a store keep it, referring to what it introduced;
// Stored encodes it.
type Step struct {
	Event delegation.Event

	SessionStarted  *delegation.SessionStarted
	SessionFinished *delegation.SessionFinished // its files are in Files
	AgentStarted    *delegation.AgentStarted
	AgentFinished   *delegation.AgentFinished
	// message.added: the message and its place in its agent's list.
	Index   int
	Message *Message
	// model.started: the call; model.finished: what it adds to its call.
	Call     *ModelCall
	Finished *delegation.ModelFinished
	// tool.started's arguments are its assistant message's: a stored or
	// exported tool.started holds none (Args is nil).
	ToolStarted        *delegation.ToolStarted
	ToolFinished       *delegation.ToolFinished
	DelegationStarted  *delegation.DelegationStarted
	DelegationFinished *delegation.DelegationFinished
	DelegationRefused  *delegation.DelegationRefused
	Summarization      *Summarization
	FilesChanged       *delegation.FilesChanged
	TodosChanged       *delegation.TodosChanged
	SpanReceived       *delegation.SpanReceived
	// Files is the main agent's files at the end, when a session.finished
	// carries them (the engine's does; a trace keeps them in its files).
	Files map[string]string

	// engine: the event is in the engine's form, which holds what the
	// trace keeps elsewhere (Stored leaves it out).
	engine bool
}

// Summarization is the data of a summarization event as the trace keeps
// it: the summary message named by its id (it is a message of its agent's
// list).
type Summarization struct {
	CutoffIndex      int    `json:"cutoff_index"`
	SummaryMessageID string `json:"summary_message_id"`
	FilePath         string `json:"file_path"`
	FoldedMessages   int    `json:"folded_messages"`
	TokensBefore     int    `json:"tokens_before"`
	TokensAfter      int    `json:"tokens_after"`
}

// StepOf reads one event: as the engine emits it (its payload), or as a
// trace or a store keeps it (its JSON data), but for message.added,
// model.started and model.finished in their trace form, which only name
// what they introduced: a source that reads them resolves them with
// Introduced. Live-only events (seq 0) are read too.
func StepOf(ev delegation.Event) (Step, error) {
	st := Step{Event: ev}
	err := st.decode()
	if err != nil {
		err = fmt.Errorf("event %d (%s): %w", ev.Seq, ev.Type, err)
	}
	return st, err
}

// Introduced is the step of an event in its trace form, with what it
// introduced as read from where it is written once: message.added's
// message, model.started's call, model.finished's end of a call.
func Introduced(ev delegation.Event, index int, m *Message, c *ModelCall, f *delegation.ModelFinished) Step {
	return Step{Event: ev, Index: index, Message: m, Call: c, Finished: f}
}

// decodeAs decodes an event's data as T: the engine's payload when it has
// one, else its JSON.
func decodeAs[T any](ev delegation.Event) (*T, error) {
	v, err := delegation.DataAs[T](ev)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

func (st *Step) decode() error {
	ev := st.Event
	st.engine = ev.Payload != nil
	var err error
	switch ev.Type {
	case delegation.EventSessionStarted:
		st.SessionStarted, err = decodeAs[delegation.SessionStarted](ev)
	case delegation.EventSessionFinished:
		if st.SessionFinished, err = decodeAs[delegation.SessionFinished](ev); err == nil {
			// The files are the trace's, not the event's.
			st.Files, st.SessionFinished.Files = st.SessionFinished.Files, nil
			st.engine = st.engine || st.Files != nil
		}
	case delegation.EventAgentStarted:
		st.AgentStarted, err = decodeAs[delegation.AgentStarted](ev)
	case delegation.EventAgentFinished:
		if st.AgentFinished, err = decodeAs[delegation.AgentFinished](ev); err == nil && st.AgentFinished.Code == "" {
			st.AgentFinished.Code = finishCodeOf(st.AgentFinished.Error)
		}
	case delegation.EventMessageAdded:
		d, derr := delegation.DataAs[delegation.MessageAdded](ev)
		switch {
		case derr != nil:
			err = derr
		case d.Message == nil:
			err = fmt.Errorf("message.added without its message")
		default:
			m := messageOf(d.Message)
			st.Message, st.Index = &m, d.Index
		}
	case delegation.EventModelStarted:
		d, derr := delegation.DataAs[delegation.ModelStarted](ev)
		switch {
		case derr != nil:
			err = derr
		case d.Call.ID == "":
			err = fmt.Errorf("model.started without its call")
		default:
			c := callOf(d.Call)
			st.Call = &c
		}
	case delegation.EventModelFinished:
		st.Finished, err = decodeAs[delegation.ModelFinished](ev)
	case delegation.EventToolStarted:
		if st.ToolStarted, err = decodeAs[delegation.ToolStarted](ev); err == nil {
			st.engine = st.engine || st.ToolStarted.Args != nil
		}
	case delegation.EventToolFinished:
		st.ToolFinished, err = decodeAs[delegation.ToolFinished](ev)
	case delegation.EventDelegationStarted:
		st.DelegationStarted, err = decodeAs[delegation.DelegationStarted](ev)
	case delegation.EventDelegationFinished:
		st.DelegationFinished, err = decodeAs[delegation.DelegationFinished](ev)
	case delegation.EventDelegationRefused:
		st.DelegationRefused, err = decodeAs[delegation.DelegationRefused](ev)
	case delegation.EventSummarization:
		if p, ok := ev.Payload.(delegation.Summarized); ok {
			st.Summarization = &Summarization{CutoffIndex: p.CutoffIndex, FilePath: p.FilePath, FoldedMessages: p.FoldedMessages,
				TokensBefore: p.TokensBefore, TokensAfter: p.TokensAfter}
			if p.SummaryMessage != nil {
				st.Summarization.SummaryMessageID = p.SummaryMessage.ID
			}
		} else {
			// The engine's JSON names the summary message in it; the
			// trace's by its id.
			var d struct {
				Summarization
				SummaryMessage *struct {
					ID string `json:"id"`
				} `json:"summary_message"`
			}
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				if d.SummaryMessage != nil {
					d.SummaryMessageID, st.engine = d.SummaryMessage.ID, true
				}
				st.Summarization = &d.Summarization
			}
		}
	case delegation.EventFilesChanged:
		st.FilesChanged, err = decodeAs[delegation.FilesChanged](ev)
	case delegation.EventTodosChanged:
		st.TodosChanged, err = decodeAs[delegation.TodosChanged](ev)
	case delegation.EventSpanReceived:
		st.SpanReceived, err = decodeAs[delegation.SpanReceived](ev)
	}
	return err
}

// Stored is the event as a trace and a store keep it: message.added,
// model.started and model.finished name what they introduced, tool.started
// holds no arguments (its assistant message has them), session.finished no
// files (the trace's files are), summarization names its summary message.
// The other events are kept as they are.
func (st *Step) Stored() (delegation.Event, error) {
	ev := st.Event
	ev.Payload = nil
	switch ev.Type {
	case delegation.EventMessageAdded:
		if st.Message == nil {
			return ev, fmt.Errorf("event %d: message.added without its message", ev.Seq)
		}
		ev.Data = MessageAddedData(st.Index, st.Message.ID)
	case delegation.EventModelStarted:
		if st.Call == nil {
			return ev, fmt.Errorf("event %d: model.started without its call", ev.Seq)
		}
		ev.Data = ModelCallData(st.Call.ID)
	case delegation.EventModelFinished:
		if st.Finished == nil {
			return ev, fmt.Errorf("event %d: model.finished without its call", ev.Seq)
		}
		ev.Data = ModelCallData(st.Finished.ModelCallID)
	case delegation.EventToolStarted:
		if d := st.ToolStarted; d != nil && st.engine {
			ev.Data = mustJSON(toolRef{ToolCallID: d.ToolCallID, Name: d.Name})
		}
	case delegation.EventSessionFinished:
		if d := st.SessionFinished; d != nil && st.engine {
			ev.Data = mustJSON(d)
		}
	case delegation.EventSummarization:
		if d := st.Summarization; d != nil && d.SummaryMessageID != "" && st.engine {
			ev.Data = mustJSON(d)
		}
	}
	if ev.Data == nil && st.Event.Payload != nil {
		b, err := json.Marshal(st.Event.Payload)
		if err != nil {
			return ev, fmt.Errorf("encode %s event %d: %w", ev.Type, ev.Seq, err)
		}
		ev.Data = b
	}
	return ev, nil
}

// MainFiles is what the event does to the session's files, the main
// agent's: session.started makes them (whole, in path order), a
// files.changed of the main agent changes them; nothing else does.
func (st *Step) MainFiles() (changes []delegation.FileChange, whole bool) {
	switch {
	case st.SessionStarted != nil:
		files := st.SessionStarted.Files
		for _, p := range SortedPaths(files) {
			changes = append(changes, delegation.FileChange{Path: p, Content: files[p]})
		}
		return changes, true
	case st.FilesChanged != nil && st.Event.AgentID == MainAgent:
		return st.FilesChanged.Changes, false
	}
	return nil, false
}

// MainAgent is the main agent's id: its files are the session's.
const MainAgent = "main"

func callOf(c delegation.ModelCall) ModelCall {
	return ModelCall{ID: c.ID, AgentID: c.AgentID, Index: c.Index,
		Purpose: string(c.Purpose), SystemPrompt: c.SystemPrompt, SystemTokens: c.SystemTokens,
		Context: c.Context, Tools: c.Tools, ToolTokens: c.ToolTokens, MessageTokens: c.MessageTokens,
		InheritedTokens: c.InheritedTokens, InputTokens: c.InputTokens, CachedPrefixTokens: c.CachedPrefixTokens}
}

// finishCodeOf is the code of an agent's failure in a log written before
// agent.finished carried it: read from the engine's error texts of then,
// here alone (delegation.FinishCode writes it now).
func finishCodeOf(errText string) string {
	switch {
	case strings.HasPrefix(errText, "it reached its step limit"):
		return delegation.FinishStepLimit
	case strings.HasPrefix(errText, "it was cancelled"), strings.Contains(errText, context.Canceled.Error()):
		return delegation.FinishCancelled
	}
	return ""
}
