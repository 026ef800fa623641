package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// render writes a templ component as the response.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response().Writer)
}

// previewLen is how much of a message body a page shows before "show all":
// long bodies load when opened, so a long session's page stays light.
const previewLen = 600

// filePreview is how much of a file the files list shows.
const filePreview = 400

// pageData draws a session's views from its page state (the fold of its
// log) and a read of its store at the same seq: the state says what is
// there and where, the reader brings only the rows shown. The first render
// and every live patch are drawn by it.
type pageData struct {
	ctx context.Context
	st  *view.State
	rd  db.PageReader
	// wholeContexts shows every message of a context, for a call's own page.
	wholeContexts bool
}

// choice is what a viewer of a session page asked to see: from its URL.
type choice struct {
	Agent       string // the delegation to show ("" for the first)
	Step        int    // the scrubber's step (0: follow the newest)
	TimelineAll bool
}

func choiceOf(c echo.Context) choice {
	return choice{Agent: c.QueryParam("agent"), Step: atoiDefault(c.QueryParam("step"), 0), TimelineAll: c.QueryParam("timeline") == "all"}
}

func (p *pageData) sid() string { return p.rd.Session().ID }

func (p *pageData) agentName(id string) string {
	if a := p.st.Agent(id); a != nil {
		return a.Name
	}
	return id
}

func (p *pageData) messageURL(id string) string { return "/sessions/" + p.sid() + "/messages/" + id }

func (p *pageData) messageView(m db.Message) templates.MessageView {
	v := templates.MessageView{ID: m.ID, AgentID: m.AgentID, Index: m.Index, Role: m.Role, Kind: m.Kind,
		IsError: m.IsError, Tokens: m.Tokens, URL: p.messageURL(m.ID)}
	if m.ToolCallID != nil {
		v.ToolCallID = *m.ToolCallID
	}
	v.Preview, v.More = preview(m.Content, previewLen)
	// A fork's opening message is the fixed preamble, then its task: the
	// preview names the preamble and shows the task, which is what differs.
	if rest, ok := strings.CutPrefix(m.Content, delegation.ForkPreamble); ok && m.Kind == string(delegation.KindForkPreamble) {
		v.Preview, _ = preview(fmt.Sprintf("[the fork preamble, %d characters] %s", utf8.RuneCountInString(delegation.ForkPreamble), rest), previewLen)
		v.More = true
	}
	v.Reasoning, _ = preview(m.Reasoning, previewLen) // whole on the message page
	for _, tc := range m.ToolCalls {
		args, _ := preview(readableJSON(tc.Args), 300)
		v.ToolCalls = append(v.ToolCalls, templates.ToolCallView{ID: tc.ID, Name: tc.Name, Args: args})
	}
	return v
}

// mark is how a message shows in the parent pane of the delegation with
// task call taskCallID: its call, its receipt, or neither.
func mark(v *templates.MessageView, taskCallID string) {
	if taskCallID == "" {
		return
	}
	for _, tc := range v.ToolCalls {
		if tc.ID == taskCallID {
			v.Mark = "call"
		}
	}
	if v.ToolCallID == taskCallID && v.Role == string(delegation.RoleTool) {
		v.Mark = "receipt"
	}
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

// timelineRow is a stored model call as a row of the timeline.
func (p *pageData) timelineRow(c db.CallRow) templates.TimelineRow {
	r := templates.TimelineRow{CallID: c.ID, AgentID: c.AgentID, AgentName: p.agentName(c.AgentID), Purpose: c.Purpose,
		Index: c.Index, Step: c.Step, InputTokens: c.InputTokens, DurationMS: c.DurationMS, Error: c.Error, StartedAt: c.StartedAt}
	if a := p.st.Agent(c.AgentID); a != nil {
		r.Depth = min(a.Depth, 1)
	}
	if c.Usage != nil {
		r.Reported = c.Usage.PromptTokens
	}
	r.Cache = cacheView(c.ModelCall)
	if run := p.st.Running[c.ID]; run != nil {
		r.Running, r.Stream = true, run.Stream
		if r.Step == 0 {
			r.Step = run.Step
		}
		return r
	}
	if out := c.Output; out != nil {
		r.OutputTokens = out.Tokens
		r.Output = view.Excerpt(out.Content, 160)
		for _, tc := range out.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, tc.Name+" "+view.Excerpt(readableJSON(tc.Args), 80))
		}
	}
	return r
}

