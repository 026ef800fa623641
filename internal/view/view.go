// Package view is the page state of a session as one fold of its event log:
// the tree and its counters, the totals, the timeline's length, each
// agent's context as its next model call would receive it, each
// delegation's panes (the parent's context with its call and receipt, the
// child's, what came back and what was held back), the scrubber's steps,
// the main agent's file index, the notes, the status and the answer.
//
// Apply takes one event at a cost proportional to what it changes, never to
// the session's length, and says what it changed (Changes), so the same
// state serves a page's first render and every live patch after it. The
// state holds no message text and no file contents: it names them by their
// place (an agent's list and an index, a path), and a view reads only the
// rows it shows from the store.
package view

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Meta is what a session's log does not say of it.
type Meta struct {
	ID, Name, Title, Prompt, Tokenizer string
	// Budget is the team's summarization threshold in tokens (0: none): a
	// call far past it is worth a note.
	Budget int
}

// State is a session's page state after the events applied so far.
type State struct {
	Session Session
	// Seq is the last seq applied.
	Seq int64
	// Agents are in the order they started: the tree's order.
	Agents []*Agent
	// Delegations are the task calls that started a child, in order.
	Delegations []*Delegation
	// Calls and Tokens are the session's model calls and their input tokens.
	Calls, Tokens int
	// Cached is their cached prefixes' tokens, summed; Cost what they cost,
	// summed over the priced ones.
	Cached int
	Cost   Money
	// Running are the model calls under way, by id; RunningTools the tool
	// calls, by tool call id.
	Running      map[string]*Running
	RunningTools map[string]*ToolChange
	// Files is the main agent's file index.
	Files Files
	// Notes are the likely mistakes found so far, in the order found.
	Notes []Note
	// LastAt is the time of the last event applied: how far a running call
	// or tool call has run, as far as the log says.
	LastAt time.Time

	budget     int
	agents     map[string]*Agent
	byChild    map[string]*Delegation
	byTaskCall map[string]*Delegation
	// pending holds live-only text of calls whose model.started is not in yet.
	pending map[string]string
	// starts are when the last WaterfallSteps steps' calls began, by step
	// modulo WaterfallSteps (nil before the first).
	starts []time.Time
	notes  noteState
}

// Session is what the page's head shows.
type Session struct {
	ID, Name, Title, Prompt, Tokenizer string
	Status, Error                      string
	// StoppedBy is why an interrupted session was stopped, a
	// delegation.Stop* code ("" in logs written before it: Error says).
	StoppedBy string
	// Code is why a failed session failed, as an error code
	// (delegation.EFULL) when the studio ended it ("" otherwise, and in
	// logs written before it: Error says).
	Code string
	// Answer is the final answer, known when the session ends.
	Answer string
	// Origin says where the session came from (nil: our engine).
	Origin     *delegation.Origin
	CreatedAt  time.Time
	FinishedAt *time.Time
}

// Agent is a node of the delegation tree with its costs and its context.
type Agent struct {
	ID, Name, ParentID, Mode, TaskCallID string
	Invocation                           int
	Status, Error                        string
	// StoppedBy is why an interrupted agent was stopped (delegation.Stop*),
	// "" when its log does not say.
	StoppedBy string
	// FinishCode is why it failed, as the engine's code (delegation.Finish*).
	FinishCode   string
	Steps        int
	SystemPrompt string
	SystemTokens int
	Tools        []delegation.ToolCost
	// Endpoint is where its calls went (agent.started says; its model is
	// Economics.Model).
	Endpoint string
	// Todos is its todo list as it last wrote it (write_todos): a child's
	// stays in the child, held back from its receipt.
	Todos []delegation.Todo
	// Task is the description it was given.
	Task string
	// Calls is its model calls so far; OwnTokens their input tokens.
	// EntryTokens is its first call's input, InheritedTokens the part of
	// that inherited from its parent.
	Calls, OwnTokens             int
	EntryTokens, InheritedTokens int
	// InheritedMessages is how many messages its first call inherited.
	InheritedMessages int
	// Messages is the length of its message list.
	Messages int
	// Economics: its model and price (when known), and its calls' cached
	// prefixes, reported cache use and cost summed.
	Economics
	// Refused are its task calls that started no child.
	Refused []Refusal
	// History is its context as its next turn would receive it.
	History Context
	// Last is its latest model call, of any purpose: the scrubber's row.
	Last *CallRef
	// Depth is 0 for the main agent, 1 for its children, and so on.
	Depth int
	// StartSeq is the seq of its agent.started; EndSeq of its agent.finished
	// (0 while it runs). StartedAt is when it started.
	StartSeq, EndSeq int64
	StartedAt        time.Time
	// ToolCalls is the tool calls it made.
	ToolCalls int
	// Summaries are its summarizations, in order.
	Summaries []Summary
	// EvictedRefs are its messages whose text went to a file (§12).
	EvictedRefs []EvictedRef
	// CallSteps are the steps of its calls, as runs: its call i is the
	// step of the run that holds it (StepOfCall).
	CallSteps []StepRun
	// LastAssistantID is its latest assistant message's id.
	LastAssistantID string
	// lastAssistant is the index of its latest assistant message (-1: none):
	// the message whose task calls start the delegations that follow it.
	lastAssistant int
	// summaryAt is the index of a summary message whose summarization event
	// is still to come.
	summaryAt int
}

