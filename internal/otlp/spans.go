package otlp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Spans folds a session's log into its spans, handing each to emit as soon
// as it is complete: a chat span when its call finished (a summary call when
// its summary was added), an execute_tool span when its result entered its
// agent's list, a child's invoke_agent span when its receipt did
// (delegation.finished), the main agent's when it finished. When the session
// has ended, the spans it left open end with it; while it runs, they are
// left out (Summary.Open) for a later export After Summary.LastSeq.
func Spans(src Source, opts Options, emit func(*tracepb.Span) error) (Summary, error) {
	return spans(src, opts, func(s *tracepb.Span, _ int64) error { return emit(s) })
}

// spans is Spans, telling emit the seq at which each span was complete:
// spans are emitted in that order.
func spans(src Source, opts Options, emit func(s *tracepb.Span, seq int64) error) (Summary, error) {
	if src == nil {
		return Summary{}, errNoSource
	}
	x := newExporter(src, opts, emit)
	for sp, err := range src.Log() {
		if err != nil {
			return x.sum, fmt.Errorf("otlp: %w", err)
		}
		if err := x.add(sp); err != nil {
			return x.sum, fmt.Errorf("otlp: event %d (%s): %w", sp.Event.Seq, sp.Event.Type, err)
		}
	}
	if err := x.finish(); err != nil {
		return x.sum, fmt.Errorf("otlp: %w", err)
	}
	x.sum.Through = x.sum.LastSeq
	return x.sum, nil
}

// Span kinds and status codes of OTLP's enums.
const (
	kindInternal = tracepb.Span_SPAN_KIND_INTERNAL
	kindClient   = tracepb.Span_SPAN_KIND_CLIENT
	statusOK     = tracepb.Status_STATUS_CODE_OK
	statusError  = tracepb.Status_STATUS_CODE_ERROR
)

// exporter is the fold's state: the spans still open and what they need.
type exporter struct {
	initialFiles map[string]string // session.started's, on main's first call
	src          Source
	opts         Options
	emit         func(*tracepb.Span, int64) error
	head         trace.Head
	team         team
	traceID      []byte
	used         map[uint64]bool
	sum          Summary

	agents  map[string]*agentRun
	order   []*agentRun           // in start order
	calls   map[string]*callRun   // by call id, until written
	tools   map[string][]*toolRun // by agent and tool call id, in start order, until written
	started map[string]int        // tool spans started per agent and tool call id, for their ids
	tasks   map[string]string     // child id → the task it was given, between delegation.started and agent.started
	summary map[string]*callRun   // agent id → its summary call, until the summary is added
	seq     int64                 // the seq of the event being folded
	last    time.Time             // the log's latest moment: the end of what never finished
	ended   bool                  // session.finished was seen
}

// agentRun is an agent's span in the making.
type agentRun struct {
	id, name, parentID, mode, taskCallID, model string
	endpoint                                    string            // where its calls went, as its agent.started says
	price                                       *delegation.Price // what its tokens cost, as its agent.started says
	invocation                                  int
	systemPrompt                                string
	spanID, parentSpanID                        []byte
	start                                       time.Time

	finished                  bool
	end                       time.Time
	status, errText           string
	code                      string // why it failed, as the engine's code says (delegation.Finish*)
	receipt                   string
	steps                     int
	description               string // the task it was given (children)
	events                    []*tracepb.Span_Event
	own, subtree              int // input tokens of its calls; and of its descendants' too, as they finish
	ownCached, subtreeCached  int // of which their cached prefixes
	ownCost, subtreeCost      float64
	ownPriced, subtreePriced  bool // a call of its, or of its subtree, had a cost
	inherited                 int  // messages of its first call that were another agent's
	called                    bool
	receiptTokens             int
	returned, heldBack        []string
	hasDelegation, hasReceipt bool

	// seen: its own messages below this index were some call's input.
	// pending: its own messages from seen on, until a call receives them.
	seen    int
	pending map[int]*trace.Message
	last    *trace.Message // its latest message: a call's output, a summary
	// args are the arguments its assistant messages gave each tool call
	// id, in order, until its tool.started takes them.
	args     map[string][]json.RawMessage
	lastTool *toolRun // its latest tool call to finish
	written  bool
}

// callRun is a chat span in the making: what it received is written into
// its attributes at model.started, so only those are kept.
type callRun struct {
	call     *trace.ModelCall
	agent    *agentRun
	spanID   []byte
	seq      int64 // of its model.started
	start    time.Time
	inputs   []*commonpb.KeyValue
	finished bool
	end      time.Time
	fin      *delegation.ModelFinished
	output   *trace.Message
	summary  *trace.Message
	// summarized is the summarization its summary made (a summary call's).
	summarized *trace.Summarization
	events     []*tracepb.Span_Event
}

// toolRun is an execute_tool span in the making.
type toolRun struct {
	agent      *agentRun
	callID     string
	name       string
	args       json.RawMessage
	spanID     []byte
	seq        int64 // of its tool.started
	start, end time.Time
	finished   bool
	isError    bool
	childID    string
	result     *trace.Message
	events     []*tracepb.Span_Event
}