// cacheView is what a prompt cache can serve of a stored call, the
// endpoint's figure beside it, and the call's cost.
func cacheView(c trace.ModelCall) templates.CacheView {
	v := templates.CacheView{Cached: c.CachedPrefixTokens, Input: c.InputTokens}
	if u := c.Usage; u != nil {
		v.Reported, v.ReportedCache = true, u.CachedTokens
	}
	if c.Cost != nil {
		v.Cost, v.CostBasis = view.Dollars(c.Cost.Total), costBasis(c.Cost.Basis)
	}
	return v
}

func costBasis(b string) string {
	if b == delegation.BasisUsage {
		return "endpoint's reported usage"
	}
	return "studio's count, its cached prefix as cached input"
}

// markCached says what of a context is in its call's cached prefix, which
// covers whole elements in order: the tools, the system prompt, then its
// first messages.
func markCached(v *templates.ContextView, cached int) {
	if cached <= 0 {
		return
	}
	v.ToolsCached = cached >= v.ToolTokens
	v.SystemCached = cached >= v.ToolTokens+v.SystemTokens
	v.CachedMessageTokens = max(cached-v.ToolTokens-v.SystemTokens, 0)
}

// totals counts the session so far, for its head.
func totals(st *view.State) templates.TotalsView {
	t := templates.TotalsView{Agents: len(st.Agents), Calls: st.Calls, Tokens: st.Tokens, Cached: st.Cached}
	if st.Cost.Priced() {
		t.Cost = view.Dollars(st.Cost.Total)
	}
	return t
}

// timeline is the timeline's rows: every call, or the head and tail of a
// long session around a gap.
func (p *pageData) timeline(all bool) ([]templates.TimelineRow, error) {
	n := p.st.Calls
	w := view.TimelineWindow
	from, to := w.Gap(n)
	if all {
		from, to = n, n
	}
	head, err := p.rd.CallsHead(p.ctx, from)
	if err != nil {
		return nil, err
	}
	var rows []templates.TimelineRow
	for _, c := range head {
		rows = append(rows, p.timelineRow(c))
	}
	if to > from {
		rows = append(rows, p.timelineGap(n))
		tail, err := p.rd.CallsTail(p.ctx, n-to, n)
		if err != nil {
			return nil, err
		}
		for _, c := range tail {
			rows = append(rows, p.timelineRow(c))
		}
	}
	return rows, nil
}

func (p *pageData) timelineGap(n int) templates.TimelineRow {
	from, to := view.TimelineWindow.Gap(n)
	return templates.TimelineRow{Gap: to - from, GapURL: "/sessions/" + p.sid() + "?timeline=all#timeline"}
}

// rangeViews makes the views of the messages of ranges shown through a
// window: those of the head and the tail, read by primary key, and a gap
// for the rest (linking to url when there is one).
func (p *pageData) rangeViews(rs []delegation.Range, w view.Window, url string, inherited bool, taskCallID string) ([]templates.MessageView, error) {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	gapFrom, gapTo := w.Gap(n)
	if p.wholeContexts {
		gapFrom, gapTo = n, n
	}
	out, err := p.spanViews(rs, 0, gapFrom, inherited, taskCallID)
	if err != nil || gapTo == gapFrom {
		return out, err
	}
	out = append(out, templates.MessageView{Gap: gapTo - gapFrom, URL: url, Inherited: inherited})
	tail, err := p.spanViews(rs, gapTo, n, inherited, taskCallID)
	return append(out, tail...), err
}

// spanViews makes the views of positions [lo, hi) of the ranges, end to end.
func (p *pageData) spanViews(rs []delegation.Range, lo, hi int, inherited bool, taskCallID string) ([]templates.MessageView, error) {
	var out []templates.MessageView
	pos := 0
	for _, r := range rs {
		if a, b := max(lo, pos), min(hi, pos+r.Len()); a < b {
			msgs, err := p.rd.Messages(p.ctx, r.AgentID, r.From+a-pos, r.From+b-pos)
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				v := p.messageView(m)
				v.Inherited = inherited
				mark(&v, taskCallID)
				out = append(out, v)
			}
		}
		pos += r.Len()
	}
	return out, nil
}

// keyAt names position i of the ranges, end to end, on the page.
func keyAt(rs []delegation.Range, i int) string {
	for _, r := range rs {
		if i < r.Len() {
			return r.AgentID + ":" + strconv.Itoa(r.From+i)
		}
		i -= r.Len()
	}
	return ""
}