// Context is what a model call receives after the system prompt, as ranges
// of message lists, and the turn call it belongs to (nil before the first).
type Context struct {
	Ranges []delegation.Range
	Call   *CallRef
}

// CallRef names a model call with what its row shows.
type CallRef struct {
	ID              string
	Index           int // among its agent's calls
	Step            int // among the session's calls, from 1
	Messages        int // in its context
	InputTokens     int
	InheritedTokens int
	// CachedTokens is its cached prefix: the part of its input an earlier
	// request of the session began with too.
	CachedTokens int
}

// StepRun is a run of an agent's calls that were consecutive steps of the
// session: its calls Index … Index+Len-1 were steps Step … Step+Len-1.
type StepRun struct {
	Index, Step, Len int
}

// StepOfCall is the step (from 1) of an agent's call i (from 0); 0 when
// unknown.
func (a *Agent) StepOfCall(i int) int {
	j, _ := slices.BinarySearchFunc(a.CallSteps, i, func(r StepRun, i int) int {
		if r.Index+r.Len <= i {
			return -1
		}
		if r.Index > i {
			return 1
		}
		return 0
	})
	if j < len(a.CallSteps) {
		if r := a.CallSteps[j]; r.Index <= i && i < r.Index+r.Len {
			return r.Step + i - r.Index
		}
	}
	return 0
}

// Refusal is a task call that started no child.
type Refusal struct {
	ToolCallID, Reason, SubagentType, Message string
	// Seq is its event's; Batch and Step say which assistant message and
	// model call of the parent asked for it (as Delegation's).
	Seq         int64
	Batch, Step int
	// MessageID is the tool result that told the parent, once in.
	MessageID string
}

// Summary is one summarization of an agent's history (delegation.md §7):
// the summary message's place, how many messages it folded and the tokens
// before and after, and where the folded history was written.
type Summary struct {
	Index                     int // of the summary message in the agent's list
	Seq                       int64
	Step                      int // of the call that wrote the summary: the session's calls by then
	Folded                    int
	TokensBefore, TokensAfter int
	FilePath                  string
}

// MessageRef names a message by its place, with what a view says of it
// without reading it.
type MessageRef struct {
	AgentID string
	Index   int
	ID      string
	Tokens  int
	IsError bool
	// Empty: it has no text.
	Empty bool
	// Seq is its message.added's.
	Seq int64
}

// Delegation is a task call that started a child, and what crossed back.
type Delegation struct {
	ChildID, ParentID, TaskCallID, SubagentType, Mode, Task string
	// CallMessageID is the parent's message that holds the task call.
	CallMessageID string
	// Batch is the index, in the parent's list, of the assistant message
	// whose task call started it: delegations of one batch ran at once (a
	// fan-out), a later batch is a later round. Step is the parent's model
	// call that wrote that message (0: none known). Seq is the seq of its
	// delegation.started, FinishedSeq of its delegation.finished.
	Batch, Step      int
	Seq, FinishedSeq int64
	// Receipt is the tool result that brought the report back, once in.
	Receipt *MessageRef
	// Finished: delegation.finished is in, with what came back and what
	// was held back.
	Finished           bool
	Returned, HeldBack []string
	// FilesBack are the first paths the child's changes brought back, of
	// FilesBackCount in all.
	FilesBack      []string
	FilesBackCount int
	// LaterCalls is how many of the parent's model calls received the
	// receipt: each would have carried the child's work instead, had the
	// parent done it itself.
	LaterCalls int
	// Frozen is the parent's context as its first call that read the
	// receipt received it, with that call's answer; nil while the parent's
	// pane still follows the parent.
	Frozen *Context
	// reading is that call's id, from its model.started to its end.
	reading string
}