func newExporter(src Source, opts Options, emit func(*tracepb.Span, int64) error) *exporter {
	h := src.Head()
	sum := sha256.Sum256([]byte(h.Session.ID))
	x := &exporter{src: src, opts: opts, emit: emit, head: h, team: teamOf(h),
		traceID: sum[:16], used: map[uint64]bool{},
		agents: map[string]*agentRun{}, calls: map[string]*callRun{}, tools: map[string][]*toolRun{},
		started: map[string]int{}, tasks: map[string]string{}, summary: map[string]*callRun{}}
	x.head.Scenario = nil // read into the team; it can be megabytes
	x.sum.LastSeq = h.LastSeq
	x.last = h.Session.CreatedAt
	if f := h.Session.FinishedAt; f != nil && f.After(x.last) {
		x.last = *f
	}
	return x
}

// spanID derives a span's id from the session id and a stable key: the
// first 8 bytes of sha256(session id/kind/local id), never zero, never
// repeated within the session. Ids are made in log order, so an export of
// part of a log gives its spans the ids the whole log gives them.
func (x *exporter) spanID(kind, local string) []byte {
	key := x.head.Session.ID + "/" + kind + "/" + local
	for n := 0; ; n++ {
		k := key
		if n > 0 {
			k += "#" + strconv.Itoa(n)
		}
		sum := sha256.Sum256([]byte(k))
		id := binary.BigEndian.Uint64(sum[:8])
		if id != 0 && !x.used[id] {
			x.used[id] = true
			return sum[:8]
		}
	}
}

func toolKey(agentID, callID string) string { return agentID + "\x00" + callID }

// add folds one step of the log.
func (x *exporter) add(st trace.Step) error {
	ev := st.Event
	x.seq = ev.Seq
	if ev.At.After(x.last) {
		x.last = ev.At
	}
	if ev.Seq > x.sum.LastSeq {
		x.sum.LastSeq = ev.Seq
	}
	run := x.agents[ev.AgentID]
	switch {
	case st.AgentStarted != nil:
		x.startAgent(*st.AgentStarted, ev.At)
	case st.AgentFinished != nil:
		d := st.AgentFinished
		if run == nil {
			return fmt.Errorf("agent.finished for unknown agent %q", ev.AgentID)
		}
		run.finished, run.end, run.status, run.errText, run.steps, run.receipt = true, ev.At, d.Status, d.Error, d.Steps, d.Receipt
		run.code = d.Code
		if run.parentID == "" {
			return x.writeAgent(run)
		}
	case ev.Type == delegation.EventMessageAdded:
		if st.Message == nil || run == nil {
			return fmt.Errorf("message.added without its message or agent")
		}
		return x.addMessage(run, st.Index, st.Message)
	case ev.Type == delegation.EventModelStarted:
		if st.Call == nil || run == nil {
			return fmt.Errorf("model.started without its call or agent")
		}
		return x.startCall(run, st.Call, ev.At)
	case ev.Type == delegation.EventModelFinished:
		return x.finishCall(st)
	case st.ToolStarted != nil:
		if run == nil {
			return fmt.Errorf("tool.started for unknown agent %q", ev.AgentID)
		}
		x.startTool(run, *st.ToolStarted, ev.At)
	case st.ToolFinished != nil:
		return x.finishTool(st)
	case st.DelegationStarted != nil:
		d := st.DelegationStarted
		if ts := x.tools[toolKey(ev.AgentID, d.ToolCallID)]; len(ts) > 0 {
			ts[len(ts)-1].childID = d.ChildID
		}
		x.tasks[d.ChildID] = d.Description
	case st.DelegationFinished != nil:
		d := st.DelegationFinished
		if child := x.agents[d.ChildID]; child != nil {
			child.returned, child.heldBack, child.hasDelegation = d.Returned, d.HeldBack, true
			return x.writeAgent(child)
		}
	case st.Summarization != nil:
		if run != nil {
			return x.summarized(run, st)
		}
	case st.DelegationRefused != nil, st.TodosChanged != nil:
		if run != nil {
			run.events = append(run.events, spanEvent(ev))
		}
	case st.FilesChanged != nil:
		if run != nil {
			x.filesChanged(run, st)
		}
	case st.SessionStarted != nil:
		x.initialFiles = st.SessionStarted.Files
	case st.SessionFinished != nil:
		x.ended = true
	}
	return nil
}

// finishCall folds a model.finished: the call's span is written, but for a
// summary call, which waits for its summary.
func (x *exporter) finishCall(st trace.Step) error {
	if st.Finished == nil {
		return fmt.Errorf("model.finished without what it finished")
	}
	c := x.calls[st.Finished.ModelCallID]
	if c == nil {
		return fmt.Errorf("model.finished for unknown model call %q", st.Finished.ModelCallID)
	}
	c.finished, c.end, c.fin = true, st.Event.At, st.Finished
	if cost := st.Finished.Cost; cost != nil {
		a := c.agent
		a.ownCost += cost.Total
		a.subtreeCost += cost.Total
		a.ownPriced, a.subtreePriced = true, true
	}
	if id := st.Finished.OutputMessageID; id != "" && c.agent.last != nil && c.agent.last.ID == id {
		c.output = c.agent.last
	}
	if c.call.Purpose == string(delegation.PurposeSummary) && c.fin.Error == "" {
		x.summary[c.agent.id] = c // complete when its summary is added
		return nil
	}
	return x.writeCall(c)
}

