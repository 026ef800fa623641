// Package ingest turns what other people's agents did into a session's
// event log: the same events our engine emits (formats.md §3), recorded
// through the same path, so that every page, compare and export works on
// them unchanged.
//
// The package has two layers. Session (this file and infer.go) is the
// delegation inference: it is fed observed model calls and tool results, in
// the order they happened, and infers from their content which agent each
// call belongs to, which task call started which child, in which mode (fork
// when the child's first input begins with its parent's history, isolated
// otherwise), what the child inherited, and which tool message was its
// receipt; it stores each message once and gives every call its context as
// ranges of message lists. It knows nothing of any wire format: the OTLP
// receiver feeds it (spans.go), and so can a recording endpoint that sees
// only requests and answers.
//
// Spans (spans.go, openinference.go, genai.go) reads OTLP traces written with
// the OpenInference or the OpenTelemetry GenAI conventions, as they arrive,
// into a Session. docs/ingest.md is the mapping, rule by rule.
//
// Nothing here does I/O: events go to a delegation.Sink.
package ingest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Config is what a Session needs.
type Config struct {
	SessionID string
	Name      string
	Tokenizer string             // the Counter's name, recorded in session.started
	Counter   delegation.Counter // counts our tokens beside what a program reported
	Sink      delegation.Sink
	// TaskTool is the name of the tool that delegates ("task" when empty).
	TaskTool string
	Origin   *delegation.Origin
	// Prices finds the price of a call's model, to price what it cost; nil
	// prices nothing.
	Prices delegation.PriceTable
	// Modes are the modes of the team's subagents, by name, when the
	// producer knows the team (the recording endpoint's scripted upstream
	// plays a scenario). Two waiting task calls whose descriptions both fit
	// a child's first request are then told apart by the mode the request
	// shows; without it, the first in call order is taken.
	Modes map[string]delegation.Mode
}

// Message is a message as a model received or wrote it. Ids may be missing:
// many instrumentations drop tool-call ids, and then results are matched to
// calls by order.
type Message struct {
	Role       delegation.Role
	Content    string
	ToolCalls  []delegation.ToolCall
	ToolCallID string
	IsError    bool
	// Reasoning is a reasoning model's thinking, kept beside an answer;
	// it is never compared, being never sent back.
	Reasoning string
}

// Hint is what a transport knows of the agent behind a call, besides its
// content. Every field may be empty.
type Hint struct {
	// Key names one run of one agent (an agent span's id, say): calls with
	// the same key belong to the same agent.
	Key string
	// Name is the agent's name as the program gave it (lc_agent_name,
	// gen_ai.agent.name): a subagent type, or "main".
	Name string
}

// CallInput is what a model call received: everything the inference needs.
type CallInput struct {
	Hint   Hint
	System string
	Tools  []delegation.ToolDef
	Input  []Message // after the system prompt, in order
	Model  string
	// Endpoint is the base URL the call went to, when the span says it.
	Endpoint string
	At       time.Time
	// Counted, when set, is what the studio that exported the call counted
	// (its delegation.* attributes): taken as it is, since the export does
	// not carry the tools' definitions to count again.
	Counted *Counted
}

// Counted is a model call's counts as the studio's own export gives them.
type Counted struct {
	AgentID                                                  string // the agent's id in the session exported
	Tools                                                    []delegation.ToolCost
	SystemTokens, ToolTokens, MessageTokens, InheritedTokens int
	CachedPrefixTokens, InputTokens                          int
	// Price is what the agent's calls were costed at; nil: they were not.
	Price *delegation.Price
	// Purpose is the call's (a turn, or a summary of its agent's history);
	// OutputTokens what its answer counted.
	Purpose      delegation.Purpose
	OutputTokens int
	// Summarized is what a summary call did to its agent's history.
	Summarized *Summarized
}

// Summarized is a summarization as the studio's own export gives it on its
// summary call (delegation.summarization): the summary message is the
// call's answer.
type Summarized struct {
	CutoffIndex    int    `json:"cutoff_index"`
	FilePath       string `json:"file_path"`
	FoldedMessages int    `json:"folded_messages"`
	TokensBefore   int    `json:"tokens_before"`
	TokensAfter    int    `json:"tokens_after"`
}

// summarizes says whether a call is the studio's own export's summary call.
func (in CallInput) summarizes() bool {
	return in.Counted != nil && in.Counted.Purpose == delegation.PurposeSummary && in.Counted.Summarized != nil
}

// CallOutput is how a model call ended.
type CallOutput struct {
	Output *Message // the answer; nil when the call failed
	Usage  *delegation.Usage
	// Response is what the endpoint said of its answer (its id, model,
	// finish reason), when it said any of it.
	Response *delegation.ResponseMeta
	Error    string
	At       time.Time
	// Files is what the call changed in its agent's files (a summary call
	// of the studio's own export writes the history down).
	Files []delegation.FileChange
}

// ToolResult is an observed tool execution: what a tool span says.
type ToolResult struct {
	Hint   Hint
	CallID string // "" when the span does not say
	Name   string
	Args   json.RawMessage // as the span gives them; compared with the call's
	// Result is the tool message the caller received; HasResult is false
	// when the span does not say (then the caller's next call will).
	Result    string
	HasResult bool
	IsError   bool
	Error     string
	Files     []delegation.FileChange // what the tool changed in its agent's files
	// ChildKey is, for a delegation, the key of the child's agent span.
	ChildKey   string
	Start, End time.Time
}