// Running is a model call under way.
type Running struct {
	CallRef
	AgentID, Purpose string
	StartedAt        time.Time
	// Stream is the text streamed so far (live only).
	Stream string
	// StreamUnits is Stream's length in UTF-16 code units, the browser's.
	StreamUnits int
}

// maxFilesBack caps the paths a delegation's "came back" lists.
const maxFilesBack = 50

// New starts the state of a session with no event yet.
func New(meta Meta) *State {
	return &State{Session: Session{ID: meta.ID, Name: meta.Name, Title: meta.Title, Prompt: meta.Prompt,
		Tokenizer: meta.Tokenizer, Status: delegation.StatusRunning},
		Running: map[string]*Running{}, RunningTools: map[string]*ToolChange{}, budget: meta.Budget,
		agents: map[string]*Agent{}, byChild: map[string]*Delegation{}, byTaskCall: map[string]*Delegation{},
		pending: map[string]string{}}
}

// Agent returns an agent by id, or nil.
func (s *State) Agent(id string) *Agent { return s.agents[id] }

// DelegationByTaskCall returns the delegation a task call started, or nil.
func (s *State) DelegationByTaskCall(id string) *Delegation { return s.byTaskCall[id] }

// Delegation returns the delegation that started a child, or nil.
func (s *State) Delegation(childID string) *Delegation { return s.byChild[childID] }

// Following lists the panes that show an agent's context as it grows: the
// agent's own (as a child) and the parent pane of each of its delegations
// not frozen yet.
func (s *State) Following(agentID string) []Pane {
	var out []Pane
	if a := s.agents[agentID]; a != nil && a.ParentID != "" {
		out = append(out, Pane{Kind: PaneChild, Delegation: agentID, AgentID: agentID})
	} else if a != nil {
		out = append(out, Pane{Kind: PaneAgent, Delegation: agentID, AgentID: agentID})
	}
	for _, d := range s.Delegations {
		if d.ParentID == agentID && d.Frozen == nil {
			out = append(out, Pane{Kind: PaneParent, Delegation: d.ChildID, AgentID: agentID, TaskCallID: d.TaskCallID})
		}
	}
	return out
}

// Pane kinds: a delegation's parent side and child side, and the own
// context of an agent no delegation started (the main agent).
const (
	PaneParent = "parent"
	PaneChild  = "child"
	PaneAgent  = "agent"
)

// Pane is one side of a delegation.
type Pane struct {
	Kind       string
	Delegation string // the child's id
	AgentID    string // whose context it shows
	TaskCallID string // on the parent side: the call and receipt it marks
}

// ID is the pane's name on the page.
func (p Pane) ID() string { return p.Kind + ":" + p.Delegation }

// StepStartedAt is when the model call of a step began, for the steps of
// a following timeline (the last WaterfallSteps); false for older ones,
// which the store has.
func (s *State) StepStartedAt(step int) (time.Time, bool) {
	if s.starts == nil || step < 1 || step > s.Calls || step <= s.Calls-WaterfallSteps {
		return time.Time{}, false
	}
	return s.starts[step%WaterfallSteps], true
}

// Context is what a pane shows now.
func (s *State) PaneContext(p Pane) Context {
	if p.Kind == PaneParent {
		if d := s.byChild[p.Delegation]; d != nil && d.Frozen != nil {
			return *d.Frozen
		}
	}
	if a := s.agents[p.AgentID]; a != nil {
		return a.History
	}
	return Context{}
}

// PanesOf lists a delegation's two panes.
func (s *State) PanesOf(d *Delegation) (parent, child Pane) {
	return Pane{Kind: PaneParent, Delegation: d.ChildID, AgentID: d.ParentID, TaskCallID: d.TaskCallID},
		Pane{Kind: PaneChild, Delegation: d.ChildID, AgentID: d.ChildID}
}

// Apply folds the next event of the log into the state and says what it
// changed. Events must come in seq order; message.added, model.started and
// model.finished must carry what they introduced (as the engine emits them,
// or as a source of steps reads them: ApplyStep). Live-only events (seq 0,
// streamed text) change only the running call's stream.
func (s *State) Apply(ev delegation.Event) (Changes, error) {
	var ch Changes
	err := s.ApplyTo(ev, &ch)
	return ch, err
}