// finishTool folds a tool.finished: the first unfinished call of that id
// ends, and is written when its result is in.
func (x *exporter) finishTool(st trace.Step) error {
	d := st.ToolFinished
	for _, t := range x.tools[toolKey(st.Event.AgentID, d.ToolCallID)] {
		if !t.finished {
			t.finished, t.end, t.isError = true, st.Event.At, d.IsError
			t.agent.lastTool = t
			if t.result != nil {
				return x.writeTool(t)
			}
			break
		}
	}
	return nil
}

// summarized folds a summarization: an event of its agent's span, and the
// end of the summary call that waited for it.
func (x *exporter) summarized(run *agentRun, st trace.Step) error {
	d := st.Summarization
	run.events = append(run.events, spanEvent(st.Event))
	c := x.summary[run.id]
	if c == nil {
		return nil
	}
	delete(x.summary, run.id)
	if run.last != nil && (d.SummaryMessageID == "" || run.last.ID == d.SummaryMessageID) {
		c.summary = run.last
	}
	c.summarized = d
	return x.writeCall(c)
}

// filesChanged makes a files.changed an event of the span whose work
// changed the files: the task call whose child's changes came back, the
// summary call whose history was written to a file, or the tool call that
// just finished; else the agent's own span. So no span gathers the events
// of a whole session.
func (x *exporter) filesChanged(run *agentRun, st trace.Step) {
	d := st.FilesChanged
	e := spanEvent(st.Event)
	if d.From != "" {
		for _, ts := range x.tools {
			for _, t := range ts {
				if t.agent == run && t.childID == d.From {
					t.events = append(t.events, e)
					return
				}
			}
		}
	}
	if c := x.summary[run.id]; c != nil && d.From == "" {
		c.events = append(c.events, e)
		return
	}
	if t := run.lastTool; t != nil && d.From == "" && t.finished && t.result == nil && t.childID == "" {
		t.events = append(t.events, e)
		return
	}
	run.events = append(run.events, e)
}

// nonNilTools is a call's tools, [] rather than null when it had none.
func nonNilTools(t []delegation.ToolCost) []delegation.ToolCost {
	if t == nil {
		return []delegation.ToolCost{}
	}
	return t
}

// server says where an agent's calls went (endpointAttrs): its
// agent.started's endpoint — the log's is the truth, for a received
// session too, which came with it — else its scenario's, for calls our
// engine made.
func (x *exporter) server(run *agentRun) []*commonpb.KeyValue {
	if run.endpoint != "" && (x.team.remote() || !x.team.engine) {
		return endpointAttrs(run.endpoint)
	}
	if base, ok := x.team.endpoint(run.name); ok {
		return endpointAttrs(base)
	}
	return nil
}

func spanEvent(ev delegation.Event) *tracepb.Span_Event {
	return &tracepb.Span_Event{TimeUnixNano: unixNano(ev.At), Name: string(ev.Type), Attributes: attrsOf(ev.Data)}
}

func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func (x *exporter) startAgent(d delegation.AgentStarted, at time.Time) {
	a := d.Agent
	run := &agentRun{id: a.ID, name: a.Name, parentID: a.ParentID, mode: string(a.Mode), taskCallID: a.TaskCallID,
		invocation: a.Invocation, systemPrompt: d.SystemPrompt, start: at,
		pending: map[int]*trace.Message{}, args: map[string][]json.RawMessage{}}
	run.spanID = x.spanID("agent", a.ID)
	run.model = x.team.mainModel
	if parent := x.agents[a.ParentID]; parent != nil {
		run.model = parent.model
		run.parentSpanID = parent.spanID
		// A child hangs under the task call that started it.
		ts := x.tools[toolKey(parent.id, a.TaskCallID)]
		for i := len(ts) - 1; i >= 0; i-- {
			if ts[i].childID == a.ID || (ts[i].childID == "" && len(ts) == 1) {
				run.parentSpanID = ts[i].spanID
				break
			}
		}
	}
	if s, ok := x.team.subagents[a.Name]; ok && a.ParentID != "" && s.model != "" {
		run.model = s.model
	}
	// The log says which model and endpoint, when it does: it is the truth
	// of what ran, the scenario only of what was asked.
	if d.Model != "" {
		run.model = d.Model
	}
	run.endpoint, run.price = d.Endpoint, d.Price
	run.description = x.tasks[a.ID]
	delete(x.tasks, a.ID)
	x.agents[a.ID] = run
	x.order = append(x.order, run)
}

func (x *exporter) addMessage(run *agentRun, idx int, m *trace.Message) error {
	run.last = m
	if x.opts.Inputs != InputsFull && idx >= run.seen {
		run.pending[idx] = m
	}
	switch {
	case m.Role == string(delegation.RoleAssistant):
		for _, c := range m.ToolCalls {
			run.args[c.ID] = append(run.args[c.ID], c.Args)
		}
	case m.Role == string(delegation.RoleTool) && m.ToolCallID != nil:
		for _, t := range x.tools[toolKey(run.id, *m.ToolCallID)] {
			if t.result == nil {
				t.result = m
				if child := x.agents[t.childID]; child != nil && m.Kind == string(delegation.KindReceipt) {
					child.receiptTokens, child.hasReceipt = m.Tokens, true
				}
				if t.finished {
					return x.writeTool(t)
				}
				break
			}
		}
	}
	return nil
}

