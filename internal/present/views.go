package present

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a-h/templ"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// previewLen is how much of a message body a page shows before "show all":
// long bodies load when opened, so a long session's page stays light.
const previewLen = 600

// filePreview is how much of a file the files list shows.
const filePreview = 400

// Page draws a session's views from its page state (the fold of its
// log) and a read of its store at the same seq: the state says what is
// there and where, the reader brings only the rows shown. The first render
// and every live patch are drawn by it.
type Page struct {
	ctx context.Context
	st  *view.State
	rd  db.PageReader
	// wholeContexts shows every message of a context, for a call's own page.
	wholeContexts bool
	// inheritedOnly draws a pane's inherited messages alone, which a pane
	// otherwise loads when they are opened (InheritedURL).
	inheritedOnly bool
	// countsOnly draws a pane's counts and its gaps, reading none of its
	// messages: for the patches of a pane whose call changed.
	countsOnly bool
	// counts are the agents' counters at the page's step, once read.
	counts map[string]db.AgentCounts
	// started are the model calls a batch's patches started, once read.
	started     []db.CallRow
	startedRead bool
}

// startedCalls are the model calls that started in the batch ch describes,
// in order, read once for every panel that draws them.
func (p *Page) startedCalls(ch view.Changes) ([]db.CallRow, error) {
	if !p.startedRead && len(ch.Appended) > 0 && p.st.Calls > ch.CallsBefore {
		rows, err := p.rd.CallsTail(p.ctx, p.st.Calls-ch.CallsBefore, p.st.Calls)
		if err != nil {
			return nil, err
		}
		p.started, p.startedRead = rows, true
	}
	return p.started, nil
}

// choice is what a viewer of a session page asked to see: from its URL.
type Choice struct {
	Agent       string // the agent to show ("" for the first delegation)
	Step        int    // the step the page shows (0: now, following the session)
	TimelineAll bool
}

func (p *Page) sid() string { return p.rd.Session().ID }

func (p *Page) agentName(id string) string {
	if a := p.st.Agent(id); a != nil {
		return a.Name
	}
	if d := p.st.Delegation(id); d != nil {
		return d.SubagentType // until the child starts
	}
	return id
}

func (p *Page) messageURL(id string) string { return templates.MessageURL(p.sid(), id) }