// AgentRef describes an agent a call was placed on.
type AgentRef struct {
	ID, Name   string
	ParentID   string
	Mode       delegation.Mode
	TaskCallID string
	Invocation int
	New        bool // the call started it
	Unattached bool // no delegation explains it: shown under main, flagged
}

// Session builds one session's log from observations. Its methods are safe
// for concurrent use; events reach the Sink one at a time, in seq order.
type Session struct {
	cfg Config

	mu           sync.Mutex
	seq          int64
	started      bool
	initialFiles map[string]string // what session.started says (BeginWith)
	finished     bool
	stoppedBy    string   // why it is stopped from outside (StopBy)
	agents       []*agent // in the order they started
	byID         map[string]*agent
	byKey        map[string]*agent
	main         *agent
	children     int
	invocations  map[string]int
	lastAt       time.Time
	prompt       string
	// prefixes holds every call's request, for each call's cached prefix.
	prefixes delegation.PrefixIndex
}

// agent is one inferred agent: its message list (append-only, each message
// stored once) and the history its next call is expected to begin with.
type agent struct {
	// exported is what the studio's own export says of the agent's end
	// (its receipt, what its delegation held back), taken as it is.
	exported *Exported
	info     delegation.AgentInfo
	parent   *agent
	keys     []string
	msgs     []*delegation.Message
	prefix   []int // prefix[i] is the tokens of msgs[:i]
	history  []delegation.Range
	// calls counts its model calls, summaries those that summarized its
	// history (no step of its); open is the call in progress, if any.
	calls, summaries int
	open             *Turn
	// pending are the tool calls of its last answer, in call order.
	pending []*toolCall
	// last is the context of its newest call: what a fork started from it
	// inherits (the history without the answer that holds the task call).
	last       []delegation.Range
	system     string
	tools      []delegation.ToolCost
	toolTokens int
	files      map[string]string
	finished   bool
	unattached bool
	// msgKeys are msgs' cache keys; mark where its newest request ended
	// among the session's (delegation/prefix.go); price what its model's
	// tokens cost, when known.
	msgKeys []delegation.PrefixKey
	mark    *delegation.PrefixMark
	price   *delegation.Price
	// asked: its last answer asked for tools; failed: its last call's
	// error, "" when it answered (Activity).
	asked  bool
	failed string
}

// toolCall is one tool call of an agent's answer, until its result is in.
type toolCall struct {
	owner   *agent
	call    delegation.ToolCall
	task    *taskArgs // set for the delegation tool
	inherit []delegation.Range
	child   *agent
	// invocation is the child's number among the starts of its subagent
	// type, given in call order when the call is seen (formats.md §1), so
	// parallel children are numbered as the engine numbers them whatever
	// order their requests arrive in; -1 when none was given.
	invocation int
	started    bool // tool.started emitted
	finished   bool // tool.finished emitted
	result     *delegation.Message
	added      bool // the result is in the owner's list
	refused    bool
	files      []delegation.FileChange
}

// taskArgs are a delegation's arguments: its task in description (the
// task tool's) or task (a hand-built subagent tool's, as the third article
// writes it), and the subagent type; a delegation naming none is the
// general-purpose subagent's, as in deepagents.
type taskArgs struct {
	Description  string `json:"description"`
	Task         string `json:"task"`
	SubagentType string `json:"subagent_type"`
	typed        bool   // the call named its subagent type
}

func readTaskArgs(raw json.RawMessage) *taskArgs {
	var args taskArgs
	_ = json.Unmarshal(raw, &args)
	if strings.TrimSpace(args.Description) == "" {
		args.Description = args.Task
	}
	args.typed = args.SubagentType != ""
	if !args.typed {
		args.SubagentType = delegation.GeneralPurposeName
	}
	return &args
}

// New starts a session; nothing is emitted until the first observation.
func New(cfg Config) *Session {
	if cfg.TaskTool == "" {
		cfg.TaskTool = delegation.TaskToolName
	}
	if cfg.Sink == nil {
		cfg.Sink = delegation.SinkFunc(func(delegation.Event) {})
	}
	return &Session{cfg: cfg, byID: map[string]*agent{}, byKey: map[string]*agent{}, invocations: map[string]int{}}
}

// Finished reports whether the session has ended.
func (s *Session) Finished() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finished
}

// LastSeq is the seq of the last event emitted.
func (s *Session) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

func (s *Session) emit(agentID string, typ delegation.EventType, at time.Time, data any) {
	s.seq++
	if at.IsZero() {
		at = s.lastAt
	}
	if at.After(s.lastAt) {
		s.lastAt = at
	}
	s.cfg.Sink.Emit(delegation.Event{Seq: s.seq, Type: typ, AgentID: agentID, At: at, Payload: data})
}

// BeginWith sets the files the session begins with (the studio's own
// export says them on its root span); it counts only before the session
// has started.
func (s *Session) BeginWith(files map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		s.initialFiles = files
	}
}

// start emits session.started once, before any other event.
func (s *Session) start(at time.Time, prompt string) {
	if s.started {
		return
	}
	s.started = true
	s.prompt = prompt
	files := map[string]string{}
	for k, v := range s.initialFiles {
		files[k] = v
	}
	s.emit("", delegation.EventSessionStarted, at, delegation.SessionStarted{SessionID: s.cfg.SessionID, Name: s.cfg.Name,
		Prompt: prompt, Tokenizer: s.cfg.Tokenizer, Files: files, Origin: s.cfg.Origin})
}