func (x *exporter) startTool(run *agentRun, d delegation.ToolStarted, at time.Time) {
	k := toolKey(run.id, d.ToolCallID)
	local := run.id + "/" + d.ToolCallID
	if n := x.started[k]; n > 0 {
		local += "#" + strconv.Itoa(n)
	}
	x.started[k]++
	t := &toolRun{agent: run, callID: d.ToolCallID, name: d.Name, args: d.Args, seq: x.seq, start: at, spanID: x.spanID("tool", local)}
	// The arguments are the assistant message's (a stored tool.started
	// holds none): the first of that call id not yet taken.
	if q := run.args[d.ToolCallID]; len(q) > 0 {
		if len(q[0]) > 0 {
			t.args = q[0]
		}
		if len(q) == 1 {
			delete(run.args, d.ToolCallID)
		} else {
			run.args[d.ToolCallID] = q[1:]
		}
	}
	x.tools[k] = append(x.tools[k], t)
}

// startCall writes what a call received into its span's attributes: the
// messages its agent's list gained since its previous call (or, asked, the
// whole input within the cap), and the ranges of all it received.
func (x *exporter) startCall(run *agentRun, call *trace.ModelCall, at time.Time) error {
	c := &callRun{call: call, agent: run, seq: x.seq, start: at, spanID: x.spanID("chat", call.ID)}
	run.own += call.InputTokens
	run.subtree += call.InputTokens
	run.ownCached += call.CachedPrefixTokens
	run.subtreeCached += call.CachedPrefixTokens
	first := !run.called
	if !run.called {
		run.called = true
		for _, r := range call.Context {
			if r.AgentID != run.id {
				run.inherited += r.Len()
			}
		}
	}
	total := 0
	for _, r := range call.Context {
		total += r.Len()
	}
	var shown []*trace.Message
	var attrs []*commonpb.KeyValue
	if x.opts.Inputs == InputsFull {
		var cut bool
		var omitted int
		var err error
		if shown, cut, omitted, err = x.wholeInput(call.Context); err != nil {
			return err
		}
		attrs = append(attrs, str("delegation.inputs", string(InputsFull)))
		if cut {
			attrs = append(attrs, boolean("delegation.inputs_cut", true),
				integer("delegation.inputs_omitted_messages", int64(omitted)),
				integer("delegation.inputs_cap_bytes", int64(x.opts.inputCap())))
		}
	} else {
		var ranges []delegation.Range
		var err error
		if shown, ranges, err = x.newInput(run, call.Context); err != nil {
			return err
		}
		attrs = append(attrs, str("delegation.inputs", string(InputsNew)),
			str("delegation.new_ranges", jsonText(nonNilRanges(ranges))))
	}
	attrs = append(attrs,
		integer("delegation.input_messages", int64(total)),
		integer("delegation.shown_messages", int64(len(shown))))
	gen := make([]genMessage, len(shown))
	for i, m := range shown {
		gen[i] = genMessageOf(m)
	}
	attrs = append(attrs, str("gen_ai.input.messages", jsonText(gen)))
	// The system prompt is the agent's, the same for each of its calls:
	// written on each call's span with whole inputs, else on its first.
	if call.SystemPrompt != "" && (x.opts.Inputs == InputsFull || first) {
		attrs = append(attrs, str("gen_ai.system_instructions", systemInstructions(call.SystemPrompt)))
	}
	if x.opts.OpenInference {
		i := 0
		if x.opts.Inputs == InputsFull && call.SystemPrompt != "" {
			attrs = append(attrs, str("llm.input_messages.0.message.role", "system"),
				str("llm.input_messages.0.message.content", call.SystemPrompt))
			i = 1
		}
		for _, m := range shown {
			attrs = append(attrs, oiMessage("llm.input_messages."+strconv.Itoa(i)+".", m.Role, m.Content, m.ToolCalls, m.ToolCallID)...)
			i++
		}
	}
	c.inputs = attrs
	x.calls[call.ID] = c
	return nil
}

// newInput returns the messages of a context that no earlier call of the
// agent received: its own list's, from the first index no call has seen.
// An agent's contexts only ever grow at the end of its list (a summary is a
// new message there too), so what an earlier call received lies below that
// index. Messages of another agent's list (a fork's inheritance) are never
// new: they were its parent's, and the ranges name them.
func (x *exporter) newInput(run *agentRun, ctx []delegation.Range) ([]*trace.Message, []delegation.Range, error) {
	var shown []*trace.Message
	var ranges []delegation.Range
	seen := run.seen
	for _, r := range ctx {
		if r.AgentID != run.id {
			continue
		}
		from := max(r.From, run.seen)
		for i := from; i < r.To; i++ {
			m := run.pending[i]
			if m == nil {
				// Not seen as added (a log that starts part-way): read it.
				for msg, err := range x.src.Backward(run.id, i, i+1) {
					if err != nil {
						return nil, nil, err
					}
					m = &msg
				}
			}
			if m != nil {
				shown = append(shown, m)
			}
		}
		if from < r.To {
			ranges = append(ranges, delegation.Range{AgentID: r.AgentID, From: from, To: r.To})
		}
		seen = max(seen, r.To)
	}
	for i := range run.pending {
		if i < seen {
			delete(run.pending, i)
		}
	}
	run.seen = seen
	return shown, ranges, nil
}