// ApplyTo folds the next event in and adds what it changed to ch: for a
// batch, the same as merging each event's Changes, at less cost.
func (s *State) ApplyTo(ev delegation.Event, ch *Changes) error {
	st, err := trace.StepOf(ev)
	if err != nil {
		if ev.Seq > 0 {
			s.Seq, ch.Seq = ev.Seq, ev.Seq // a bad event is skipped, not waited on
		}
		return fmt.Errorf("view of session %s: %w", s.Session.ID, err)
	}
	return s.ApplyStep(st, ch)
}

// ApplyStep folds the next step of the log in, as the log's one reading
// (trace.StepOf) or a source of steps (a store's log, a trace's) gives it,
// and adds what it changed to ch.
func (s *State) ApplyStep(st trace.Step, ch *Changes) error {
	ev := st.Event
	err := s.apply(st, ch)
	if ev.Seq > 0 {
		// A bad event is skipped, not waited on.
		s.Seq, ch.Seq = ev.Seq, ev.Seq
		if !ch.Moved {
			ch.AtBefore, ch.Moved = s.LastAt, true
		}
		if at := ev.At.UTC(); at.After(s.LastAt) {
			s.LastAt = at
		}
	}
	if err != nil {
		return fmt.Errorf("view of session %s: event %d (%s): %w", s.Session.ID, ev.Seq, ev.Type, err)
	}
	return nil
}

func (s *State) apply(st trace.Step, ch *Changes) error {
	ev := st.Event
	if changes, whole := st.MainFiles(); whole || len(changes) > 0 {
		ch.files(s)
		for _, c := range changes {
			if c.Deleted {
				s.Files.remove(c.Path, ch)
			} else {
				s.Files.put(c.Path, ch)
			}
		}
	}
	switch {
	case st.SessionStarted != nil:
		d := st.SessionStarted
		s.Session.Name, s.Session.Prompt, s.Session.Tokenizer, s.Session.CreatedAt = d.Name, d.Prompt, d.Tokenizer, ev.At.UTC()
		s.Session.Origin = d.Origin

	case st.SessionFinished != nil:
		s.sessionFinished(ev, st.SessionFinished, ch)

	case st.AgentStarted != nil:
		s.agentStarted(ev, st.AgentStarted, ch)

	case st.AgentFinished != nil:
		return s.agentFinished(ev, st.AgentFinished, ch)

	case st.Call != nil:
		s.callStarted(ev, st.Call, ch)

	case st.Finished != nil:
		s.callFinished(ev, st.Finished, ch)

	case ev.Type == delegation.EventModelDelta:
		return s.streamed(ev, ch)

	case st.Message != nil:
		s.messageAdded(ev.AgentID, ev.Seq, st.Index, st.Message, ch)

	case st.DelegationStarted != nil:
		s.delegationStarted(ev, st.DelegationStarted, ch)

	case st.DelegationFinished != nil:
		return s.delegationFinished(ev, st.DelegationFinished, ch)

	case st.DelegationRefused != nil:
		d := st.DelegationRefused
		if a := s.agents[ev.AgentID]; a != nil {
			r := Refusal{ToolCallID: d.ToolCallID, Reason: d.Reason, SubagentType: d.SubagentType, Message: d.Message, Seq: ev.Seq}
			r.Batch, r.Step = a.batch()
			a.Refused = append(a.Refused, r)
			ch.TreeShape = true
		}

	case st.Summarization != nil:
		return s.summarized(ev, st.Summarization, ch)

	case st.FilesChanged != nil:
		s.filesChanged(ev, st.FilesChanged, ch)

	case st.TodosChanged != nil:
		if a := s.agents[ev.AgentID]; a != nil {
			a.Todos = st.TodosChanged.Todos
			if dl := s.byChild[a.ID]; dl != nil {
				ch.crossing(dl.ChildID) // what its receipt holds back
			}
		}

	case st.SpanReceived != nil:
		// A received span that maps to nothing of ours: listed as it came.
		ch.Spans = append(ch.Spans, ev)

	case st.ToolStarted != nil:
		s.toolStarted(ev, st.ToolStarted, ch)

	case st.ToolFinished != nil:
		s.toolFinished(ev, st.ToolFinished, ch)
	}
	return nil
}