func (s *Session) count(text string) int {
	if text == "" || s.cfg.Counter == nil {
		return 0
	}
	return s.cfg.Counter.Count(text)
}

// toolCosts counts tool definitions as the engine does.
func (s *Session) toolCosts(defs []delegation.ToolDef) ([]delegation.ToolCost, int) {
	out := make([]delegation.ToolCost, 0, len(defs))
	total := 0
	for _, d := range defs {
		c := delegation.ToolTokens(s.cfg.Counter, d)
		out = append(out, delegation.ToolCost{Name: d.Name, Tokens: c})
		total += c
	}
	return out, total
}

// newAgent creates an agent and announces it.
func (s *Session) newAgent(info delegation.AgentInfo, parent *agent, in CallInput) *agent {
	a := &agent{info: info, parent: parent, prefix: []int{0}, system: in.System, files: map[string]string{}}
	from := s.initialFiles
	if parent != nil {
		from = parent.files
	}
	for k, v := range from {
		a.files[k] = v
	}
	a.tools, a.toolTokens = s.toolCosts(in.Tools)
	if in.Counted != nil && len(in.Tools) == 0 {
		a.tools, a.toolTokens = in.Counted.Tools, in.Counted.ToolTokens
	}
	switch {
	case in.Counted != nil:
		a.price = in.Counted.Price // as the studio that exported it priced it, or not
	case s.cfg.Prices != nil && in.Model != "":
		if p, ok := s.cfg.Prices(in.Model); ok {
			a.price = &p
		}
	}
	s.agents = append(s.agents, a)
	s.byID[info.ID] = a
	if info.ID == "main" {
		s.main = a
	}
	s.emit(info.ID, delegation.EventAgentStarted, in.At, delegation.AgentStarted{Agent: info, SystemPrompt: a.system,
		SystemTokens: s.count(a.system), Tools: a.tools, Model: in.Model, Endpoint: in.Endpoint, Price: a.price})
	return a
}

func (s *Session) remember(a *agent, key string) {
	if key == "" {
		return
	}
	if _, ok := s.byKey[key]; !ok {
		s.byKey[key] = a
		a.keys = append(a.keys, key)
	}
}

// appendMessage adds m to a's list (and to the end of its history).
func (s *Session) appendMessage(a *agent, m *delegation.Message, at time.Time) *delegation.Message {
	idx := len(a.msgs)
	m.ID = a.info.ID + "." + strconv.Itoa(idx)
	m.AgentID = a.info.ID
	m.Tokens = delegation.MessageTokens(s.cfg.Counter, m) // the engine's rule
	a.msgs = append(a.msgs, m)
	a.msgKeys = append(a.msgKeys, delegation.MessageKey(m))
	a.prefix = append(a.prefix, a.prefix[idx]+m.Tokens)
	if n := len(a.history); n > 0 && a.history[n-1].AgentID == a.info.ID && a.history[n-1].To == idx {
		a.history[n-1].To++
	} else {
		a.history = append(a.history, delegation.Range{AgentID: a.info.ID, From: idx, To: idx + 1})
	}
	s.emit(a.info.ID, delegation.EventMessageAdded, at, delegation.MessageAdded{Index: idx, Message: m})
	return m
}

func (s *Session) tokensOf(a *agent, rs []delegation.Range) (total, inherited int) {
	for _, r := range rs {
		owner := s.byID[r.AgentID]
		if owner == nil {
			continue
		}
		n := owner.prefix[r.To] - owner.prefix[r.From]
		total += n
		if owner != a {
			inherited += n
		}
	}
	return total, inherited
}

// Turn is a model call in progress: placed on its agent, its context
// recorded, waiting for its answer.
type Turn struct {
	s     *Session
	a     *agent
	call  delegation.ModelCall
	start time.Time
	done  bool
	// summarized is set on a summary call of the studio's own export, with
	// the tokens of its answer.
	summarized   *Summarized
	outputTokens int
}

// Agent is the agent the call was placed on.
func (t *Turn) Agent() AgentRef {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return refOf(t.a)
}

// CallID is the model call's id.
func (t *Turn) CallID() string { return t.call.ID }

// InputTokens is what the call received, counted as the engine counts it:
// the system prompt, the tool definitions and the messages.
func (t *Turn) InputTokens() int { return t.call.InputTokens }

// Delta shows text of the answer as it arrives (model.delta: live only,
// never stored), so a streamed answer can be watched while it is written.
func (t *Turn) Delta(text string) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.done || s.finished || text == "" {
		return
	}
	s.cfg.Sink.Emit(delegation.Event{Type: delegation.EventModelDelta, AgentID: t.a.info.ID, At: s.lastAt,
		Payload: delegation.ModelDelta{ModelCallID: t.call.ID, Text: text}})
}

// Activity is what a session is doing, for a producer that must decide
// when it has ended (the recording endpoint sees no end of a run: only
// requests that stop coming).
type Activity struct {
	// Open counts the model calls waiting for their answer.
	Open int
	// MainAnswered: the main agent's last call answered without asking
	// for a tool, and every child has finished — a run that looks done.
	MainAnswered bool
	// MainFailed is the error of the main agent's last call, when it failed.
	MainFailed string
	// Last is the time of the newest observation.
	Last time.Time
}