// contextView is what a context holds, message by message: a pane of a
// delegation, or (whole) a call's page.
func (p *pageData) contextView(agentID string, cx view.Context, taskCallID string) (templates.ContextView, error) {
	v := templates.ContextView{AgentID: agentID, AgentName: p.agentName(agentID), TaskCallID: taskCallID}
	a := p.st.Agent(agentID)
	if a == nil {
		v.NotStarted = true
		return v, nil
	}
	v.System, v.SystemTokens, v.Mode = a.SystemPrompt, a.SystemTokens, a.Mode
	for _, t := range a.Tools {
		v.Tools = append(v.Tools, templates.ToolView{Name: t.Name, Tokens: t.Tokens})
		v.ToolTokens += t.Tokens
	}
	url := ""
	if cx.Call != nil {
		v.HasCall, v.CallID, v.CallIndex, v.InputTokens = true, cx.Call.ID, cx.Call.Index, cx.Call.InputTokens
		v.InheritedTokens = cx.Call.InheritedTokens
		url = "/sessions/" + p.sid() + "/calls/" + cx.Call.ID
	}
	inherited, own := cx.Split(agentID)
	for _, r := range inherited {
		v.InheritedCount += r.Len()
	}
	var err error
	if v.Inherited, err = p.rangeViews(inherited, view.PaneWindow, url, true, taskCallID); err != nil {
		return v, err
	}
	if v.Messages, err = p.rangeViews(own, view.PaneWindow, url, false, taskCallID); err != nil {
		return v, err
	}
	if cx.Call != nil {
		v.Cache = templates.CacheView{Cached: cx.Call.CachedTokens, Input: cx.Call.InputTokens}
		markCached(&v, cx.Call.CachedTokens)
	}
	return v, nil
}

// pane is one side of a delegation as the page shows it.
func (p *pageData) pane(pn view.Pane) (templates.ContextView, error) {
	v, err := p.contextView(pn.AgentID, p.st.PaneContext(pn), pn.TaskCallID)
	v.PaneID = pn.ID()
	if a := p.st.Agent(pn.AgentID); a != nil && pn.Kind == view.PaneChild {
		v.Prefix = p.st.Prefix(a)
	}
	if d := p.st.Delegation(pn.Delegation); pn.Kind == view.PaneChild || (d != nil && d.Frozen == nil) {
		if p.st.Agent(pn.AgentID) != nil {
			v.Follows = pn.AgentID
		}
	}
	return v, err
}

// delegationView puts a delegation side by side.
func (p *pageData) delegationView(d *view.Delegation) (*templates.DelegationView, error) {
	v := &templates.DelegationView{ChildID: d.ChildID, ChildName: d.SubagentType, Mode: d.Mode, Task: d.Task}
	if a := p.st.Agent(d.ChildID); a != nil {
		v.ChildName, v.Status = a.Name, a.Status
	}
	parent, child := p.st.PanesOf(d)
	var err error
	if v.Parent, err = p.pane(parent); err != nil {
		return nil, err
	}
	if v.Child, err = p.pane(child); err != nil {
		return nil, err
	}
	if v.CameBack, err = p.cameBack(d); err != nil {
		return nil, err
	}
	v.HeldBack = p.heldBack(d)
	return v, nil
}

// heldBack is what of a delegation stayed in the child, its todos as it
// last wrote them.
func (p *pageData) heldBack(d *view.Delegation) templates.HeldBackView {
	v := templates.HeldBackView{ChildID: d.ChildID, Finished: d.Finished, Held: d.HeldBack}
	if a := p.st.Agent(d.ChildID); a != nil {
		for _, t := range a.Todos {
			v.Todos = append(v.Todos, templates.TodoView{Content: t.Content, Status: t.Status})
		}
	}
	return v
}

func (p *pageData) cameBack(d *view.Delegation) (templates.CameBackView, error) {
	v := templates.CameBackView{ChildID: d.ChildID, Finished: d.Finished, FilesBack: d.FilesBack, FilesBackCount: d.FilesBackCount}
	if a := p.st.Agent(d.ChildID); a != nil {
		v.ChildStatus = a.Status
		v.EntryTokens, v.EntryCached = a.EntryTokens, a.EntryCached
		var cost view.Money
		v.ChildInputTotal, v.ChildCachedSum, cost = p.st.Subtree(a.ID)
		if cost.Priced() {
			v.ChildCost = view.Dollars(cost.Total)
		}
		sv := p.st.Saving(d)
		v.KeptPerCall, v.LaterCalls, v.KeptTokens = sv.PerCall, d.LaterCalls, sv.Tokens
		if sv.Priced {
			v.KeptCost = view.Dollars(sv.Cost)
		}
	}
	if r := d.Receipt; r != nil {
		m, err := p.rd.MessageAt(p.ctx, r.AgentID, r.Index)
		if err != nil {
			return v, err
		}
		if m != nil {
			mv := p.messageView(*m)
			v.Receipt = &mv
			v.ReceiptEmpty = r.Empty && !r.IsError
		}
	}
	return v, nil
}