// sessionFinished ends the session: its calls that never finished will not now.
func (s *State) sessionFinished(ev delegation.Event, d *delegation.SessionFinished, ch *Changes) {
	s.Session.Status, s.Session.Error, s.Session.Answer = d.Status, d.Error, d.Answer
	s.Session.StoppedBy, s.Session.Code = d.StoppedBy, d.Code
	if d.Status == delegation.StatusInterrupted {
		s.interrupted(d.Error, d.StoppedBy, ch)
	}
	at := ev.At.UTC()
	s.Session.FinishedAt = &at
	// A call that never finished will not now.
	for id, r := range s.Running {
		ch.finish(Finished{ID: id, Step: r.Step})
	}
	clear(s.Running)
	for _, t := range s.RunningTools {
		ch.Tools = append(ch.Tools, ToolChange{AgentID: t.AgentID, ToolCallID: t.ToolCallID, Name: t.Name, Seq: ev.Seq,
			At: ev.At.UTC(), Step: t.Step, CallID: t.CallID, Finished: true, Started: t.At})
	}
	clear(s.RunningTools)
	s.flushNotes("", ch)
	ch.Status = true
}

// agentStarted adds an agent to the tree.
func (s *State) agentStarted(ev delegation.Event, d *delegation.AgentStarted, ch *Changes) {
	a := &Agent{ID: d.Agent.ID, Name: d.Agent.Name, ParentID: d.Agent.ParentID, Mode: string(d.Agent.Mode),
		TaskCallID: d.Agent.TaskCallID, Invocation: d.Agent.Invocation, Status: delegation.StatusRunning,
		SystemPrompt: d.SystemPrompt, SystemTokens: d.SystemTokens, Tools: d.Tools, Endpoint: d.Endpoint, summaryAt: -1, lastAssistant: -1,
		StartedAt: ev.At.UTC(), Economics: Economics{Model: d.Model, Price: d.Price}}
	if p := s.agents[a.ParentID]; p != nil {
		a.Depth = p.Depth + 1
		if a.Mode == string(delegation.ModeFork) {
			a.Todos = slices.Clone(p.Todos) // a fork inherits its parent's todos
		}
	}
	if dl := s.byTaskCall[a.TaskCallID]; dl != nil && dl.ParentID == a.ParentID {
		a.Task = dl.Task
	}
	a.StartSeq = ev.Seq
	s.agents[a.ID] = a
	s.Agents = append(s.Agents, a)
	ch.TreeShape, ch.Totals, ch.Scrub = true, true, true
	ch.Agents = append(ch.Agents, a.ID)
	ch.replaced(a.ID)
	s.noteAgentStarted(a, ch)
}

// callFinished ends a model call: its cost, and the parent panes that stop at the call that read a receipt.
func (s *State) callFinished(ev delegation.Event, d *delegation.ModelFinished, ch *Changes) {
	if r := s.Running[d.ModelCallID]; r != nil {
		ch.finish(Finished{ID: d.ModelCallID, Step: r.Step})
		if a := s.agents[r.AgentID]; a != nil {
			a.finished(r.CachedTokens, *d)
			if d.Cost != nil { // the node's tooltip says what it cost
				ch.node(s, a.ID, false)
				s.economicsChanged(a, ch)
			}
		}
	}
	if d.Cost != nil {
		s.Cost = s.Cost.add(*d.Cost)
		ch.Totals = true
	}
	delete(s.Running, d.ModelCallID)
	for _, dl := range s.Delegations {
		if dl.reading == d.ModelCallID {
			// The first call that read the receipt has its answer: the
			// parent's pane shows that call and stops there.
			if p := s.agents[dl.ParentID]; p != nil {
				fr := p.History.clone()
				dl.Frozen, dl.reading = &fr, ""
				ch.frozen(dl.ChildID)
			}
		}
	}
}

// delegationStarted opens a delegation's panel.
func (s *State) delegationStarted(ev delegation.Event, d *delegation.DelegationStarted, ch *Changes) {
	dl := &Delegation{ChildID: d.ChildID, ParentID: ev.AgentID, TaskCallID: d.ToolCallID, SubagentType: d.SubagentType,
		Mode: string(d.Mode), Task: d.Description, Seq: ev.Seq, Batch: -1}
	if p := s.agents[ev.AgentID]; p != nil {
		dl.Batch, dl.Step = p.batch()
		dl.CallMessageID = p.LastAssistantID
	}
	s.Delegations = append(s.Delegations, dl)
	s.byChild[dl.ChildID] = dl
	s.byTaskCall[dl.TaskCallID] = dl
	if a := s.agents[dl.ChildID]; a != nil {
		a.Task = dl.Task
	}
	ch.Started = append(ch.Started, dl.ChildID)
	s.noteDelegationStarted(dl, ch)
}