// Activity says what the session is doing now.
func (s *Session) Activity() Activity {
	s.mu.Lock()
	defer s.mu.Unlock()
	act := Activity{Last: s.lastAt}
	childrenDone := true
	for _, a := range s.agents {
		if a.open != nil {
			act.Open++
		}
		if a != s.main && !a.finished && !a.unattached {
			childrenDone = false
		}
	}
	if m := s.main; m != nil && m.open == nil && m.calls > 0 {
		act.MainFailed = m.failed
		act.MainAnswered = m.failed == "" && !m.asked && childrenDone
	}
	return act
}

func refOf(a *agent) AgentRef {
	return AgentRef{ID: a.info.ID, Name: a.info.Name, ParentID: a.info.ParentID, Mode: a.info.Mode,
		TaskCallID: a.info.TaskCallID, Invocation: a.info.Invocation, Unattached: a.unattached}
}

// StartCall places a model call on its agent (see Place), records what it
// received, and emits model.started: a call whose answer has not come yet
// shows as running. Finish it with Turn.Finish.
func (s *Session) StartCall(in CallInput) *Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.place(in)
	return s.startCall(in, p)
}

// Call records a whole model call at once: StartCall, then Finish.
func (s *Session) Call(in CallInput, out CallOutput) AgentRef {
	t := s.StartCall(in)
	t.Finish(out)
	return t.Agent()
}

func (s *Session) startCall(in CallInput, p Placement) *Turn {
	input := normalize(in.Input)
	if !s.started {
		prompt := ""
		if p.Main || s.main == nil {
			for _, m := range input {
				if m.Role == delegation.RoleUser {
					prompt = m.Content
					break
				}
			}
		}
		s.start(in.At, prompt)
	}
	a, inherited, newAgent := s.agentFor(in, p)
	s.remember(a, in.Hint.Key)
	if in.System != "" && a.system == "" && a.calls == 0 {
		a.system = in.System
	}

	// What the call received: the part of its history it begins with, then
	// the messages new to it, added to its own list once.
	n := s.prefix(input, a.history)
	ctx := delegation.FirstMessages(a.history, n)
	fresh := input[n:]
	summary := in.summarizes()
	switch {
	case summary:
		// It read the head of the history, which it folds when it ends.
	case len(fresh) > 0:
		s.settle(a)
		a.history = ctx
		for i := range fresh {
			m := fresh[i]
			msg := &delegation.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, IsError: m.IsError}
			msg.Kind = s.kindOf(a, msg, newAgent && i == len(fresh)-1 && a.parent != nil, inherited)
			if msg.Role == delegation.RoleTool {
				if tc := s.answering(a, msg); tc != nil {
					s.resultIn(a, tc, msg, in.At, false)
					continue
				}
			}
			s.appendMessage(a, msg, in.At)
		}
		ctx = a.history
	case n < delegation.RangesLen(a.history):
		a.history = ctx
	}
	if !summary {
		a.pending = keepUnanswered(a.pending)
		a.last = append([]delegation.Range(nil), ctx...)
	}

	idx := a.calls
	a.calls++
	if summary {
		a.summaries++
	}
	msgTokens, inh := s.tokensOf(a, ctx)
	systemTokens := s.count(in.System)
	toolCosts, toolTokens := a.tools, a.toolTokens
	if len(in.Tools) > 0 && a.calls > 1 {
		toolCosts, toolTokens = s.toolCosts(in.Tools)
	}
	call := delegation.ModelCall{ID: a.info.ID + ".c" + strconv.Itoa(idx), AgentID: a.info.ID, Index: idx,
		Purpose: delegation.PurposeTurn, SystemPrompt: in.System, SystemTokens: systemTokens,
		Context: append([]delegation.Range(nil), ctx...), Tools: toolCosts, ToolTokens: toolTokens,
		MessageTokens: msgTokens, InheritedTokens: inh, InputTokens: systemTokens + toolTokens + msgTokens}
	call.CachedPrefixTokens = s.cachedPrefix(a, in, call)
	if c := in.Counted; c != nil {
		call.Tools, call.ToolTokens, call.SystemTokens = c.Tools, c.ToolTokens, c.SystemTokens
		call.MessageTokens, call.InheritedTokens = c.MessageTokens, c.InheritedTokens
		call.CachedPrefixTokens, call.InputTokens = c.CachedPrefixTokens, c.InputTokens
		if summary {
			call.Purpose = delegation.PurposeSummary
		}
	}
	s.emit(a.info.ID, delegation.EventModelStarted, in.At, delegation.ModelStarted{Call: call})
	t := &Turn{s: s, a: a, call: call, start: in.At}
	if summary {
		t.summarized, t.outputTokens = in.Counted.Summarized, in.Counted.OutputTokens
	}
	a.open = t
	return t
}