// delegationPanel is the delegation panel for a viewer who asked for agent.
func (p *pageData) delegationPanel(agent string) (templates.DelegationPanel, error) {
	v := templates.DelegationPanel{SessionID: p.sid(), Show: agent}
	var d *view.Delegation
	if agent == "" {
		if len(p.st.Delegations) > 0 {
			d = p.st.Delegations[0] // the first, until the user picks another
		}
	} else {
		d = p.st.Delegation(agent)
	}
	if d != nil {
		var err error
		v.Selected, err = p.delegationView(d)
		return v, err
	}
	v.Children = p.pickPanel().Children
	return v, nil
}

// pickPanel is the delegation panel of a viewer who asked for no delegation
// there is: the list of those there are.
func (p *pageData) pickPanel() templates.DelegationPanel {
	v := templates.DelegationPanel{SessionID: p.sid()}
	for _, dl := range p.st.Delegations {
		v.Children = append(v.Children, pickOption(p.st, dl))
	}
	return v
}

func pickOption(st *view.State, d *view.Delegation) templates.LessonOption {
	name := d.SubagentType
	if a := st.Agent(d.ChildID); a != nil {
		name = a.Name
	}
	return templates.LessonOption{Name: d.ChildID, Title: name + " (" + d.ChildID + ")"}
}

// shown is the delegation a panel shows, the tree's selected node: the one
// asked for, or the first ("" when it shows none).
func (p *pageData) shown(agent string) string {
	if agent == "" && len(p.st.Delegations) > 0 {
		return p.st.Delegations[0].ChildID
	}
	if p.st.Delegation(agent) != nil {
		return agent
	}
	return ""
}

// scrub is every agent's context at model call number step (from 1), which
// stays put as calls come; 0 (or a step not made yet) is the newest call,
// which the scrubber then follows.
func (p *pageData) scrub(step int) (templates.ScrubView, error) {
	n := p.st.Calls
	v := templates.ScrubView{Steps: n}
	if n == 0 {
		v.Follow = true
		return v, nil
	}
	if step < 1 || step > n {
		v.Step, v.Follow = n, true
		var cur *view.Agent
		for _, a := range p.st.Agents {
			if a.Last != nil && a.Last.Step == n {
				cur = a
			}
		}
		for _, a := range p.st.Agents {
			sa := templates.ScrubAgent{AgentID: a.ID, Name: a.Name, Current: a == cur, NotStarted: a.Last == nil}
			if a.Last != nil {
				sa.Calls, sa.Messages, sa.Tokens = a.Calls, a.Last.Messages, a.Last.InputTokens
			}
			v.Agents = append(v.Agents, sa)
		}
		if cur != nil {
			v.CallAgent, v.CallIndex = cur.Name, cur.Last.Index
		}
		return v, nil
	}
	v.Step = step
	at, err := p.rd.CallsFrom(p.ctx, step, step+1)
	if err != nil || len(at) == 0 {
		return v, err
	}
	cur := at[0]
	v.CallAgent, v.CallIndex = p.agentName(cur.AgentID), cur.Index
	for _, a := range p.st.Agents {
		sa := templates.ScrubAgent{AgentID: a.ID, Name: a.Name, Current: a.ID == cur.AgentID, NotStarted: true}
		last, err := p.rd.LatestCall(p.ctx, a.ID, cur.Seq)
		if err != nil {
			return v, err
		}
		if last != nil {
			sa.NotStarted = false
			sa.Calls, sa.Tokens = last.Index+1, last.InputTokens
			for _, r := range last.Context {
				sa.Messages += r.Len()
			}
		}
		v.Agents = append(v.Agents, sa)
	}
	return v, nil
}

// files is the first page of main's files, or the page after a path.
func (p *pageData) files(after string) (templates.FilesView, error) {
	v := templates.FilesView{SessionID: p.sid(), Count: p.st.Files.Count()}
	rows, err := p.rd.Files(p.ctx, after, view.FilesPage+1, filePreview)
	if err != nil {
		return v, err
	}
	if len(rows) > view.FilesPage {
		rows = rows[:view.FilesPage]
		v.Next = "/sessions/" + p.sid() + "/files?after=" + url.QueryEscape(rows[len(rows)-1].Path)
	}
	for _, f := range rows {
		v.Files = append(v.Files, fileView(f))
	}
	return v, nil
}