// wholeInput reads a call's whole input, newest first, until the cap: the
// messages kept, in order, whether it cut, and how many it left out. The
// newest message is kept even past the cap, its content cut to fit.
func (x *exporter) wholeInput(ctx []delegation.Range) ([]*trace.Message, bool, int, error) {
	limit := x.opts.inputCap()
	var kept []*trace.Message
	size, total := 2, 0
	cut := false
	for _, r := range ctx {
		total += r.Len()
	}
	for i := len(ctx) - 1; i >= 0 && !cut; i-- {
		r := ctx[i]
		for m, err := range x.src.Backward(r.AgentID, r.From, r.To) {
			if err != nil {
				return nil, false, 0, err
			}
			n := len(jsonText(genMessageOf(&m))) + 1
			if size+n > limit {
				cut = true
				if len(kept) == 0 {
					m := m
					m.Content = cutText(m.Content, max(limit-size-(n-len(m.Content)), 0))
					kept = append(kept, &m)
				}
				break
			}
			m := m
			kept = append(kept, &m)
			size += n
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept, cut, total - len(kept), nil
}

// cutText shortens s to about n bytes, on a rune boundary, saying so.
func cutText(s string, n int) string {
	const mark = "… [cut]"
	if len(s) <= n {
		return s
	}
	n = max(n-len(mark), 0)
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + mark
}

func nonNilRanges(rs []delegation.Range) []delegation.Range {
	if rs == nil {
		return []delegation.Range{}
	}
	return rs
}

// write hands a complete span on, unless an earlier export sent it: one
// complete at or before opts.After.
func (x *exporter) write(s *tracepb.Span) error {
	if x.seq <= x.opts.After {
		x.sum.Sent++
		return nil
	}
	x.sum.Spans++
	return x.emit(s, x.seq)
}

// finish ends the spans the log left open: with the session when it has
// ended, children before their parents; while it runs they are left for a
// later export.
func (x *exporter) finish() error {
	running := x.head.Session.Status == delegation.StatusRunning && !x.ended
	x.sum.Running = running
	var open []*callRun
	for _, c := range x.calls {
		open = append(open, c)
	}
	sort.Slice(open, func(i, j int) bool { return open[i].seq < open[j].seq })
	var tools []*toolRun
	for _, ts := range x.tools {
		tools = append(tools, ts...)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].seq < tools[j].seq })
	var agents []*agentRun
	for i := len(x.order) - 1; i >= 0; i-- {
		if !x.order[i].written {
			agents = append(agents, x.order[i])
		}
	}
	if running {
		x.sum.Open = len(open) + len(tools) + len(agents)
		return nil
	}
	// What the log left open is complete at its end: an export After
	// that seq has sent it.
	x.seq = x.sum.LastSeq
	for _, c := range open {
		if err := x.writeCall(c); err != nil {
			return err
		}
	}
	for _, t := range tools {
		if err := x.writeTool(t); err != nil {
			return err
		}
	}
	for _, a := range agents {
		if err := x.writeAgent(a); err != nil {
			return err
		}
	}
	return nil
}

// times returns a span's start and end, the end never before the start;
// what never ended ends with the log.
func (x *exporter) times(start, end time.Time, finished bool) (uint64, uint64) {
	if !finished {
		end = x.last
	}
	if end.Before(start) {
		end = start
	}
	return unixNano(start), unixNano(end)
}

func (x *exporter) span(id, parent []byte, name string, kind tracepb.Span_SpanKind) *tracepb.Span {
	return &tracepb.Span{TraceId: x.traceID, SpanId: id, ParentSpanId: parent, Name: name, Kind: kind}
}

func (x *exporter) writeAgent(run *agentRun) error {
	if run.written {
		return nil
	}
	run.written = true
	run.pending, run.args = nil, nil
	if p := x.agents[run.parentID]; p != nil {
		p.subtree += run.subtree
		p.subtreeCached += run.subtreeCached
		p.subtreeCost += run.subtreeCost
		p.subtreePriced = p.subtreePriced || run.subtreePriced
	}
	s := x.span(run.spanID, run.parentSpanID, "invoke_agent "+run.name, kindInternal)
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.times(run.start, run.end, run.finished)
	sess := x.head.Session
	attrs := []*commonpb.KeyValue{
		str("gen_ai.operation.name", "invoke_agent"),
		str("gen_ai.provider.name", x.team.provider),
		str("gen_ai.agent.name", run.name),
		str("gen_ai.agent.id", run.id),
	}
	description := x.team.description
	if run.parentID != "" {
		description = x.team.subagents[run.name].description
	}
	if description != "" {
		attrs = append(attrs, str("gen_ai.agent.description", description))
	}
	attrs = append(attrs, str("gen_ai.conversation.id", sess.ID))
	if run.model != "" {
		attrs = append(attrs, str("gen_ai.request.model", run.model))
	}
	attrs = append(attrs, x.server(run)...)
	if run.systemPrompt != "" {
		attrs = append(attrs, str("gen_ai.system_instructions", systemInstructions(run.systemPrompt)))
	}
	input := sess.Prompt
	if run.parentID != "" {
		input = run.description
	}
	attrs = append(attrs, str("gen_ai.input.messages", jsonText([]genMessage{textMessage("user", input, "")})))
	if run.finished {
		finish := finishStop
		if run.status == delegation.StatusFailed {
			finish = "error"
		}
		attrs = append(attrs, str("gen_ai.output.messages", jsonText([]genMessage{textMessage("assistant", run.receipt, finish)})))
	}
	if x.opts.OpenInference {
		attrs = append(attrs, str("openinference.span.kind", "AGENT"), str("session.id", sess.ID),
			str("agent.name", run.name), str("graph.node.id", run.id))
		if run.parentID != "" {
			attrs = append(attrs, str("graph.node.parent_id", run.parentID))
		}
		attrs = append(attrs, str("input.value", input), str("input.mime_type", "text/plain"))
		if run.finished {
			attrs = append(attrs, str("output.value", run.receipt), str("output.mime_type", "text/plain"))
		}
	}
	status := run.status
	if !run.finished {
		status = delegation.StatusRunning
	}
	attrs = append(attrs, delegationAgentAttrs(run, status)...)
	switch {
	case run.finished && status == delegation.StatusFailed:
		attrs = append(attrs, str("error.type", "agent_failed"))
		s.Status = &tracepb.Status{Code: statusError, Message: run.errText}
	case run.finished:
		s.Status = &tracepb.Status{Code: statusOK}
	}
	s.Attributes = attrs
	s.Events = run.events
	run.events = nil
	return x.write(s)
}