// agentFor is the agent a call is of: one named, a child a task call
// starts, main, or, when nothing explains it, one of its own under main
// (shown, not lost).
func (s *Session) agentFor(in CallInput, p Placement) (a *agent, inherited []delegation.Range, newAgent bool) {
	switch {
	case p.Agent != "":
		a = s.byID[p.Agent]
	case p.tc != nil:
		a, inherited = s.startChild(in, p.tc, p.Inherited)
		newAgent = true
	case p.Main || s.main == nil:
		a = s.newAgent(delegation.AgentInfo{ID: "main", Name: "main"}, nil, in)
		newAgent = true
	default:
		// Nothing explains this call: it gets an agent of its own, under
		// main, without a delegation, so that it is shown, not lost.
		s.children++
		id := "a" + strconv.Itoa(s.children)
		name := orDefault(in.Hint.Name, "unattached")
		a = s.newAgent(delegation.AgentInfo{ID: id, Name: name, ParentID: s.main.info.ID}, s.main, in)
		a.unattached = true
		newAgent = true
	}
	return a, inherited, newAgent
}

// startChild starts the child a task call explains: fork when it begins
// with some of its parent's messages, isolated when not.
func (s *Session) startChild(in CallInput, tc *toolCall, inheritedN int) (*agent, []delegation.Range) {
	var inherited []delegation.Range
	parent := tc.owner
	mode := delegation.ModeIsolated
	if inheritedN > 0 {
		mode = delegation.ModeFork
		inherited = delegation.FirstMessages(tc.inherit, inheritedN)
	}
	name, inv := tc.task.SubagentType, tc.invocation
	if !tc.task.typed && in.Hint.Name != "" && in.Hint.Name != "main" {
		// A span that names the agent says more than the default.
		name, inv = in.Hint.Name, -1
	}
	s.children++
	id := "a" + strconv.Itoa(s.children)
	if c := in.Counted; c != nil && c.AgentID != "" && c.AgentID != "main" && s.byID[c.AgentID] == nil {
		id = c.AgentID // the studio's own export: its ids, as the engine gave them
	}
	if inv < 0 {
		inv = s.invocations[name]
		s.invocations[name]++
	}
	if !tc.started {
		tc.started = true
		s.emit(parent.info.ID, delegation.EventToolStarted, in.At, delegation.ToolStarted{ToolCallID: tc.call.ID, Name: tc.call.Name, Args: tc.call.Args})
	}
	s.emit(parent.info.ID, delegation.EventDelegationStarted, in.At, delegation.DelegationStarted{ToolCallID: tc.call.ID,
		ChildID: id, SubagentType: name, Mode: mode, Description: tc.task.Description})
	a := s.newAgent(delegation.AgentInfo{ID: id, Name: name, ParentID: parent.info.ID, Mode: mode,
		TaskCallID: tc.call.ID, Invocation: inv}, parent, in)
	tc.child = a
	a.history = append(a.history, inherited...)
	return a, inherited
}

// cachedPrefix is the tokens of a call's input an earlier call of the
// session began with too, as the engine counts it (delegation/prefix.go):
// walked from the agent's previous call or its parent's latest.
func (s *Session) cachedPrefix(a *agent, in CallInput, call delegation.ModelCall) int {
	var parent *delegation.PrefixMark
	if a.parent != nil {
		parent = a.parent.mark
	}
	cached, mark := s.prefixes.Add(delegation.PrefixRequest{Tools: delegation.ToolsKey(in.Tools), ToolTokens: call.ToolTokens,
		System: delegation.SystemKey(in.System), SystemTokens: call.SystemTokens, Context: call.Context, Tokens: call.InputTokens,
		Message: func(agentID string, idx int) (delegation.PrefixKey, int) {
			owner := s.byID[agentID]
			return owner.msgKeys[idx], owner.msgs[idx].Tokens
		}}, a.mark, parent)
	a.mark = mark
	return cached
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Finish records a call's answer (or its error) and emits model.finished.
func (t *Turn) Finish(out CallOutput) {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.done || s.finished {
		return
	}
	t.done = true
	a := t.a
	if a.open == t {
		a.open = nil
	}
	fin := delegation.ModelFinished{ModelCallID: t.call.ID, Usage: out.Usage, Response: out.Response, Error: out.Error}
	if !out.At.IsZero() && !t.start.IsZero() {
		fin.DurationMS = out.At.Sub(t.start).Milliseconds()
	}
	if t.summarized != nil && out.Output != nil {
		fin.OutputTokens = t.outputTokens
		if a.price != nil {
			c := a.price.CallCost(t.call, fin)
			fin.Cost = &c
		}
		s.emit(a.info.ID, delegation.EventModelFinished, out.At, fin)
		s.summarize(a, t.summarized, out, out.At)
		return
	}
	if out.Output != nil {
		m := normalize([]Message{*out.Output})[0]
		m.Role = delegation.RoleAssistant
		msg := &delegation.Message{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning,
			ToolCalls: withIDs(a, t.call.Index, m.ToolCalls)}
		s.appendMessage(a, msg, out.At)
		fin.OutputMessageID, fin.OutputTokens = msg.ID, msg.Tokens
		a.pending = nil
		for _, c := range msg.ToolCalls {
			tc := &toolCall{owner: a, call: c, inherit: a.last, invocation: -1}
			if c.Name == s.cfg.TaskTool {
				args := readTaskArgs(c.Args)
				tc.task = args
				// A fork's task calls are refused (delegation.md §3): they
				// start no child, so they take no number.
				if a.info.Mode != delegation.ModeFork {
					tc.invocation = s.invocations[args.SubagentType]
					s.invocations[args.SubagentType]++
				}
			}
			a.pending = append(a.pending, tc)
		}
		a.asked = len(msg.ToolCalls) > 0
		a.failed = ""
	} else {
		a.asked, a.failed = false, orDefault(out.Error, "the call failed")
	}
	if a.price != nil {
		c := a.price.CallCost(t.call, fin)
		fin.Cost = &c
	}
	s.emit(a.info.ID, delegation.EventModelFinished, out.At, fin)
}

// withIDs gives every tool call an id, as the engine does, for its result to
// refer to; arguments that are not JSON are kept as a JSON string.
func withIDs(a *agent, step int, calls []delegation.ToolCall) []delegation.ToolCall {
	out := make([]delegation.ToolCall, len(calls))
	for i, c := range calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%s_%d_%d", a.info.ID, step, i)
		}
		c.Args = jsonArgs(c.Args)
		out[i] = c
	}
	return out
}