func (p *Page) MessageView(m db.Message) templates.MessageView {
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
	if m.Kind == string(delegation.KindSummary) && p.st != nil {
		v.Cut = p.cut(m.AgentID, m.Index)
	}
	if e := m.Evicted; e != nil {
		v.Evicted = &templates.EvictedView{Chars: e.Chars, TokensBefore: e.Tokens, TokensAfter: m.Tokens, FilePath: e.Path,
			FileURL: templates.FileURL(p.sid(), e.Path)}
	}
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
	// A fan-out's message holds many task calls: the pane shows this
	// delegation's, and counts the others.
	if v.Mark == "call" && len(v.ToolCalls) > 3 {
		var mine []templates.ToolCallView
		for _, tc := range v.ToolCalls {
			if tc.ID == taskCallID {
				mine = append(mine, tc)
			}
		}
		v.ToolCalls = append(mine, templates.ToolCallView{Others: len(v.ToolCalls) - len(mine)})
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

// cacheView is what a prompt cache can serve of a stored call, the
// endpoint's figure beside it, and the call's cost.
func cacheView(c trace.ModelCall) templates.CacheView {
	v := templates.CacheView{Cached: c.CachedPrefixTokens, Input: c.InputTokens}
	if u := c.Usage; u.CacheReported() {
		v.Reported, v.ReportedCache = true, u.CachedTokens
	}
	if c.Usage != nil {
		v.Written = c.Usage.CacheCreationTokens
	}
	if c.Cost != nil {
		v.Cost, v.CostBasis = view.Dollars(c.Cost.Total), costBasis(c.Cost.Basis)
		if c.Cost.CacheWrite > 0 {
			v.WriteCost = view.Dollars(c.Cost.CacheWrite)
		}
	}
	return v
}

// cacheWritten says what a call's endpoint wrote to its prompt cache, and
// what that cost at the cache-write surcharge where it was priced so.
func cacheWritten(lang *i18n.Lang, cv templates.CacheView) string {
	if cv.WriteCost != "" {
		return lang.T("sess.written_cost", "N", lang.Num(cv.Written), "Cost", cv.WriteCost)
	}
	return lang.T("sess.written", "N", lang.Num(cv.Written))
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

// rangeViews makes the views of the messages of ranges shown through a
// window: those of the head and the tail, read by primary key, and a gap
// for the rest (linking to url when there is one).
func (p *Page) rangeViews(rs []delegation.Range, w view.Window, url string, inherited bool, taskCallID string) ([]templates.MessageView, error) {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	gapFrom, gapTo := w.Gap(n)
	if p.wholeContexts {
		gapFrom, gapTo = n, n
	}
	if p.countsOnly {
		if gapTo == gapFrom {
			return nil, nil
		}
		return []templates.MessageView{{Gap: gapTo - gapFrom, GapFrom: gapFrom, URL: url, Inherited: inherited}}, nil
	}
	out, err := p.spanViews(rs, 0, gapFrom, inherited, taskCallID)
	if err != nil || gapTo == gapFrom {
		return out, err
	}
	out = append(out, templates.MessageView{Gap: gapTo - gapFrom, GapFrom: gapFrom, URL: url, Inherited: inherited})
	tail, err := p.spanViews(rs, gapTo, n, inherited, taskCallID)
	return append(out, tail...), err
}

// spanViews makes the views of positions [lo, hi) of the ranges, end to end.
func (p *Page) spanViews(rs []delegation.Range, lo, hi int, inherited bool, taskCallID string) ([]templates.MessageView, error) {
	var out []templates.MessageView
	pos := 0
	for _, r := range rs {
		if a, b := max(lo, pos), min(hi, pos+r.Len()); a < b {
			msgs, err := p.rd.Messages(p.ctx, r.AgentID, r.From+a-pos, r.From+b-pos)
			if err != nil {
				return nil, err
			}
			for _, m := range msgs {
				v := p.MessageView(m)
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
func (p *Page) contextView(agentID string, cx view.Context, taskCallID string) (templates.ContextView, error) {
	return p.contextFocused(agentID, cx, taskCallID, nil)
}

// contextFocused is contextView, its own messages folded around a
// delegation's two messages (its task call and its receipt) when d is one
// of the agent's delegations.
func (p *Page) contextFocused(agentID string, cx view.Context, taskCallID string, d *view.Delegation) (templates.ContextView, error) {
	v := templates.ContextView{SessionID: p.sid(), AgentID: agentID, AgentName: p.agentName(agentID), TaskCallID: taskCallID}
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
		v.InheritedTokens, v.Step = cx.Call.InheritedTokens, cx.Call.Step
		url = templates.CallURL(p.sid(), cx.Call.ID)
		v.Cache = templates.CacheView{Cached: cx.Call.CachedTokens, Input: cx.Call.InputTokens}
		markCached(&v, cx.Call.CachedTokens)
	}
	inherited, own := cx.Split(agentID)
	for _, r := range inherited {
		v.InheritedCount += r.Len()
	}
	var err error
	if p.wholeContexts || p.inheritedOnly {
		if v.Inherited, err = p.rangeViews(inherited, view.PaneWindow, url, true, taskCallID); err != nil || p.inheritedOnly {
			return v, err
		}
	}
	if d == nil || p.wholeContexts {
		v.Messages, err = p.rangeViews(own, view.PaneWindow, url, false, taskCallID)
		return v, err
	}
	// A parent's pane: its first messages, the task call and the receipt
	// with a few messages around each, and its last ones.
	callAt, receiptAt := -1, -1
	if d.Batch >= 0 {
		callAt = posIn(own, d.ParentID, d.Batch)
	}
	if d.Receipt != nil {
		receiptAt = posIn(own, d.ParentID, d.Receipt.Index)
	}
	if callAt >= 0 {
		v.CallMessageID = d.CallMessageID
	}
	if receiptAt >= 0 {
		v.ReceiptID = d.Receipt.ID
	}
	n := 0
	for _, r := range own {
		n += r.Len()
	}
	spans := view.ParentFocus.Spans(n, callAt, receiptAt)
	pos := 0
	for _, sp := range spans {
		if sp[0] > pos {
			v.Messages = append(v.Messages, templates.MessageView{Gap: sp[0] - pos, GapFrom: pos, URL: url})
			v.Focused = true
		}
		views, err := p.spanViews(own, sp[0], sp[1], false, taskCallID)
		if err != nil {
			return v, err
		}
		v.Messages = append(v.Messages, views...)
		pos = sp[1]
	}
	return v, nil
}

// posIn is the position of message idx of an agent's list in ranges, end
// to end; -1 when they do not hold it.
func posIn(rs []delegation.Range, agentID string, idx int) int {
	pos := 0
	for _, r := range rs {
		if r.AgentID == agentID && r.From <= idx && idx < r.To {
			return pos + idx - r.From
		}
		pos += r.Len()
	}
	return -1
}

// stepAt is the step a page shows when it shows one of the past: that
// model call, and the seq of its model.started. The page is then the
// session as it was when that call began.
type stepAt struct {
	Step int
	Seq  int64
	Call db.CallRow
}

// stepAt reads the step a viewer asked for; nil for now.
func (p *Page) stepAt(step int) (*stepAt, error) {
	if step < 1 || step > p.st.Calls {
		return nil, nil
	}
	rows, err := p.rd.CallsFrom(p.ctx, step, step+1)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return &stepAt{Step: step, Seq: rows[0].Seq, Call: rows[0]}, nil
}

func (a *stepAt) step() int {
	if a == nil {
		return 0
	}
	return a.Step
}

// started reports whether something that began at seq had by the step.
func (a *stepAt) started(seq int64) bool { return a == nil || (seq > 0 && seq <= a.Seq) }

// countsAt are the agents' calls and tokens at the step, read once.
func (p *Page) countsAt(at *stepAt) (map[string]db.AgentCounts, error) {
	if p.counts == nil {
		c, err := p.rd.CountsAt(p.ctx, at.Seq)
		if err != nil {
			return nil, err
		}
		p.counts = c
	}
	return p.counts, nil
}

// callRef names a stored call as a pane or a list shows it.
func (p *Page) callRef(c *db.CallRow) *view.CallRef {
	ref := &view.CallRef{ID: c.ID, Index: c.Index, InputTokens: c.InputTokens, InheritedTokens: c.InheritedTokens}
	for _, r := range c.Context {
		ref.Messages += r.Len()
	}
	if a := p.st.Agent(c.AgentID); a != nil {
		ref.Step = a.StepOfCall(c.Index)
	}
	return ref
}

// agentContext is an agent's context now (what its next turn receives), or
// at a step (what its latest call by then received).
func (p *Page) agentContext(agentID string, at *stepAt) (view.Context, error) {
	if at == nil {
		if a := p.st.Agent(agentID); a != nil {
			return a.History, nil
		}
		return view.Context{}, nil
	}
	c, err := p.rd.LatestCall(p.ctx, agentID, at.Seq)
	if err != nil || c == nil {
		return view.Context{}, err
	}
	return view.Context{Ranges: c.Context, Call: p.callRef(c)}, nil
}

// pane is one side of a delegation, or an agent's own context, as the page
// shows it: now, or at a step.
func (p *Page) pane(pn view.Pane, at *stepAt) (templates.ContextView, error) {
	cx := p.st.PaneContext(pn)
	if at != nil {
		var err error
		if cx, err = p.agentContext(pn.AgentID, at); err != nil {
			return templates.ContextView{}, err
		}
	}
	var d *view.Delegation
	if pn.Kind == view.PaneParent {
		d = p.st.Delegation(pn.Delegation)
	}
	v, err := p.contextFocused(pn.AgentID, cx, pn.TaskCallID, d)
	v.PaneID, v.At = pn.ID(), at.step()
	if v.InheritedCount > 0 && !p.inheritedOnly {
		v.InheritedURL = templates.InheritedURL(p.sid(), pn.ID())
		if at != nil {
			v.InheritedURL += "&step=" + strconv.Itoa(at.Step)
		}
	}
	if a := p.st.Agent(pn.AgentID); a != nil && pn.Kind == view.PaneChild {
		v.Prefix = p.st.Prefix(a)
	}
	if at == nil && cx.Call != nil {
		if r := p.st.Running[cx.Call.ID]; r != nil {
			v.StreamCallID, v.Stream = r.ID, r.Stream
		}
	}
	if at == nil && p.st.Agent(pn.AgentID) != nil && (pn.Kind != view.PaneParent || (d != nil && d.Frozen == nil)) {
		v.Follows = pn.AgentID
	}
	if at != nil && pn.Kind == view.PaneParent && d != nil && (d.Receipt == nil || !at.started(d.Receipt.Seq)) {
		v.ReceiptID = ""
	}
	return v, err
}

// paneByID is the pane a page names: "parent:CHILD", "child:CHILD" or
// "agent:AGENT".
func (p *Page) paneByID(id string) (view.Pane, bool) {
	kind, of, _ := strings.Cut(id, ":")
	if kind == view.PaneAgent {
		return view.Pane{Kind: view.PaneAgent, Delegation: of, AgentID: of}, p.st.Agent(of) != nil
	}
	d := p.st.Delegation(of)
	if d == nil {
		return view.Pane{}, false
	}
	parent, child := p.st.PanesOf(d)
	switch kind {
	case view.PaneParent:
		return parent, true
	case view.PaneChild:
		return child, true
	}
	return view.Pane{}, false
}

// delegationView puts a delegation side by side.
func (p *Page) delegationView(d *view.Delegation, at *stepAt) (*templates.DelegationView, error) {
	v := &templates.DelegationView{ChildID: d.ChildID, ChildName: d.SubagentType, Mode: d.Mode, Task: d.Task}
	a := p.st.Agent(d.ChildID)
	if a != nil {
		v.ChildName, v.Status = a.Name, a.Status
	}
	parent, child := p.st.PanesOf(d)
	var err error
	if v.Parent, err = p.pane(parent, at); err != nil {
		return nil, err
	}
	if v.Child, err = p.pane(child, at); err != nil {
		return nil, err
	}
	if v.CameBack, err = p.cameBack(d, at); err != nil {
		return nil, err
	}
	if v.Economics, err = p.economics(d, at); err != nil {
		return nil, err
	}
	if v.Calls, err = p.callsList(d.ChildID, at); err != nil {
		return nil, err
	}
	v.HeldBack = p.heldBack(d, v.CameBack.Finished)
	return v, nil
}

// heldBack is what of a delegation stayed in the child, counted, its todos
// as it last wrote them; finished: the receipt is in (by the page's step).
func (p *Page) heldBack(d *view.Delegation, finished bool) templates.HeldBackView {
	v := templates.HeldBackView{ChildID: d.ChildID, Finished: finished}
	if finished {
		v.Held = d.HeldBack
	}
	if a := p.st.Agent(d.ChildID); a != nil {
		v.Messages, v.MessageTokens = a.Messages, a.WorkTokens
		for _, t := range a.Todos {
			v.Todos = append(v.Todos, templates.TodoView{Content: t.Content, Status: t.Status})
		}
	}
	return v
}

func (p *Page) cameBack(d *view.Delegation, at *stepAt) (templates.CameBackView, error) {
	v := templates.CameBackView{ChildID: d.ChildID, Finished: d.Finished && at.started(d.FinishedSeq)}
	if at == nil || v.Finished {
		v.FilesBack, v.FilesBackCount = d.FilesBack, d.FilesBackCount
	}
	if a := p.st.Agent(d.ChildID); a != nil {
		v.ChildStatus = a.Status
		v.EntryTokens, v.EntryCached = a.EntryTokens, a.EntryCached
		var cost view.Money
		v.ChildInputTotal, v.ChildCachedSum, cost = p.st.Subtree(a.ID)
		if cost.Priced() {
			v.ChildCost = view.Dollars(cost.Total)
			if cost.CacheWrite > 0 {
				v.ChildWriteCost = view.Dollars(cost.CacheWrite)
			}
		}
		sv := p.st.Saving(d)
		v.KeptPerCall, v.LaterCalls, v.KeptTokens = sv.PerCall, d.LaterCalls, sv.Tokens
		if sv.Priced {
			v.KeptCost = view.Dollars(sv.Cost)
		}
		if !at.started(a.EndSeq) {
			v.ChildStatus = delegation.StatusRunning
		}
	}
	if r := d.Receipt; r != nil && at.started(r.Seq) {
		m, err := p.rd.MessageAt(p.ctx, r.AgentID, r.Index)
		if err != nil {
			return v, err
		}
		if m != nil {
			mv := p.MessageView(*m)
			v.Receipt = &mv
			v.ReceiptEmpty = r.Empty && !r.IsError
		}
	}
	return v, nil
}

// economics counts a delegation: what the child worked through, now or by
// the step, against what came back.
func (p *Page) economics(d *view.Delegation, at *stepAt) (templates.EconomicsView, error) {
	v := templates.EconomicsView{ChildID: d.ChildID}
	a := p.st.Agent(d.ChildID)
	if a == nil {
		return v, nil
	}
	v.Inherited, v.InheritedTokens = a.InheritedMessages, a.InheritedTokens
	if at == nil {
		e := a.Evicted
		v.Evicted = templates.EvictedCount{Messages: e.Messages, Tokens: e.Tokens, PointerTokens: e.PointerTokens, Calls: e.Calls, Saved: e.Saved}
		if r, ok := p.st.ReceiptEvicted(d); ok {
			v.ReceiptEvicted = &templates.EvictedCount{Messages: r.Messages, Tokens: r.Tokens, PointerTokens: r.PointerTokens, Calls: r.Calls, Saved: r.Saved}
		}
		// Its work: its own messages after its task (view.Economics).
		v.Messages, v.MessageTokens, v.ModelCalls, v.InputTokens, v.ToolCalls = max(a.Messages-1, 0), a.WorkTokens, a.Calls, a.OwnTokens, a.ToolCalls
	} else {
		counts, err := p.countsAt(at)
		if err != nil {
			return v, err
		}
		v.ModelCalls, v.InputTokens = counts[a.ID].Calls, counts[a.ID].Tokens
		last, err := p.rd.LatestCall(p.ctx, a.ID, at.Seq)
		if err != nil {
			return v, err
		}
		if last != nil {
			_, own := view.Context{Ranges: last.Context}.Split(a.ID)
			for _, r := range own {
				v.Messages += r.Len()
			}
			v.Messages = max(v.Messages-1, 0) // after its task
			v.MessageTokens = last.MessageTokens - last.InheritedTokens
			if task, err := p.rd.MessageAt(p.ctx, a.ID, 0); err != nil {
				return v, err
			} else if task != nil {
				v.MessageTokens = max(v.MessageTokens-task.Tokens, 0)
			}
		}
		if a.StartSeq <= at.Seq {
			tools, err := p.rd.ToolEvents(p.ctx, a.StartSeq, at.Seq)
			if err != nil {
				return v, err
			}
			for _, ev := range tools {
				if ev.AgentID == a.ID && ev.Type == delegation.EventToolStarted {
					v.ToolCalls++
				}
			}
		}
	}
	v.Finished = d.Finished && at.started(d.FinishedSeq)
	if at == nil || v.Finished {
		v.Files = d.FilesBackCount
	}
	if r := d.Receipt; r != nil && at.started(r.Seq) {
		v.ReceiptTokens = r.Tokens
		v.Ratio = ratio(v.InputTokens, r.Tokens)
	}
	return v, nil
}

// ratio writes how many tokens the child read per token that came back.
func ratio(worked, back int) string {
	if worked <= 0 {
		return ""
	}
	if back <= 0 {
		return templates.Thousands(worked) + " : 0"
	}
	r := float64(worked) / float64(back)
	if r >= 10 {
		return templates.Thousands(int(r+0.5)) + " : 1"
	}
	return strconv.FormatFloat(r, 'f', 1, 64) + " : 1"
}

// callsList is an agent's model calls, now or up to the step: its first
// and its last, each a link to its whole context.
func (p *Page) callsList(agentID string, at *stepAt) (templates.CallsView, error) {
	a := p.st.Agent(agentID)
	v := templates.CallsView{AgentID: agentID, AgentName: p.agentName(agentID)}
	if a == nil {
		return v, nil
	}
	v.Count = a.Calls
	upTo := int64(1 << 62)
	if at != nil {
		counts, err := p.countsAt(at)
		if err != nil {
			return v, err
		}
		v.Count, upTo = counts[agentID].Calls, at.Seq
	}
	from, to := view.CallsWindow.Gap(v.Count)
	head, err := p.rd.AgentCallsHead(p.ctx, agentID, from)
	if err != nil {
		return v, err
	}
	for _, c := range head {
		v.Rows = append(v.Rows, p.callRow(a, c))
	}
	if to > from {
		v.Rows = append(v.Rows, p.callsGap(agentID, to-from))
		tail, err := p.rd.AgentCallsTail(p.ctx, agentID, upTo, v.Count-to)
		if err != nil {
			return v, err
		}
		for _, c := range tail {
			v.Rows = append(v.Rows, p.callRow(a, c))
		}
	}
	return v, nil
}

func (p *Page) callRow(a *view.Agent, c db.CallRow) templates.CallRowView {
	return templates.CallRowView{ID: c.ID, URL: templates.CallURL(p.sid(), c.ID), Step: a.StepOfCall(c.Index),
		Number: c.Index + 1, InputTokens: c.InputTokens, Purpose: c.Purpose}
}

func (p *Page) callsGap(agentID string, n int) templates.CallRowView {
	return templates.CallRowView{Gap: n, GapURL: templates.TimelineURL(p.sid(), "lane-"+agentID)}
}

// root is the main agent (nil before it starts).
func (p *Page) root() *view.Agent {
	for _, a := range p.st.Agents {
		if a.ParentID == "" {
			return a
		}
	}
	return nil
}

// agentPanel is the main agent's panel: its context, its calls, its
// delegations, now or by the step.
func (p *Page) agentPanel(at *stepAt) (*templates.AgentPanel, error) {
	v := &templates.AgentPanel{AgentID: "main", Name: "main", Task: p.st.Session.Prompt}
	a := p.root()
	if a != nil {
		v.AgentID, v.Name = a.ID, a.Name
	}
	pn := view.Pane{Kind: view.PaneAgent, Delegation: v.AgentID, AgentID: v.AgentID}
	var err error
	if v.Context, err = p.pane(pn, at); err != nil {
		return nil, err
	}
	if v.Calls, err = p.callsList(v.AgentID, at); err != nil {
		return nil, err
	}
	p.agentPicks(v, at)
	return v, nil
}

// agentPicks fills in the main agent's delegations to pick, by the step.
func (p *Page) agentPicks(v *templates.AgentPanel, at *stepAt) {
	for _, d := range p.st.Delegations {
		if at.started(d.Seq) {
			v.Delegations = append(v.Delegations, pickOption(p.st, d))
		}
	}
	v.None = len(v.Delegations) == 0
}

// chosen is the delegation a viewer's panel shows: the one asked for, or
// the first; nil for the main agent's panel.
func (p *Page) chosen(agent string, at *stepAt) *view.Delegation {
	var d *view.Delegation
	if agent == "" {
		if len(p.st.Delegations) > 0 {
			d = p.st.Delegations[0] // the first, until the user picks another
		}
	} else {
		d = p.st.Delegation(agent)
	}
	if d != nil && !at.started(d.Seq) {
		return nil
	}
	return d
}

// delegationPanel is the panel for a viewer who asked for agent.
func (p *Page) delegationPanel(agent string, at *stepAt) (templates.DelegationPanel, error) {
	v := templates.DelegationPanel{SessionID: p.sid(), Show: agent, At: at.step()}
	var err error
	if d := p.chosen(agent, at); d != nil {
		v.Shown = d.ChildID
		v.Selected, err = p.delegationView(d, at)
		return v, err
	}
	v.Agent, err = p.agentPanel(at)
	if v.Agent != nil {
		v.Shown = v.Agent.AgentID
	}
	return v, err
}

func pickOption(st *view.State, d *view.Delegation) templates.LessonOption {
	name := d.SubagentType
	if a := st.Agent(d.ChildID); a != nil {
		name = a.Name
	}
	return templates.LessonOption{Name: d.ChildID, Title: d.ChildID + " " + name + " (" + d.Mode + "): " + view.Excerpt(d.Task, 80)}
}

// shown is the agent a viewer's panel shows: the tree's selected node.
func (p *Page) shown(agent string, at *stepAt) string {
	if d := p.chosen(agent, at); d != nil {
		return d.ChildID
	}
	if a := p.root(); a != nil {
		return a.ID
	}
	return ""
}

// scrub is the scrubber: every agent's context at the step, or (at == nil)
// at the newest call, which it then follows.
func (p *Page) scrub(at *stepAt) (templates.ScrubView, error) {
	n := p.st.Calls
	v := templates.ScrubView{SessionID: p.sid(), Steps: n}
	if n == 0 {
		v.Follow = true
		return v, nil
	}
	if at == nil {
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
				sa.CallURL, sa.CallStep = templates.CallURL(p.sid(), a.Last.ID), a.Last.Step
			}
			v.Agents = append(v.Agents, sa)
		}
		if cur != nil {
			v.CallAgent, v.CallAgentID, v.CallNumber = cur.Name, cur.ID, cur.Last.Index+1
			v.CallURL, v.InputTokens = templates.CallURL(p.sid(), cur.Last.ID), cur.Last.InputTokens
			v.Cache = templates.CacheView{Cached: cur.Last.CachedTokens, Input: cur.Last.InputTokens}
			if _, done := p.st.Running[cur.Last.ID]; !done {
				last, err := p.rd.CallsTail(p.ctx, 1, n)
				if err != nil {
					return v, err
				}
				if len(last) == 1 {
					v.Answer = answerOf(i18n.From(p.ctx), last[0])
				}
			}
		}
		return v, nil
	}
	v.Step = at.Step
	cur := at.Call
	v.CallAgent, v.CallAgentID, v.CallNumber = p.agentName(cur.AgentID), cur.AgentID, cur.Index+1
	v.CallURL, v.InputTokens = templates.CallURL(p.sid(), cur.ID), cur.InputTokens
	v.Cache = templates.CacheView{Cached: cur.CachedPrefixTokens, Input: cur.InputTokens}
	// The page is the session as the call began: its answer is on its page.
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
			sa.CallURL, sa.CallStep = templates.CallURL(p.sid(), last.ID), a.StepOfCall(last.Index)
		}
		v.Agents = append(v.Agents, sa)
	}
	return v, nil
}

// answerOf quotes a call's answer in a line: its text, or its tool calls.
func answerOf(lang *i18n.Lang, c db.CallRow) string {
	if c.Output == nil {
		return ""
	}
	if t := view.Excerpt(c.Output.Content, 140); t != "" {
		return t
	}
	var names []string
	for _, tc := range c.Output.ToolCalls {
		names = append(names, tc.Name)
	}
	if len(names) > 0 {
		return lang.T("sess.tool_calls", "Names", strings.Join(names, ", "))
	}
	return ""
}

// cut is the summarization a summary message stands for.
func (p *Page) cut(agentID string, idx int) *templates.CutView {
	a := p.st.Agent(agentID)
	if a == nil {
		return nil
	}
	for _, sm := range a.Summaries {
		if sm.Index == idx {
			c := &templates.CutView{Step: sm.Step, Folded: sm.Folded, TokensBefore: sm.TokensBefore, TokensAfter: sm.TokensAfter, FilePath: sm.FilePath}
			if sm.FilePath != "" {
				c.FileURL = templates.FileURL(p.sid(), sm.FilePath)
			}
			return c
		}
	}
	return nil
}

// Files is the first page of main's files, or the page after a path.
func (p *Page) Files(after string) (templates.FilesView, error) {
	v := templates.FilesView{SessionID: p.sid(), Count: p.st.Files.Count()}
	rows, err := p.rd.Files(p.ctx, after, view.FilesPage+1, filePreview)
	if err != nil {
		return v, err
	}
	if len(rows) > view.FilesPage {
		rows = rows[:view.FilesPage]
		v.Next = p.filesAfter(rows[len(rows)-1].Path)
	}
	for _, f := range rows {
		v.Files = append(v.Files, fileView(f))
	}
	return v, nil
}

// filesAfter is the page of main's files that follows a path.
func (p *Page) filesAfter(path string) string {
	return templates.FilesURL(p.sid(), path)
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
func (p *Page) notes() []templates.NoteGroup {
	var out []templates.NoteGroup
	at := map[string]int{}
	for _, n := range p.st.Notes {
		i, ok := at[n.Kind]
		if !ok {
			i = len(out)
			at[n.Kind] = i
			out = append(out, templates.NoteGroup{Kind: n.Kind})
		}
		out[i].Texts = append(out[i].Texts, noteText(i18n.From(p.ctx), n))
	}
	return out
}

// noteText is a note in a language: its catalogue message with its data,
// the engine's error it quotes in that language where the catalogue has
// it; the English text for a note that has no message (an older snapshot).
func noteText(lang *i18n.Lang, n view.Note) string {
	if n.ID == "" || lang.Code == i18n.English {
		return n.Text
	}
	kv := make([]any, len(n.Args))
	for i, a := range n.Args {
		if i%2 == 1 && n.Args[i-1] == "Error" {
			a = lang.Text(a)
		}
		kv[i] = a
	}
	return lang.T(n.ID, kv...)
}

func (p *Page) tree(selected string) view.TreeLayout {
	return view.Layout(p.st.Tree(), view.LayoutOptions{Selected: selected, Prompt: p.st.Session.Prompt,
		Words: templates.TreeWords(p.ctx)})
}

// treeAt is the tree now, or as it was at the step.
func (p *Page) treeAt(selected string, at *stepAt) (view.TreeLayout, error) {
	if at == nil {
		return p.tree(selected), nil
	}
	counts, err := p.countsAt(at)
	if err != nil {
		return view.TreeLayout{}, err
	}
	at2 := make(map[string]view.AgentAt, len(counts))
	for id, c := range counts {
		at2[id] = view.AgentAt{Calls: c.Calls, Tokens: c.Tokens}
	}
	return view.Layout(p.st.TreeAt(at.Seq, at2), view.LayoutOptions{Selected: selected, Current: at.Call.AgentID,
		Prompt: p.st.Session.Prompt, Words: templates.TreeWords(p.ctx)}), nil
}

// statePage is the page's parts that every viewer sees alike: drawn
// from the state as it is now.
func (p *Page) statePage(page templates.Page, running bool) templates.SessionPage {
	st := p.st
	return templates.SessionPage{Page: page, ID: st.Session.ID, Name: st.Session.Name, Title: st.Session.Title,
		Prompt: st.Session.Prompt, Status: st.Session.Status, Error: st.Session.Error, StoppedBy: st.Session.StoppedBy, Code: st.Session.Code, Tokenizer: st.Session.Tokenizer,
		CreatedAt: st.Session.CreatedAt, Running: running, Answer: st.Session.Answer, LastSeq: st.Seq,
		Agents: len(st.Agents), Calls: st.Calls, Tokens: st.Tokens, Totals: totals(st), Notes: p.notes()}
}

// SessionPage is the whole session page for a viewer's choice.
func (p *Page) SessionPage(page templates.Page, ch Choice, running bool) (templates.SessionPage, error) {
	st := p.st
	v := p.statePage(page, running)
	at, err := p.stepAt(ch.Step)
	if err != nil {
		return v, err
	}
	v.At = at.step()
	if v.Tree, err = p.treeAt(p.shown(ch.Agent, at), at); err != nil {
		return v, err
	}
	if v.Delegation, err = p.delegationPanel(ch.Agent, at); err != nil {
		return v, err
	}
	if v.Timeline, err = p.waterfall(ch.TimelineAll, at); err != nil {
		return v, err
	}
	if v.Scrub, err = p.scrub(at); err != nil {
		return v, err
	}
	if v.Files, err = p.Files(""); err != nil {
		return v, err
	}
	v.Panels = map[string]templ.Component{}
	for _, pn := range panels() {
		if pn.draw != nil {
			v.Panels[pn.name] = pn.draw(&v)
		}
	}
	v.Origin, v.Received = originLine(i18n.From(p.ctx), st.Session.Origin), st.Session.Origin.OriginKind() != delegation.OriginEngine
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
func originLine(lang *i18n.Lang, o *delegation.Origin) string {
	switch o.OriginKind() {
	case delegation.OriginEngine:
		return lang.T("origin.engine")
	case delegation.OriginProxy:
		line := lang.T("origin.proxy", "Service", cmp.Or(o.Service, lang.T("origin.openai_client")))
		if o.Upstream != "" {
			line += " · " + lang.T("origin.answered_by", "Upstream", o.Upstream)
		}
		return line
	}
	parts := []string{lang.T("origin.otlp")}
	if o.Service != "" {
		parts = append(parts, lang.T("origin.from", "Service", o.Service))
	}
	switch o.Convention {
	case "openinference":
		parts = append(parts, lang.T("origin.openinference"))
	case "genai":
		parts = append(parts, lang.T("origin.genai"))
	}
	if len(o.Instrumentation) > 0 {
		parts = append(parts, lang.T("origin.instrumented", "Names", strings.Join(o.Instrumentation, ", ")))
	}
	if o.SDK != "" {
		parts = append(parts, "SDK "+o.SDK)
	}
	if o.TraceID != "" {
		parts = append(parts, lang.T("origin.trace", "ID", o.TraceID))
	}
	return strings.Join(parts, " · ")
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

// CallPage is one model call's whole context, with its answer.
func (p *Page) CallPage(callID string) (templates.ContextView, bool, error) {
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
	if a := p.st.Agent(c.AgentID); a != nil {
		ref.Step = a.StepOfCall(c.Index)
	}
	v, err := p.contextView(c.AgentID, view.Context{Ranges: rs, Call: ref}, "")
	return v, true, err
}