func fileView(f db.File) templates.FileView {
	pv := f.Preview
	if f.Size > len(pv) {
		// The store cut it at a byte count: not in the middle of a rune.
		for pv != "" && !utf8.ValidString(pv) {
			pv = pv[:len(pv)-1]
		}
		pv += "…"
	}
	return templates.FileView{Path: f.Path, Preview: pv, Size: f.Size}
}

// notes are the session's notes, those of a kind together, kinds in the
// order their first note was found.
func (p *pageData) notes() []templates.NoteGroup {
	var out []templates.NoteGroup
	at := map[string]int{}
	for _, n := range p.st.Notes {
		i, ok := at[n.Kind]
		if !ok {
			i = len(out)
			at[n.Kind] = i
			out = append(out, templates.NoteGroup{Kind: n.Kind})
		}
		out[i].Texts = append(out[i].Texts, n.Text)
	}
	return out
}

func (p *pageData) tree(selected string) view.TreeLayout {
	return view.Layout(p.st.Tree(), selected)
}

// sessionPage is the whole session page for a viewer's choice.
func (p *pageData) sessionPage(page templates.Page, ch choice, running bool) (templates.SessionPage, error) {
	st := p.st
	v := templates.SessionPage{Page: page, ID: st.Session.ID, Name: st.Session.Name, Title: st.Session.Title,
		Prompt: st.Session.Prompt, Status: st.Session.Status, Error: st.Session.Error, Tokenizer: st.Session.Tokenizer,
		CreatedAt: st.Session.CreatedAt, Running: running, Answer: st.Session.Answer, LastSeq: st.Seq,
		Agents: len(st.Agents), Calls: st.Calls, Tokens: st.Tokens, Totals: totals(st), TimelineAll: ch.TimelineAll, Notes: p.notes()}
	v.Tree = p.tree(p.shown(ch.Agent))
	var err error
	if v.Delegation, err = p.delegationPanel(ch.Agent); err != nil {
		return v, err
	}
	if v.Timeline, err = p.timeline(ch.TimelineAll); err != nil {
		return v, err
	}
	if v.Scrub, err = p.scrub(ch.Step); err != nil {
		return v, err
	}
	if v.Files, err = p.files(""); err != nil {
		return v, err
	}
	v.Origin, v.Received = originLine(st.Session.Origin), st.Session.Origin.OriginKind() != delegation.OriginEngine
	v.Traced = st.Session.Origin.OriginKind() == delegation.OriginOTLP
	if v.Received {
		spans, err := p.rd.EventsOfType(p.ctx, delegation.EventSpanReceived)
		if err != nil {
			return v, err
		}
		for _, ev := range spans {
			if r, ok := spanRow(ev); ok {
				v.Spans = append(v.Spans, r)
			}
		}
	}
	return v, nil
}

// originLine says, for a person, where a session came from: the studio's
// engine, or someone else's program and what it said of itself.
func originLine(o *delegation.Origin) string {
	switch o.OriginKind() {
	case delegation.OriginEngine:
		return "the studio's engine"
	case delegation.OriginProxy:
		line := "the recording endpoint: " + orText(o.Service, "an OpenAI-compatible client")
		if o.Upstream != "" {
			line += " · answered by " + o.Upstream
		}
		return line
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
	d, err := delegation.DataAs[delegation.SpanReceived](ev)
	if err != nil {
		return templates.SpanRow{}, false
	}
	return templates.SpanRow{SpanID: d.SpanID, ParentSpanID: d.ParentSpanID, Name: d.Name, Kind: d.Kind,
		DurationMS: d.DurationMS, Error: d.Error, Orphan: d.Orphan, Attributes: len(d.Attributes)}, true
}

// callPage is one model call's whole context, with its answer.
func (p *pageData) callPage(callID string) (templates.ContextView, bool, error) {
	c, err := p.rd.Call(p.ctx, callID)
	if err != nil || c == nil {
		return templates.ContextView{}, false, err
	}
	p.wholeContexts = true
	rs := c.Context
	if c.Output != nil {
		rs = append(rs, delegation.Range{AgentID: c.Output.AgentID, From: c.Output.Index, To: c.Output.Index + 1})
	}
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	ref := &view.CallRef{ID: c.ID, Index: c.Index, InputTokens: c.InputTokens, InheritedTokens: c.InheritedTokens, Messages: n}
	v, err := p.contextView(c.AgentID, view.Context{Ranges: rs, Call: ref}, "")
	return v, true, err
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