func jsonArgs(raw json.RawMessage) json.RawMessage {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return json.RawMessage("{}")
	}
	if !json.Valid(raw) {
		b, _ := json.Marshal(string(raw))
		return b
	}
	return raw
}

// kindOf says what a message new to an agent is for.
func (s *Session) kindOf(a *agent, m *delegation.Message, opening bool, inherited []delegation.Range) delegation.Kind {
	switch {
	case m.Role == delegation.RoleUser && opening && len(inherited) > 0:
		return delegation.KindForkPreamble
	case m.Role == delegation.RoleUser && opening:
		return delegation.KindTask
	case m.Role == delegation.RoleUser && a.parent == nil && len(a.msgs) == 0 && !a.unattached:
		return delegation.KindPrompt
	}
	return delegation.KindNone
}

// answering finds the pending tool call a tool message answers: by id when
// both have one, else the first unanswered call, in call order.
func (s *Session) answering(a *agent, m *delegation.Message) *toolCall {
	if m.ToolCallID != "" {
		for _, tc := range a.pending {
			if tc.call.ID == m.ToolCallID && !tc.added {
				return tc
			}
		}
	}
	for _, tc := range a.pending {
		if !tc.added {
			return tc
		}
	}
	return nil
}

func keepUnanswered(pending []*toolCall) []*toolCall {
	var out []*toolCall
	for _, tc := range pending {
		if !tc.added {
			out = append(out, tc)
		}
	}
	return out
}

// settle is called when a new call of a shows messages after its history:
// results a tool span reported that still wait for an earlier call's result
// give way to what the call actually received.
func (s *Session) settle(a *agent) {
	for _, tc := range a.pending {
		if !tc.added {
			tc.result = nil
		}
	}
}

// Tool records a tool's execution as a tool span reports it: tool.started
// and tool.finished, what it changed in the files, and its result in its
// agent's list, in tool-call order. A delegation's result is the receipt.
// It reports whether the result found its call; one that did not changes
// nothing (the caller keeps it some other way).
func (s *Session) Tool(r ToolResult) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return false
	}
	tc := s.findCall(r)
	if tc == nil {
		return false
	}
	a := tc.owner
	if tc.child == nil && r.ChildKey != "" {
		if c := s.byKey[r.ChildKey]; c != nil && c.parent == a {
			tc.child = c
		}
	}
	if !tc.started {
		tc.started = true
		s.emit(a.info.ID, delegation.EventToolStarted, r.Start, delegation.ToolStarted{ToolCallID: tc.call.ID, Name: tc.call.Name, Args: tc.call.Args})
	}
	tc.files = r.Files
	result := r.Result
	if !r.HasResult && r.IsError {
		result = r.Error
	}
	if r.HasResult || r.IsError {
		tc.result = &delegation.Message{Role: delegation.RoleTool, Content: result, ToolCallID: tc.call.ID, IsError: r.IsError}
	}
	if tc.child != nil && !tc.child.finished {
		s.finishAgent(tc.child, r.IsError, r.Error, r.End)
	}
	if tc.child == nil && tc.files != nil {
		s.applyFiles(a, "", tc.files, r.End)
		tc.files = nil
	}
	s.flush(a, r.End)
	if !tc.finished {
		tc.finished = true
		var d int64
		if !r.Start.IsZero() && !r.End.IsZero() {
			d = r.End.Sub(r.Start).Milliseconds()
		}
		s.emit(a.info.ID, delegation.EventToolFinished, r.End, delegation.ToolFinished{ToolCallID: tc.call.ID, Name: tc.call.Name,
			IsError: r.IsError, DurationMS: d})
	}
	return true
}

// findCall finds the pending call a tool result answers: by id; else among
// the hinted agent's calls (or everyone's) the first unfinished one of that
// name whose arguments match, then of that name.
func (s *Session) findCall(r ToolResult) *toolCall {
	var candidates []*agent
	if a := s.byKey[r.Hint.Key]; a != nil {
		candidates = append(candidates, a)
	}
	for _, a := range s.agents {
		if len(candidates) == 0 || candidates[0] != a {
			candidates = append(candidates, a)
		}
	}
	if r.CallID != "" {
		for _, a := range candidates {
			for _, tc := range a.pending {
				if tc.call.ID == r.CallID && !tc.finished {
					return tc
				}
			}
		}
	}
	for pass := 0; pass < 2; pass++ {
		for _, a := range candidates {
			for _, tc := range a.pending {
				if tc.finished || tc.call.Name != r.Name {
					continue
				}
				if pass == 0 && !sameArgs(tc.call.Args, r.Args) {
					continue
				}
				return tc
			}
		}
	}
	return nil
}