// summarized folds an agent's history into its summary.
func (s *State) summarized(ev delegation.Event, d *trace.Summarization, ch *Changes) error {
	a := s.agents[ev.AgentID]
	if a == nil {
		return fmt.Errorf("summarization of unknown agent %q", ev.AgentID)
	}
	a.Summaries = append(a.Summaries, Summary{Index: a.summaryAt, Seq: ev.Seq, Step: s.Calls, Folded: d.FoldedMessages,
		TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter, FilePath: d.FilePath})
	// The history is now the summary, then what was kept of it: the
	// engine's rule (delegation.md §7), read off the event.
	if a.summaryAt >= 0 {
		kept := delegation.AfterMessages(a.History.Ranges, d.FoldedMessages)
		a.History.Ranges = append([]delegation.Range{{AgentID: a.ID, From: a.summaryAt, To: a.summaryAt + 1}}, kept...)
		a.summaryAt = -1
		ch.replaced(a.ID)
	}
	return nil
}

// filesChanged notes files written, and what came back with a receipt.
func (s *State) filesChanged(ev delegation.Event, d *delegation.FilesChanged, ch *Changes) {
	if a := s.agents[ev.AgentID]; a != nil {
		s.noteFilesChanged(a, d.From, d.Changes, ch)
	}
	if d.From != "" {
		if dl := s.byChild[d.From]; dl != nil {
			for _, c := range d.Changes {
				if len(dl.FilesBack) < maxFilesBack {
					p := c.Path
					if c.Deleted {
						p += " (deleted)"
					}
					dl.FilesBack = append(dl.FilesBack, p)
				}
				dl.FilesBackCount++
			}
			ch.crossing(dl.ChildID)
		}
	}
}

// toolStarted starts a tool call's bar.
func (s *State) toolStarted(ev delegation.Event, d *delegation.ToolStarted, ch *Changes) {
	a := s.agents[ev.AgentID]
	if a == nil {
		return
	}
	a.ToolCalls++
	tc := ToolChange{AgentID: a.ID, ToolCallID: d.ToolCallID, Name: d.Name, Seq: ev.Seq, At: ev.At.UTC()}
	if a.Last != nil {
		tc.Step, tc.CallID = a.Last.Step, a.Last.ID
	}
	ch.Tools = append(ch.Tools, tc)
	tcc := tc
	s.RunningTools[d.ToolCallID] = &tcc
	ch.worked(a.ID)
}

// toolFinished ends a tool call's bar.
func (s *State) toolFinished(ev delegation.Event, d *delegation.ToolFinished, ch *Changes) {
	if a := s.agents[ev.AgentID]; a != nil {
		tc := ToolChange{AgentID: a.ID, ToolCallID: d.ToolCallID, Name: d.Name, Seq: ev.Seq, At: ev.At.UTC(), Finished: true,
			IsError: d.IsError}
		if r := s.RunningTools[d.ToolCallID]; r != nil {
			tc.Step, tc.CallID, tc.Started = r.Step, r.CallID, r.At
		}
		delete(s.RunningTools, d.ToolCallID)
		ch.Tools = append(ch.Tools, tc)
	}
}

// agentFinished ends an agent: its box, and what came back to its parent.
func (s *State) agentFinished(ev delegation.Event, d *delegation.AgentFinished, ch *Changes) error {
	a := s.agents[ev.AgentID]
	if a == nil {
		return fmt.Errorf("agent.finished for unknown agent %q", ev.AgentID)
	}
	a.Status, a.Error, a.Steps, a.EndSeq = d.Status, d.Error, d.Steps, ev.Seq
	a.StoppedBy, a.FinishCode = d.StoppedBy, d.Code
	ch.node(s, a.ID, false)
	if dl := s.byChild[a.ID]; dl != nil {
		ch.crossing(dl.ChildID)
	}
	s.noteAgentFinished(a, ch)
	return nil
}

// streamed adds text streamed into a running call (or one not yet started).
func (s *State) streamed(ev delegation.Event, ch *Changes) error {
	d, err := delegation.DataAs[delegation.ModelDelta](ev)
	if err != nil {
		return err
	}
	if r := s.Running[d.ModelCallID]; r != nil {
		ch.Stream = append(ch.Stream, StreamChange{CallID: d.ModelCallID, Text: d.Text, At: r.StreamUnits})
		r.Stream += d.Text
		r.StreamUnits += units(d.Text)
	} else {
		s.pending[d.ModelCallID] += d.Text
	}
	return nil
}

