package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/web/templates"
)

// render writes a templ component as the response.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response().Writer)
}

// A pane shows at most paneHead + paneTail messages of a context, and the
// timeline timelineHead + timelineTail calls; a link stands for the middle.
// The marked call and receipt are always recent, in the tail.
const (
	paneHead, paneTail         = 40, 260
	timelineHead, timelineTail = 100, 300
)

// previewLen is how much of a message body a page shows before "show all":
// long bodies load when opened, so a 10,000-message page stays light.
const previewLen = 600

// pageModel holds what every view of one session needs, computed once from
// its trace.
type pageModel struct {
	t      *trace.Trace
	tree   *session.Node
	nodes  map[string]*session.Node
	lists  map[string][]trace.Message
	byID   map[string]*trace.Message
	agents map[string]*trace.Agent
	// wholeContexts shows every message of a context, for a call's own page.
	wholeContexts bool
	// lastSeq is the session's last stored seq: where a live page resumes.
	lastSeq int64
}

func newPageModel(t *trace.Trace) *pageModel {
	m := &pageModel{t: t, tree: session.Tree(t), nodes: map[string]*session.Node{}, lists: session.Lists(t),
		byID: map[string]*trace.Message{}, agents: map[string]*trace.Agent{}}
	for i := range t.Messages {
		m.byID[t.Messages[i].ID] = &t.Messages[i]
	}
	for i := range t.Agents {
		m.agents[t.Agents[i].ID] = &t.Agents[i]
	}
	var walk func(n *session.Node)
	walk = func(n *session.Node) {
		if n == nil {
			return
		}
		m.nodes[n.Agent.ID] = n
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(m.tree)
	return m
}

func (m *pageModel) agentName(id string) string {
	if a := m.agents[id]; a != nil {
		return a.Name
	}
	return id
}

func (m *pageModel) depth(id string) int {
	d := 0
	for a := m.agents[id]; a != nil && a.ParentID != nil; a = m.agents[*a.ParentID] {
		d++
	}
	return d
}

func messageView(sessionID string, msg trace.Message) templates.MessageView {
	v := templates.MessageView{ID: msg.ID, AgentID: msg.AgentID, Role: msg.Role, Kind: msg.Kind,
		IsError: msg.IsError, Tokens: msg.Tokens, URL: "/sessions/" + sessionID + "/messages/" + msg.ID}
	if msg.ToolCallID != nil {
		v.ToolCallID = *msg.ToolCallID
	}
	v.Preview, v.More = preview(msg.Content, previewLen)
	// A fork's opening message is the fixed preamble, then its task: the
	// preview names the preamble and shows the task, which is what differs.
	if rest, ok := strings.CutPrefix(msg.Content, delegation.ForkPreamble); ok && msg.Kind == string(delegation.KindForkPreamble) {
		v.Preview, _ = preview(fmt.Sprintf("[the fork preamble, %d characters] %s", utf8.RuneCountInString(delegation.ForkPreamble), rest), previewLen)
		v.More = true
	}
	v.Reasoning, _ = preview(msg.Reasoning, previewLen) // whole on the message page
	for _, tc := range msg.ToolCalls {
		args, _ := preview(readableJSON(tc.Args), 300)
		v.ToolCalls = append(v.ToolCalls, templates.ToolCallView{ID: tc.ID, Name: tc.Name, Args: args})
	}
	return v
}

// readableJSON writes JSON without the \u003c-style escapes Go's encoder
// adds for HTML: the page escapes everything itself.
func readableJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func preview(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 { // not in the middle of a UTF-8 rune
		cut--
	}
	return s[:cut] + "…", true
}

// timelineRow is a model call as a row of the timeline.
func (m *pageModel) timelineRow(c trace.ModelCall) templates.TimelineRow {
	r := templates.TimelineRow{CallID: c.ID, AgentID: c.AgentID, AgentName: m.agentName(c.AgentID), Purpose: c.Purpose,
		Index: c.Index, Depth: min(m.depth(c.AgentID), 1), InputTokens: c.InputTokens, DurationMS: c.DurationMS, Error: c.Error,
		StartedAt: c.StartedAt}
	if c.Usage != nil {
		r.Reported = c.Usage.PromptTokens
	}
	if c.OutputMessageID != nil {
		if out := m.byID[*c.OutputMessageID]; out != nil {
			r.OutputTokens = out.Tokens
			r.Output = session.Excerpt(out.Content, 160)
			for _, tc := range out.ToolCalls {
				r.ToolCalls = append(r.ToolCalls, tc.Name+" "+session.Excerpt(readableJSON(tc.Args), 80))
			}
		}
	} else if c.Error == "" && c.Purpose != string(delegation.PurposeSummary) {
		r.Running = m.t.Session.Status == delegation.StatusRunning
	}
	return r
}

// contextView is what an agent's model call received, message by message;
// out, when set, is the call's answer, shown after it.
func (m *pageModel) contextView(agentID string, call *trace.ModelCall, msgs []trace.Message) templates.ContextView {
	a := m.agents[agentID]
	v := templates.ContextView{AgentID: agentID, AgentName: m.agentName(agentID)}
	if a != nil {
		v.System, v.SystemTokens = a.SystemPrompt, a.SystemTokens
		if a.Mode != nil {
			v.Mode = *a.Mode
		}
		v.Live = a.Status == delegation.StatusRunning
		for _, t := range a.Tools {
			v.Tools = append(v.Tools, templates.ToolView{Name: t.Name, Tokens: t.Tokens})
			v.ToolTokens += t.Tokens
		}
	}
	if call != nil {
		v.CallIndex, v.InputTokens = call.Index, call.InputTokens
	}
	var inherited, own []trace.Message
	for _, msg := range msgs {
		if msg.AgentID != agentID {
			v.InheritedCount++
			v.InheritedTokens += msg.Tokens
			inherited = append(inherited, msg)
		} else {
			own = append(own, msg)
		}
	}
	url := ""
	if call != nil && !m.wholeContexts {
		url = "/sessions/" + m.t.Session.ID + "/calls/" + call.ID
	}
	// Views are made only for the messages shown: a long context keeps its
	// head and tail, and a gap links to the whole of it.
	v.Messages = append(m.messageViews(inherited, url, true), m.messageViews(own, url, false)...)
	return v
}

// messageViews makes the views of a list of messages; with a url, a long
// list keeps only its head and tail around a gap that links to the whole.
func (m *pageModel) messageViews(msgs []trace.Message, url string, inherited bool) []templates.MessageView {
	view := func(msg trace.Message) templates.MessageView {
		mv := messageView(m.t.Session.ID, msg)
		mv.Inherited = inherited
		return mv
	}
	var out []templates.MessageView
	if url == "" || len(msgs) <= paneHead+paneTail+1 {
		for _, msg := range msgs {
			out = append(out, view(msg))
		}
		return out
	}
	for _, msg := range msgs[:paneHead] {
		out = append(out, view(msg))
	}
	out = append(out, templates.MessageView{Gap: len(msgs) - paneHead - paneTail, URL: url, Inherited: inherited})
	for _, msg := range msgs[len(msgs)-paneTail:] {
		out = append(out, view(msg))
	}
	return out
}

// lastCall is an agent's newest turn call, or nil.
func (m *pageModel) lastCall(agentID string) *trace.ModelCall {
	var last *trace.ModelCall
	for i := range m.t.ModelCalls {
		if c := &m.t.ModelCalls[i]; c.AgentID == agentID && c.Purpose != string(delegation.PurposeSummary) {
			last = c
		}
	}
	return last
}

// delegationView puts a delegation side by side: the parent's context as
// it held the receipt (its call and the receipt marked) and the child's
// context at its last call, with its answer.
func (m *pageModel) delegationView(childID string) *templates.DelegationView {
	node := m.nodes[childID]
	a := m.agents[childID]
	if node == nil || a == nil || a.ParentID == nil || a.TaskCallID == nil {
		return nil
	}
	parentID, callID := *a.ParentID, *a.TaskCallID
	d := &templates.DelegationView{ChildID: childID, ChildName: a.Name, Status: a.Status, Task: node.Task}
	if a.Mode != nil {
		d.Mode = *a.Mode
	}

	// The parent: the first call of its that saw the receipt; before the
	// receipt exists, its messages so far.
	var receipt *trace.Message
	receiptIdx := -1
	for i, msg := range m.lists[parentID] {
		if msg.ToolCallID != nil && *msg.ToolCallID == callID {
			receipt, receiptIdx = &m.lists[parentID][i], i
		}
	}
	var parentCall *trace.ModelCall
	parentMsgs := m.lists[parentID]
	if receipt != nil {
		for i := range m.t.ModelCalls {
			if c := &m.t.ModelCalls[i]; c.AgentID == parentID && session.Covers(*c, parentID, receiptIdx) {
				parentCall, parentMsgs = c, append(session.ContextOf(m.lists, *c), outputOf(m, c)...)
				break
			}
		}
	}
	d.Parent = m.contextView(parentID, parentCall, parentMsgs)
	for i := range d.Parent.Messages {
		mv := &d.Parent.Messages[i]
		for _, tc := range mv.ToolCalls {
			if tc.ID == callID {
				mv.Mark = "call"
			}
		}
		if mv.ToolCallID == callID && mv.Role == string(delegation.RoleTool) {
			mv.Mark = "receipt"
		}
	}

	// The child: its last call's context, then that call's answer.
	var childMsgs []trace.Message
	childCall := m.lastCall(childID)
	if childCall != nil {
		childMsgs = append(session.ContextOf(m.lists, *childCall), outputOf(m, childCall)...)
	} else {
		childMsgs = m.lists[childID]
	}
	d.Child = m.contextView(childID, childCall, childMsgs)

	if receipt != nil {
		rv := messageView(m.t.Session.ID, *receipt)
		d.Receipt = &rv
		d.ReceiptEmpty = receipt.Content == "" && !receipt.IsError
	}
	for _, ev := range m.t.Events {
		switch ev.Type {
		case delegation.EventDelegationFinished:
			var f delegation.DelegationFinished
			if json.Unmarshal(ev.Data, &f) == nil && f.ChildID == childID {
				d.Returned, d.HeldBack = f.Returned, f.HeldBack
			}
		case delegation.EventFilesChanged:
			var f delegation.FilesChanged
			if json.Unmarshal(ev.Data, &f) == nil && f.From == childID {
				for _, ch := range f.Changes {
					if ch.Deleted {
						d.FilesBack = append(d.FilesBack, ch.Path+" (deleted)")
					} else {
						d.FilesBack = append(d.FilesBack, ch.Path)
					}
				}
			}
		}
	}
	return d
}

func outputOf(m *pageModel, c *trace.ModelCall) []trace.Message {
	if c.OutputMessageID == nil {
		return nil
	}
	if out := m.byID[*c.OutputMessageID]; out != nil {
		return []trace.Message{*out}
	}
	return nil
}

// scrubView is every agent's context at model call number step (from 1).
func (m *pageModel) scrubView(step int) templates.ScrubView {
	calls := m.t.ModelCalls
	v := templates.ScrubView{Steps: len(calls)}
	if len(calls) == 0 {
		return v
	}
	if step < 1 || step > len(calls) {
		step = len(calls)
	}
	v.Step = step
	cur := calls[step-1]
	v.CallLabel = fmt.Sprintf("call %d of %d (%s #%d)", step, len(calls), m.agentName(cur.AgentID), cur.Index)
	for _, a := range m.t.Agents {
		sa := templates.ScrubAgent{AgentID: a.ID, Name: a.Name, Current: a.ID == cur.AgentID, NotStarted: true}
		for _, c := range calls[:step] {
			if c.AgentID != a.ID {
				continue
			}
			sa.NotStarted = false
			sa.Calls++
			sa.Messages, sa.Tokens = 0, c.InputTokens
			for _, r := range c.Context {
				sa.Messages += r.Len()
			}
		}
		v.Agents = append(v.Agents, sa)
	}
	return v
}

func (m *pageModel) files() []templates.FileView {
	var out []templates.FileView
	for _, p := range trace.SortedPaths(m.t.Files) {
		c := m.t.Files[p]
		pv, _ := preview(c, 400)
		out = append(out, templates.FileView{Path: p, Preview: pv, Size: len(c)})
	}
	return out
}

// answer is the main agent's final text, by the receipt rule.
func (m *pageModel) answer() string {
	list := m.lists["main"]
	for i := len(list) - 1; i >= 0; i-- {
		if msg := list[i]; msg.Role == string(delegation.RoleAssistant) && strings.TrimSpace(msg.Content) != "" {
			return strings.TrimRight(msg.Content, " \t\r\n")
		}
	}
	return ""
}

func (m *pageModel) totals() (agents, calls, tokens int) {
	for _, c := range m.t.ModelCalls {
		tokens += c.InputTokens
	}
	return len(m.t.Agents), len(m.t.ModelCalls), tokens
}

// sessionPage is the whole session page.
func (m *pageModel) sessionPage(page templates.Page, selected string, step int, running, allTimeline bool) templates.SessionPage {
	t := m.t
	v := templates.SessionPage{Page: page, ID: t.Session.ID, Name: t.Session.Name, Title: t.Session.Title,
		Prompt: t.Session.Prompt, Status: t.Session.Status, Error: t.Session.Error, Tokenizer: t.Session.Tokenizer,
		CreatedAt: t.Session.CreatedAt, Running: running, Files: m.files(), Answer: m.answer()}
	v.LastSeq = m.lastSeq
	v.Agents, v.Calls, v.Tokens = m.totals()
	for _, a := range t.Agents {
		if a.ParentID != nil {
			v.Children = append(v.Children, templates.LessonOption{Name: a.ID, Title: a.Name + " (" + a.ID + ")"})
			if selected == "" {
				selected = a.ID // the first delegation, until the user picks another
			}
		}
	}
	v.Tree = session.Layout(m.tree, selected)
	if selected != "" {
		v.Selected = m.delegationView(selected)
	}
	calls := t.ModelCalls
	if !allTimeline && len(calls) > timelineHead+timelineTail+1 {
		for _, c := range calls[:timelineHead] {
			v.Timeline = append(v.Timeline, m.timelineRow(c))
		}
		v.Timeline = append(v.Timeline, templates.TimelineRow{Gap: len(calls) - timelineHead - timelineTail,
			GapURL: "/sessions/" + t.Session.ID + "?timeline=all#timeline"})
		calls = calls[len(calls)-timelineTail:]
	}
	for _, c := range calls {
		v.Timeline = append(v.Timeline, m.timelineRow(c))
	}
	v.Scrub = m.scrubView(step)
	v.Origin, v.Received = originLine(t.Session.Origin), t.Session.Origin.OriginKind() != delegation.OriginEngine
	for _, ev := range t.Events {
		if ev.Type == delegation.EventSpanReceived {
			if r, ok := spanRow(ev); ok {
				v.Spans = append(v.Spans, r)
			}
		}
	}
	if t.Session.Status != delegation.StatusRunning {
		for _, n := range session.Notes(t) {
			v.Notes = append(v.Notes, n.Text)
		}
	}
	return v
}

// originLine says, for a person, where a session came from: the studio's
// engine, or someone else's program and what it said of itself.
func originLine(o *delegation.Origin) string {
	switch o.OriginKind() {
	case delegation.OriginEngine:
		return "the studio's engine"
	case delegation.OriginProxy:
		return "the recording endpoint: " + orText(o.Service, "an OpenAI-compatible client")
	}
	parts := []string{"an OTLP trace"}
	if o.Service != "" {
		parts = append(parts, "from "+o.Service)
	}
	switch o.Convention {
	case "openinference":
		parts = append(parts, "OpenInference spans")
	case "genai":
		parts = append(parts, "OpenTelemetry GenAI spans")
	}
	if len(o.Instrumentation) > 0 {
		parts = append(parts, "instrumented by "+strings.Join(o.Instrumentation, ", "))
	}
	if o.SDK != "" {
		parts = append(parts, "SDK "+o.SDK)
	}
	if o.TraceID != "" {
		parts = append(parts, "trace "+o.TraceID)
	}
	return strings.Join(parts, " · ")
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// spanRow is a span.received event as a row.
func spanRow(ev delegation.Event) (templates.SpanRow, bool) {
	var d delegation.SpanReceived
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return templates.SpanRow{}, false
	}
	return templates.SpanRow{SpanID: d.SpanID, ParentSpanID: d.ParentSpanID, Name: d.Name, Kind: d.Kind,
		DurationMS: d.DurationMS, Error: d.Error, Orphan: d.Orphan, Attributes: len(d.Attributes)}, true
}

// callPage is one model call's whole context.
func (m *pageModel) callPage(callID string) (templates.ContextView, bool) {
	for i := range m.t.ModelCalls {
		if c := &m.t.ModelCalls[i]; c.ID == callID {
			m.wholeContexts = true
			return m.contextView(c.AgentID, c, append(session.ContextOf(m.lists, *c), outputOf(m, c)...)), true
		}
	}
	return templates.ContextView{}, false
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