// flush adds to a's list, in call order, the results of an answer's tool
// calls once every one of them is in: as an agent loop does, which runs an
// answer's calls (in parallel or not) and then appends all their results,
// so a child's receipt comes back beside its siblings', not before they end.
func (s *Session) flush(a *agent, at time.Time) {
	for _, tc := range a.pending {
		if !tc.added && tc.result == nil {
			return
		}
	}
	for _, tc := range a.pending {
		if !tc.added {
			s.resultIn(a, tc, tc.result, at, true)
		}
	}
}

// resultIn adds a tool call's result to its agent's list: a receipt when the
// call started a child, a refusal when a delegation started none.
func (s *Session) resultIn(a *agent, tc *toolCall, m *delegation.Message, at time.Time, fromTool bool) {
	tc.added = true
	m.ToolCallID = tc.call.ID
	if tc.task != nil && tc.child == nil && !tc.refused {
		if reason := refusalOf(a, m.Content); reason != "" {
			tc.refused = true
			m.Kind = delegation.KindRefusal
			s.emit(a.info.ID, delegation.EventDelegationRefused, at, delegation.DelegationRefused{ToolCallID: tc.call.ID,
				Reason: reason, SubagentType: tc.task.SubagentType, Message: m.Content})
		}
	}
	if tc.child != nil {
		m.Kind = delegation.KindReceipt
		if !tc.child.finished {
			s.finishAgent(tc.child, m.IsError, "", at)
		}
		filesBack := false
		if tc.files != nil {
			filesBack = s.applyFiles(a, tc.child.info.ID, tc.files, at)
			tc.files = nil
		}
		returned := []string{"receipt"}
		if filesBack {
			returned = append(returned, "files")
		}
		if e := tc.child.exported; e != nil && e.Returned != nil {
			returned = e.Returned
		}
		fin := delegation.DelegationFinished{ToolCallID: tc.call.ID, ChildID: tc.child.info.ID, IsError: m.IsError,
			Returned: returned, HeldBack: heldBack(tc.child)}
		// The export says when no receipt came back (the parent failed with
		// its child, as deepagents' does): none is added to its list.
		if slices.Contains(returned, "receipt") || tc.child.exported == nil || tc.child.exported.Returned == nil {
			fin.ReceiptMessageID = s.appendMessage(a, m, at).ID
		}
		s.emit(a.info.ID, delegation.EventDelegationFinished, at, fin)
	} else {
		s.appendMessage(a, m, at)
	}
	if !fromTool && !tc.finished {
		// The span of this tool never came: its result is known only from
		// the next call, so it starts and ends there.
		if !tc.started {
			tc.started = true
			s.emit(a.info.ID, delegation.EventToolStarted, at, delegation.ToolStarted{ToolCallID: tc.call.ID, Name: tc.call.Name, Args: tc.call.Args})
		}
		tc.finished = true
		s.emit(a.info.ID, delegation.EventToolFinished, at, delegation.ToolFinished{ToolCallID: tc.call.ID, Name: tc.call.Name, IsError: m.IsError})
	}
}

// refusalOf says why a delegation tool's result started no child: "nested"
// for the refusal a fork child gets, "unknown_type" for a subagent type
// that does not exist, "" when the result says neither.
func refusalOf(a *agent, content string) string {
	low := strings.ToLower(content)
	switch {
	case content == delegation.NestedRefusal || strings.Contains(low, "cannot delegate to another subagent"):
		return delegation.RefusedNested
	case strings.Contains(low, "only allowed types") || strings.Contains(low, "does not exist"):
		return delegation.RefusedUnknownType
	}
	return ""
}

// summarize folds a's history as a summary call of the studio's own export
// did (delegation/summarize.go): the history it wrote down, the summary
// message (its answer) new at the end of a's list, the history from then
// on the summary and the messages it kept.
func (s *Session) summarize(a *agent, d *Summarized, out CallOutput, at time.Time) {
	if out.Files != nil {
		s.applyFiles(a, "", out.Files, at)
	}
	kept := delegation.AfterMessages(a.history, d.FoldedMessages)
	a.history = nil
	m := s.appendMessage(a, &delegation.Message{Role: delegation.RoleUser, Kind: delegation.KindSummary, Content: out.Output.Content}, at)
	a.history = append(a.history, kept...)
	s.emit(a.info.ID, delegation.EventSummarization, at, delegation.Summarized{CutoffIndex: d.CutoffIndex, SummaryMessage: m,
		FilePath: d.FilePath, FoldedMessages: d.FoldedMessages, TokensBefore: d.TokensBefore, TokensAfter: d.TokensAfter})
}

// steps are an agent's model calls that were steps of its: all but its
// summaries.
func (a *agent) steps() int { return a.calls - a.summaries }

func (s *Session) finishAgent(a *agent, failed bool, reason string, at time.Time) {
	if a.finished {
		return
	}
	a.finished = true
	fin := delegation.AgentFinished{Status: delegation.StatusDone, Steps: a.steps(), Receipt: receiptText(a)}
	if a.exported != nil && a.exported.HasReceipt {
		fin.Receipt = a.exported.Receipt
	}
	if failed {
		fin.Status, fin.Error, fin.StoppedBy = delegation.StatusFailed, orDefault(reason, "the agent ended with an error"), s.stoppedBy
		if a.exported != nil {
			fin.Code = a.exported.Code
		}
	}
	s.emit(a.info.ID, delegation.EventAgentFinished, at, fin)
}