// delegationAgentAttrs are ours: the agent's mode, tokens, cost, status
// and what its delegation returned.
func delegationAgentAttrs(run *agentRun, status string) []*commonpb.KeyValue {
	var attrs []*commonpb.KeyValue
	if run.mode != "" {
		attrs = append(attrs, str("delegation.mode", run.mode))
	}
	if run.parentID != "" {
		attrs = append(attrs, integer("delegation.inherited_messages", int64(run.inherited)))
		if run.hasReceipt {
			attrs = append(attrs, integer("delegation.receipt_tokens", int64(run.receiptTokens)))
		}
	}
	attrs = append(attrs,
		integer("delegation.own_tokens", int64(run.own)),
		integer("delegation.subtree_tokens", int64(run.subtree)),
		integer("delegation.own_cached_tokens", int64(run.ownCached)),
		integer("delegation.subtree_cached_tokens", int64(run.subtreeCached)),
		str("delegation.status", status),
		integer("delegation.steps", int64(run.steps)),
		integer("delegation.invocation", int64(run.invocation)),
	)
	if run.ownPriced {
		attrs = append(attrs, double("delegation.own_cost", run.ownCost))
	}
	if run.subtreePriced {
		attrs = append(attrs, double("delegation.subtree_cost", run.subtreeCost))
	}
	if run.hasDelegation {
		attrs = append(attrs, strList("delegation.returned", run.returned), strList("delegation.held_back", run.heldBack))
	}
	if run.code != "" {
		attrs = append(attrs, str("delegation.code", run.code))
	}
	return attrs
}

func (x *exporter) writeCall(c *callRun) error {
	delete(x.calls, c.call.ID)
	run := c.agent
	name := "chat"
	if run.model != "" {
		name += " " + run.model
	}
	s := x.span(c.spanID, run.spanID, name, kindClient)
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.times(c.start, c.end, c.finished)

	outputTokens := c.outputTokens()
	attrs := x.requestAttrs(run)
	usage := x.usageOf(c, outputTokens)
	attrs = append(attrs, usageAttrs(usage)...)
	var out *genMessage
	switch {
	case c.output != nil:
		o := outputOf(c.output)
		out = &o
	case c.summary != nil:
		o := textMessage("assistant", c.summary.Content, finishStop)
		out = &o
	}
	attrs = append(attrs, responseAttrs(c.fin, out)...)
	var cost *delegation.Cost
	if c.fin != nil {
		cost = c.fin.Cost
	}
	if cost != nil {
		// Not a GenAI convention yet: the name OpenLIT and Langfuse read.
		attrs = append(attrs, double("gen_ai.usage.cost", cost.Total))
	}
	attrs = append(attrs, c.inputs...)
	c.inputs = nil
	if out != nil {
		attrs = append(attrs, str("gen_ai.output.messages", jsonText([]genMessage{*out})))
	}
	if x.opts.OpenInference {
		attrs = append(attrs, x.openInferenceCallAttrs(c, usage, cost)...)
	}
	attrs = append(attrs, x.delegationCallAttrs(c, outputTokens, cost)...)
	switch {
	case c.fin != nil && c.fin.Error != "":
		attrs = append(attrs, str("error.type", "model_error"))
		s.Status = &tracepb.Status{Code: statusError, Message: c.fin.Error}
	case c.finished:
		s.Status = &tracepb.Status{Code: statusOK}
	}
	s.Attributes = attrs
	s.Events = c.events
	return x.write(s)
}

// outputTokens is what the call wrote, by our count.
func (c *callRun) outputTokens() int {
	switch {
	case c.output != nil:
		return c.output.Tokens
	case c.summary != nil:
		return c.summary.Tokens
	case c.fin != nil:
		return c.fin.OutputTokens
	}
	return 0
}