// delegationFinished closes a delegation: what came back, what was held back.
func (s *State) delegationFinished(ev delegation.Event, d *delegation.DelegationFinished, ch *Changes) error {
	dl := s.byChild[d.ChildID]
	if dl == nil {
		return fmt.Errorf("delegation.finished for unknown child %q", d.ChildID)
	}
	dl.Finished, dl.Returned, dl.HeldBack, dl.FinishedSeq = true, d.Returned, d.HeldBack, ev.Seq
	ch.crossing(dl.ChildID)
	s.noteDelegationFinished(dl, ch)
	ch.HeldBack = union(ch.HeldBack, dl.ChildID)
	return nil
}

// interrupted shows as interrupted, like their session, the agents a stop
// ended: those still running, and those whose failure was the stop itself
// (their agent.finished says stopped_by), not a failure of their own before
// it. Logs written before stopped_by are read by the engine's cancellation
// (FinishCode) or by recovery's reason, the session's.
func (s *State) interrupted(reason, stoppedBy string, ch *Changes) {
	for _, a := range s.Agents {
		stopped := a.Status == delegation.StatusRunning || (a.Status == delegation.StatusFailed && (a.StoppedBy != "" ||
			stoppedBy == "" && (a.Error == reason || a.FinishCode == delegation.FinishCancelled)))
		if stopped {
			a.Status = delegation.StatusInterrupted
			if a.StoppedBy == "" {
				a.StoppedBy = stoppedBy
			}
			ch.node(s, a.ID, false)
		}
	}
}

// batch names the assistant message and the model call of an agent whose
// task calls are being started now.
func (a *Agent) batch() (msg, step int) {
	if a.Last != nil {
		step = a.Last.Step
	}
	return a.lastAssistant, step
}

func (s *State) callStarted(ev delegation.Event, c *trace.ModelCall, ch *Changes) {
	a := s.agents[c.AgentID]
	if a == nil {
		return
	}
	if len(ch.Appended) == 0 {
		ch.CallsBefore = s.Calls
	}
	s.Calls++
	s.Tokens += c.InputTokens
	s.Cached += c.CachedPrefixTokens
	if s.starts == nil {
		s.starts = make([]time.Time, WaterfallSteps)
	}
	s.starts[s.Calls%WaterfallSteps] = ev.At
	if a.Calls == 0 {
		a.EntryTokens, a.InheritedTokens = c.InputTokens, c.InheritedTokens
		a.EntryCached = c.CachedPrefixTokens
		for _, r := range c.Context {
			if r.AgentID != a.ID {
				a.InheritedMessages += r.Len()
			}
		}
	}
	if n := len(a.CallSteps); n > 0 && a.CallSteps[n-1].Index+a.CallSteps[n-1].Len == a.Calls && a.CallSteps[n-1].Step+a.CallSteps[n-1].Len == s.Calls {
		a.CallSteps[n-1].Len++
	} else {
		a.CallSteps = append(a.CallSteps, StepRun{Index: a.Calls, Step: s.Calls, Len: 1})
	}
	a.Calls++
	if CountersGrew(a.Calls-1, a.Calls) {
		ch.TreeShape = true // its box widens
	}
	a.OwnTokens += c.InputTokens
	a.CachedTokens += c.CachedPrefixTokens
	n := 0
	for _, r := range c.Context {
		n += r.Len()
	}
	ref := &CallRef{ID: c.ID, Index: c.Index, Step: s.Calls, Messages: n, InputTokens: c.InputTokens, InheritedTokens: c.InheritedTokens,
		CachedTokens: c.CachedPrefixTokens}
	a.Last = ref
	r := &Running{CallRef: *ref, AgentID: c.AgentID, Purpose: c.Purpose, StartedAt: ev.At.UTC()}
	if text, ok := s.pending[c.ID]; ok {
		r.Stream, r.StreamUnits = text, units(text)
		delete(s.pending, c.ID)
	}
	s.Running[c.ID] = r
	ch.Totals, ch.Scrub = true, true
	ch.worked(a.ID)
	ch.Appended = append(ch.Appended, c.ID)
	ch.AppendedBy = append(ch.AppendedBy, a.ID)
	ch.node(s, a.ID, true)
	s.economicsChanged(a, ch)
	for _, dl := range s.Delegations {
		if dl.ParentID == a.ID && dl.Receipt != nil && covers(c.Context, a.ID, dl.Receipt.Index) {
			dl.LaterCalls++
			ch.crossing(dl.ChildID)
		}
	}
	if c.Purpose == string(delegation.PurposeSummary) {
		return
	}
	s.evictionsRead(a, c.Context)
	// A turn: the agent's context is this call's. It is what the panes show
	// already unless something other than new messages changed it.
	if !slices.Equal(a.History.Ranges, c.Context) {
		a.History.Ranges = slices.Clone(c.Context)
		ch.replaced(a.ID)
	}
	a.History.Call = ref
	ch.call(a.ID)
	for _, dl := range s.Delegations {
		if dl.ParentID == a.ID && dl.Frozen == nil && dl.reading == "" && dl.Receipt != nil && covers(c.Context, a.ID, dl.Receipt.Index) {
			dl.reading = c.ID
		}
	}
	if s.budget > 0 && c.InputTokens > 2*s.budget {
		s.noteBudgetCall(c, ch)
	}
}