// Exported is what the studio's own export says of an agent's end, which
// its messages alone do not: its receipt (a structured response is no
// text) and what its delegation held back.
type Exported struct {
	Receipt    string
	HasReceipt bool
	// Returned and HeldBack are what its delegation brought back and held
	// back; nil when the export does not say.
	Returned, HeldBack []string
	// Code is why it failed, as the engine's code said (delegation.Finish*).
	Code string
}

// heldBack is what a child's delegation held back: as the export said, else
// its messages.
func heldBack(child *agent) []string {
	if child.exported != nil && child.exported.HeldBack != nil {
		return child.exported.HeldBack
	}
	return []string{"messages"}
}

// receiptText is the last non-empty text an agent wrote (delegation.md §5).
func receiptText(a *agent) string { return delegation.LastText(a.msgs) }

// applyFiles applies the changes a tool (or a child, from) made to a's
// files and emits files.changed with those that changed anything; it
// reports whether any did.
func (s *Session) applyFiles(a *agent, from string, changes []delegation.FileChange, at time.Time) bool {
	var real []delegation.FileChange
	for _, c := range changes {
		old, had := a.files[c.Path]
		switch {
		case c.Deleted && had:
			delete(a.files, c.Path)
		case !c.Deleted && (!had || old != c.Content):
			a.files[c.Path] = c.Content
		default:
			continue
		}
		real = append(real, c)
	}
	if len(real) == 0 {
		return false
	}
	s.emit(a.info.ID, delegation.EventFilesChanged, at, delegation.FilesChanged{From: from, Changes: real})
	return true
}

// AgentEnded records that the run of the agent with this key ended (its
// span did), failed or not. It reports whether the key names an agent.
func (s *Session) AgentEnded(key string, failed bool, reason string, at time.Time, exported *Exported) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.byKey[key]
	if a == nil || s.finished {
		return false
	}
	if exported != nil {
		a.exported = exported
	}
	if a != s.main {
		s.finishAgent(a, failed, reason, at)
	}
	return true
}

// Alias makes key name the agent that known names, unless it names one
// already: a span first taken for an agent's run turned out to be a step
// inside it, so its parent is that agent's too.
func (s *Session) Alias(key, known string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.byKey[known]; a != nil && key != "" {
		s.remember(a, key)
	}
}

// AgentName is the name of the agent a key names, "" when none.
func (s *Session) AgentName(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.byKey[key]; a != nil {
		return a.info.Name
	}
	return ""
}

// Known reports whether a key names an agent.
func (s *Session) Known(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key] != nil
}

// Span keeps a span that maps to nothing else (span.received).
func (s *Session) Span(d delegation.SpanReceived) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.start(d.StartedAt, "")
	s.emit("", delegation.EventSpanReceived, d.StartedAt.Add(time.Duration(d.DurationMS)*time.Millisecond), d)
}

// Prompt is the session's prompt: the first user message of its main
// agent's first call.
func (s *Session) Prompt() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prompt
}

// Started reports whether session.started was emitted.
func (s *Session) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// StopBy says that the session is being stopped from outside, as a
// delegation.Stop* code: Finish carries it beside its reason, on
// session.finished and on each agent.finished and model.finished it writes,
// for the edge to word.
func (s *Session) StopBy(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stoppedBy = code
}

// Finish ends the session: every agent still running ends (children first),
// the main agent's files become files (when given), and session.finished
// says how it ended. Finishing twice does nothing.
func (s *Session) Finish(status, reason string, files map[string]string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.finished {
		return
	}
	s.start(at, "")
	failed := status != delegation.StatusDone
	for i := len(s.agents) - 1; i >= 0; i-- {
		a := s.agents[i]
		if a.open != nil {
			a.open.done = true
			s.emit(a.info.ID, delegation.EventModelFinished, at, delegation.ModelFinished{ModelCallID: a.open.call.ID,
				Error: orDefault(reason, "the call never ended"), StoppedBy: s.stoppedBy})
			a.open = nil
		}
		if a != s.main {
			s.finishAgent(a, failed && !a.finished, reason, at)
		}
	}
	if s.main != nil && files != nil {
		var changes []delegation.FileChange
		for _, p := range slices.Sorted(maps.Keys(files)) {
			changes = append(changes, delegation.FileChange{Path: p, Content: files[p]})
		}
		for p := range s.main.files {
			if _, ok := files[p]; !ok {
				changes = append(changes, delegation.FileChange{Path: p, Deleted: true})
			}
		}
		s.applyFiles(s.main, "", changes, at)
	}
	answer := ""
	if s.main != nil {
		answer = receiptText(s.main)
		fin := delegation.AgentFinished{Status: delegation.StatusDone, Steps: s.main.steps(), Receipt: answer}
		if failed {
			fin.Status, fin.Error, fin.StoppedBy = delegation.StatusFailed, orDefault(reason, "the session did not end well"), s.stoppedBy
		}
		s.main.finished = true
		s.emit("main", delegation.EventAgentFinished, at, fin)
	}
	var mainFiles map[string]string
	if s.main != nil {
		mainFiles = s.main.files
	}
	s.finished = true
	s.emit("", delegation.EventSessionFinished, at, delegation.SessionFinished{Status: status, Error: reason, Answer: answer, Files: mainFiles,
		StoppedBy: s.stoppedBy})
}