// requestAttrs say what the call asked and of whom.
func (x *exporter) requestAttrs(run *agentRun) []*commonpb.KeyValue {
	attrs := []*commonpb.KeyValue{
		str("gen_ai.operation.name", "chat"),
		str("gen_ai.provider.name", x.team.provider),
		str("gen_ai.conversation.id", x.head.Session.ID),
	}
	if run.model != "" {
		attrs = append(attrs, str("gen_ai.request.model", run.model))
	}
	attrs = append(attrs, x.server(run)...)
	if !x.team.remote() {
		return attrs
	}
	// What the adapter sends (internal/model/openai): it streams unless
	// the agent's settings say not to.
	set := x.team.settings(run.name)
	if set.Stream == nil || *set.Stream {
		attrs = append(attrs, boolean("gen_ai.request.stream", true))
	}
	if set.MaxTokens > 0 {
		attrs = append(attrs, integer("gen_ai.request.max_tokens", int64(set.MaxTokens)))
	}
	if set.Temperature != nil {
		attrs = append(attrs, double("gen_ai.request.temperature", *set.Temperature))
	}
	if set.Seed != nil {
		attrs = append(attrs, integer("gen_ai.request.seed", int64(*set.Seed)))
	}
	return attrs
}

// usageOf is the provider's count: the endpoint's when it reported one;
// the scripted model's is our tokenizer's (ours is always in
// delegation.input_tokens and delegation.output_tokens). Nil when neither.
func (x *exporter) usageOf(c *callRun, outputTokens int) *delegation.Usage {
	if c.fin != nil && c.fin.Usage != nil {
		return c.fin.Usage
	}
	if x.team.ownCount() {
		return &delegation.Usage{PromptTokens: c.call.InputTokens, CompletionTokens: outputTokens, CachedTokens: c.call.CachedPrefixTokens}
	}
	return nil
}

// usageAttrs are GenAI's usage attributes of a count.
func usageAttrs(usage *delegation.Usage) []*commonpb.KeyValue {
	if usage == nil {
		return nil
	}
	attrs := []*commonpb.KeyValue{
		integer("gen_ai.usage.input_tokens", int64(usage.PromptTokens)),
		integer("gen_ai.usage.output_tokens", int64(usage.CompletionTokens)),
	}
	if usage.CacheReported() {
		attrs = append(attrs, integer("gen_ai.usage.cache_read.input_tokens", int64(usage.CachedTokens)))
	}
	if usage.CacheCreationTokens > 0 {
		attrs = append(attrs, integer("gen_ai.usage.cache_creation.input_tokens", int64(usage.CacheCreationTokens)))
	}
	if usage.ReasoningTokens > 0 {
		attrs = append(attrs, integer("gen_ai.usage.reasoning.output_tokens", int64(usage.ReasoningTokens)))
	}
	return attrs
}

// openInferenceCallAttrs are a call's attributes in OpenInference's names.
func (x *exporter) openInferenceCallAttrs(c *callRun, usage *delegation.Usage, cost *delegation.Cost) []*commonpb.KeyValue {
	run := c.agent
	attrs := []*commonpb.KeyValue{str("openinference.span.kind", "LLM"), str("session.id", x.head.Session.ID),
		str("llm.provider", x.team.provider)}
	if run.model != "" {
		attrs = append(attrs, str("llm.model_name", run.model))
	}
	if usage != nil {
		attrs = append(attrs,
			integer("llm.token_count.prompt", int64(usage.PromptTokens)),
			integer("llm.token_count.completion", int64(usage.CompletionTokens)),
			integer("llm.token_count.total", int64(usage.PromptTokens+usage.CompletionTokens)))
		if usage.CacheReported() {
			attrs = append(attrs, integer("llm.token_count.prompt_details.cache_read", int64(usage.CachedTokens)))
		}
		if usage.CacheCreationTokens > 0 {
			attrs = append(attrs, integer("llm.token_count.prompt_details.cache_write", int64(usage.CacheCreationTokens)))
		}
		if usage.ReasoningTokens > 0 {
			attrs = append(attrs, integer("llm.token_count.completion_details.reasoning", int64(usage.ReasoningTokens)))
		}
	}
	if cost != nil {
		attrs = append(attrs, double("llm.cost.total", cost.Total), double("llm.cost.prompt", cost.Input+cost.CachedInput+cost.CacheWrite),
			double("llm.cost.completion", cost.Output))
	}
	switch {
	case c.output != nil:
		attrs = append(attrs, oiMessage("llm.output_messages.0.", c.output.Role, c.output.Content, c.output.ToolCalls, nil)...)
		if c.output.Content != "" {
			attrs = append(attrs, str("output.value", c.output.Content), str("output.mime_type", "text/plain"))
		}
	case c.summary != nil:
		attrs = append(attrs, oiMessage("llm.output_messages.0.", "assistant", c.summary.Content, nil, nil)...)
		attrs = append(attrs, str("output.value", c.summary.Content), str("output.mime_type", "text/plain"))
	}
	return attrs
}