func (s *State) messageAdded(agentID string, seq int64, idx int, m *trace.Message, ch *Changes) {
	a := s.agents[agentID]
	if a == nil {
		return
	}
	a.Messages = max(a.Messages, idx+1)
	if a.ParentID != "" && idx > 0 && m.Kind != string(delegation.KindSummary) {
		a.WorkTokens += m.Tokens
	}
	ch.worked(a.ID)
	if e := m.Evicted; e != nil {
		a.Evicted.Messages++
		a.Evicted.Tokens += e.Tokens
		a.Evicted.PointerTokens += m.Tokens
		a.EvictedRefs = append(a.EvictedRefs, EvictedRef{Index: idx, Tokens: e.Tokens, Saved: max(e.Tokens-m.Tokens, 0)})
	}
	if m.Role == string(delegation.RoleAssistant) {
		a.lastAssistant, a.LastAssistantID = idx, m.ID
	}
	if m.Kind == string(delegation.KindRefusal) && m.ToolCallID != nil {
		for i := range a.Refused {
			if a.Refused[i].ToolCallID == *m.ToolCallID && a.Refused[i].MessageID == "" {
				a.Refused[i].MessageID = m.ID
				ch.TreeShape = true
			}
		}
	}
	if m.Kind == string(delegation.KindSummary) {
		// It heads the history once the summarization event says what was kept.
		a.summaryAt = idx
	} else {
		before := ownLen(a.History.Ranges, a.ID)
		if n := len(a.History.Ranges); n > 0 && a.History.Ranges[n-1].AgentID == a.ID && a.History.Ranges[n-1].To == idx {
			a.History.Ranges[n-1].To++
		} else {
			a.History.Ranges = append(a.History.Ranges, delegation.Range{AgentID: a.ID, From: idx, To: idx + 1})
		}
		ch.appended(a.ID, before)
	}
	if m.Kind == string(delegation.KindReceipt) && m.Role == string(delegation.RoleTool) && m.ToolCallID != nil {
		if dl := s.byTaskCall[*m.ToolCallID]; dl != nil && dl.ParentID == agentID {
			dl.Receipt = &MessageRef{AgentID: agentID, Index: idx, ID: m.ID, Tokens: m.Tokens, IsError: m.IsError,
				Empty: m.Content == "", Seq: seq}
			ch.crossing(dl.ChildID)
			s.noteReceipt(dl, m, ch)
		}
	}
	if m.Role == string(delegation.RoleAssistant) {
		s.noteAssistant(a, m, ch)
	}
}

func covers(rs []delegation.Range, agentID string, idx int) bool {
	for _, r := range rs {
		if r.AgentID == agentID && r.From <= idx && idx < r.To {
			return true
		}
	}
	return false
}

// ownLen is the number of an agent's own messages in a context.
func ownLen(rs []delegation.Range, agentID string) int {
	n := 0
	for _, r := range rs {
		if r.AgentID == agentID {
			n += r.Len()
		}
	}
	return n
}

func (c Context) clone() Context {
	out := Context{Ranges: slices.Clone(c.Ranges)}
	if c.Call != nil {
		cc := *c.Call
		out.Call = &cc
	}
	return out
}

// Split divides a context into the messages inherited from other agents'
// lists and the agent's own, keeping their order.
func (c Context) Split(agentID string) (inherited, own []delegation.Range) {
	for _, r := range c.Ranges {
		if r.AgentID == agentID {
			own = append(own, r)
		} else {
			inherited = append(inherited, r)
		}
	}
	return inherited, own
}

// units is a text's length in UTF-16 code units.
func units(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// Excerpt is s on one line, white space folded, cut to at most n runes with
// an ellipsis: how a view quotes a message in a line.
func Excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