// delegationCallAttrs are ours: what an import of the export needs to fold
// the call as the session did.
func (x *exporter) delegationCallAttrs(c *callRun, outputTokens int, cost *delegation.Cost) []*commonpb.KeyValue {
	call, run := c.call, c.agent
	attrs := []*commonpb.KeyValue{
		str("delegation.agent_id", run.id),
		str("delegation.purpose", call.Purpose),
		str("delegation.context_ranges", jsonText(nonNilRanges(call.Context))),
		integer("delegation.input_tokens", int64(call.InputTokens)),
		integer("delegation.output_tokens", int64(outputTokens)),
		integer("delegation.inherited_tokens", int64(call.InheritedTokens)),
		integer("delegation.system_tokens", int64(call.SystemTokens)),
		integer("delegation.tool_tokens", int64(call.ToolTokens)),
		integer("delegation.message_tokens", int64(call.MessageTokens)),
		integer("delegation.cached_prefix_tokens", int64(call.CachedPrefixTokens)),
		str("delegation.tools", jsonText(nonNilTools(call.Tools))),
	}
	if c.summarized != nil {
		// What the summary did to its agent's history (the summarization
		// event of its agent's span, which ends last): an import of the
		// export folds the history as the session did.
		attrs = append(attrs, str("delegation.summarization", jsonText(c.summarized)))
	}
	if run.parentID == "" && call.Index == 0 && len(x.initialFiles) > 0 {
		// The files the session began with, which no files.changed says, on
		// the first span a receiver gets (the root ends last): an import of
		// the export begins with them too.
		attrs = append(attrs, str("delegation.initial_files", jsonText(x.initialFiles)))
	}
	if run.price != nil {
		// The price its agent's calls were costed at (the scenario's, or
		// the table's of that date), so an import costs them the same.
		attrs = append(attrs, str("delegation.price", jsonText(run.price)))
	}
	if cost != nil {
		attrs = append(attrs, double("delegation.cost.input", cost.Input), double("delegation.cost.cached_input", cost.CachedInput),
			double("delegation.cost.cache_write", cost.CacheWrite), double("delegation.cost.output", cost.Output), str("delegation.cost.basis", cost.Basis))
	}
	return attrs
}

// responseAttrs say what the endpoint said of a call's answer, as it said
// it: gen_ai.response.id, gen_ai.response.model and
// gen_ai.response.finish_reasons ("tool_calls" stays "tool_calls"). Only
// when it said none of them (the scripted model, a log stored before they
// were kept) does the output message's finish reason stand in, alone: an
// import of the export reads a finish reason without an id or a model as
// the export's own (ingest's responseOf).
func responseAttrs(fin *delegation.ModelFinished, out *genMessage) []*commonpb.KeyValue {
	if fin == nil || fin.Response == nil {
		if out == nil {
			return nil
		}
		return []*commonpb.KeyValue{strList("gen_ai.response.finish_reasons", []string{out.FinishReason})}
	}
	said := fin.Response
	var attrs []*commonpb.KeyValue
	if said.ID != "" {
		attrs = append(attrs, str("gen_ai.response.id", said.ID))
	}
	if said.Model != "" {
		attrs = append(attrs, str("gen_ai.response.model", said.Model))
	}
	if said.FinishReason != "" {
		attrs = append(attrs, strList("gen_ai.response.finish_reasons", []string{said.FinishReason}))
	}
	return attrs
}

func (x *exporter) writeTool(t *toolRun) error {
	k := toolKey(t.agent.id, t.callID)
	ts := x.tools[k]
	for i := range ts {
		if ts[i] == t {
			ts = append(ts[:i:i], ts[i+1:]...)
			break
		}
	}
	if len(ts) == 0 {
		delete(x.tools, k)
	} else {
		x.tools[k] = ts
	}
	if t.agent.lastTool == t {
		t.agent.lastTool = nil
	}
	s := x.span(t.spanID, t.agent.spanID, "execute_tool "+t.name, kindInternal)
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.times(t.start, t.end, t.finished)
	args := argsText(t.args)
	isError := t.isError || (t.result != nil && t.result.IsError)
	attrs := []*commonpb.KeyValue{
		str("gen_ai.operation.name", "execute_tool"),
		str("gen_ai.tool.name", t.name),
		str("gen_ai.tool.call.id", t.callID),
		str("gen_ai.tool.type", "function"),
	}
	if d := x.team.tools[t.agent.name][t.name]; d != "" {
		attrs = append(attrs, str("gen_ai.tool.description", d))
	}
	attrs = append(attrs, str("gen_ai.tool.call.arguments", args))
	if t.result != nil && !isError {
		attrs = append(attrs, str("gen_ai.tool.call.result", t.result.Content))
	}
	if x.opts.OpenInference {
		attrs = append(attrs, str("openinference.span.kind", "TOOL"), str("session.id", x.head.Session.ID),
			str("tool.name", t.name), str("input.value", args), str("input.mime_type", "application/json"))
		if t.result != nil {
			attrs = append(attrs, str("output.value", t.result.Content), str("output.mime_type", "text/plain"))
		}
	}
	if t.result != nil && t.result.Kind != "" {
		attrs = append(attrs, str("delegation.result_kind", t.result.Kind))
	}
	if t.childID != "" {
		attrs = append(attrs, str("delegation.child_id", t.childID))
	}
	switch {
	case isError:
		attrs = append(attrs, str("error.type", "tool_error"))
		msg := ""
		if t.result != nil {
			msg = t.result.Content
		}
		s.Status = &tracepb.Status{Code: statusError, Message: msg}
	case t.finished:
		s.Status = &tracepb.Status{Code: statusOK}
	}
	s.Attributes = attrs
	s.Events = t.events
	return x.write(s)
}
