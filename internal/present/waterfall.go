package present

import (
	"math"
	"strconv"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// The timeline is a waterfall: a lane per agent, a bar per model call and
// per tool call from its start to its end, on one time axis in ms from the
// session's start. A page shows the last view.WaterfallSteps steps and
// follows the session (#timeline[data-follow]), or every step
// (#timeline[data-all]), or the steps up to the page's step as they were
// then (#timeline[data-at], which no live patch touches).

// ms is a time as the axis has it: ms from the session's start.
func (p *Page) ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Sub(p.st.Session.CreatedAt).Milliseconds()
}

// waterfallFrame is a waterfall without its lanes: which steps it shows
// and its axis, for a viewer who follows (all false) or shows every step.
func (p *Page) waterfallFrame(all bool, at *stepAt) (templates.Waterfall, error) {
	st := p.st
	n := st.Calls
	w := templates.Waterfall{SessionID: p.sid(), Steps: n, Marker: -1,
		AllURL: templates.TimelineURL(p.sid(), "timeline-card")}
	now := st.LastAt
	switch {
	case at != nil:
		w.At, w.From, w.To, now = at.Step, max(1, at.Step-view.WaterfallSteps+1), at.Step, at.Call.StartedAt
	case all:
		w.All, w.From, w.To = true, 1, n
	default:
		w.Follow, w.From, w.To = true, max(1, n-view.WaterfallSteps+1), n
	}
	w.Now = max(p.ms(now), 0)
	// The axis starts with the session, or, when the steps shown start
	// later, with the first of them: while every step fits a following
	// timeline, it draws what the whole one does.
	if t, ok := p.st.StepStartedAt(w.From); ok && w.From > 1 {
		w.T0 = p.ms(t) // the fold has it: no read
	} else if w.From > 1 {
		first, err := p.rd.CallsFrom(p.ctx, w.From, w.From+1)
		if err != nil {
			return w, err
		}
		if len(first) == 1 {
			w.T0 = p.ms(first[0].StartedAt)
		}
	}
	w.Span = max(w.Now-w.T0, 1)
	w.Ticks = ticks(i18n.From(p.ctx), w.T0, w.Span)
	return w, nil
}

// waterfall is the timeline for a viewer, bars and all.
func (p *Page) waterfall(all bool, at *stepAt) (templates.Waterfall, error) {
	w, err := p.waterfallFrame(all, at)
	if err != nil {
		return w, err
	}
	upTo := p.st.Seq
	if at != nil {
		upTo = at.Seq
		w.Marker = p.ms(at.Call.StartedAt)
	}
	lane := map[string]int{}
	for _, a := range p.st.Agents {
		if at.started(a.StartSeq) {
			lane[a.ID] = len(w.Lanes)
			w.Lanes = append(w.Lanes, p.lane(a))
		}
	}
	if w.Steps == 0 {
		return w, nil
	}
	calls, err := p.rd.CallsFrom(p.ctx, w.From, w.To+1)
	if err != nil || len(calls) == 0 {
		return w, err
	}
	// Tool calls belong to the step of their agent's call that asked for
	// them: read in seq order beside the calls.
	tools, err := p.rd.ToolEvents(p.ctx, calls[0].Seq, upTo)
	if err != nil {
		return w, err
	}
	type last struct {
		step int
		id   string
	}
	latest := map[string]last{}
	toolAt := map[string][2]int{} // tool call id → lane, bar
	ended := endedCalls(tools)    // calls whose model.finished is in by upTo
	ci := 0
	addCall := func(c db.CallRow) {
		latest[c.AgentID] = last{c.Step, c.ID}
		if l, ok := lane[c.AgentID]; ok {
			running := !ended[c.ID]
			if at == nil {
				_, running = p.st.Running[c.ID]
			}
			b := p.callBar(c, running)
			b.Current = at != nil && c.Step == at.Step
			w.Lanes[l].Bars = append(w.Lanes[l].Bars, b)
		}
	}
	for _, ev := range tools {
		for ci < len(calls) && calls[ci].Seq < ev.Seq {
			addCall(calls[ci])
			ci++
		}
		l, ok := lane[ev.AgentID]
		if !ok {
			continue
		}
		switch ev.Type {
		case delegation.EventToolStarted:
			d, err := delegation.DataAs[delegation.ToolStarted](ev)
			if err != nil || latest[ev.AgentID].step == 0 {
				continue // asked for by a call before the window
			}
			lt := latest[ev.AgentID]
			tc := view.ToolChange{AgentID: ev.AgentID, ToolCallID: d.ToolCallID, Name: d.Name, Seq: ev.Seq, At: ev.At,
				Step: lt.step, CallID: lt.id}
			b := p.toolBar(tc, at == nil)
			toolAt[d.ToolCallID] = [2]int{l, len(w.Lanes[l].Bars)}
			w.Lanes[l].Bars = append(w.Lanes[l].Bars, b)
		case delegation.EventToolFinished:
			d, err := delegation.DataAs[delegation.ToolFinished](ev)
			if err != nil {
				continue
			}
			if x, ok := toolAt[d.ToolCallID]; ok {
				b := &w.Lanes[x[0]].Bars[x[1]]
				b.Running, b.Error, b.D = false, d.IsError, max(p.ms(ev.At)-b.S, 0)
				b.Title = toolTitle(i18n.From(p.ctx), b, d.Name, p.st.DelegationByTaskCall(d.ToolCallID), p.st)
			}
		}
	}
	for ; ci < len(calls); ci++ {
		addCall(calls[ci])
	}
	if at == nil {
		p.endWithSession(&w)
	}
	return w, nil
}

// endedCalls are the model calls whose model.finished is among evs.
func endedCalls(evs []delegation.Event) map[string]bool {
	ended := map[string]bool{}
	for _, ev := range evs {
		if ev.Type == delegation.EventModelFinished {
			if d, err := delegation.DataAs[delegation.ModelFinished](ev); err == nil {
				ended[d.ModelCallID] = true
			}
		}
	}
	return ended
}

// endWithSession: a tool call the session ended before it finished ends
// with it.
func (p *Page) endWithSession(w *templates.Waterfall) {
	for i := range w.Lanes {
		for j := range w.Lanes[i].Bars {
			if b := &w.Lanes[i].Bars[j]; b.Running && b.Kind != "model" && b.Kind != "summary" && p.st.RunningTools[b.ID[len("tool-"):]] == nil {
				b.Running, b.D = false, max(w.Now-b.S, 0)
			}
		}
	}
}

func (p *Page) lane(a *view.Agent) templates.Lane {
	return templates.Lane{AgentID: a.ID, Name: a.Name, Depth: a.Depth, URL: templates.AgentURL(p.sid(), a.ID)}
}

// callBar is a model call's bar, running or ended.
func (p *Page) callBar(c db.CallRow, running bool) templates.Bar {
	b := templates.Bar{ID: "bar-" + c.ID, Kind: "model", Step: c.Step, S: p.ms(c.StartedAt), D: c.DurationMS,
		URL: templates.CallURL(p.sid(), c.ID)}
	if c.Purpose == string(delegation.PurposeSummary) {
		b.Kind = "summary"
	}
	b.Running = running
	b.Error = !b.Running && c.Error != ""
	lang := i18n.From(p.ctx)
	id := "bar.model"
	if b.Kind == "summary" {
		id = "bar.summary"
	}
	b.Title = lang.T(id, "Step", c.Step, "ID", c.AgentID, "Name", p.agentName(c.AgentID), "N", c.Index+1,
		"Tokens", lang.N("sess.tokens_in", c.InputTokens))
	if b.Running {
		b.Title += " · " + lang.T("state.running")
	} else {
		b.Title += " · " + duration(lang, b.D)
	}
	cv := cacheView(c.ModelCall)
	if cv.Cached > 0 || cv.Cost != "" {
		b.Title += " · " + lang.T("sess.cached", "N", lang.Num(cv.Cached))
		if cv.Cost != "" {
			b.Title += " · " + cv.Cost
		}
	}
	if cv.Written > 0 {
		b.Title += " · " + cacheWritten(lang, cv)
	}
	switch {
	case b.Error && c.StoppedBy != "":
		b.Title += " · " + lang.T("bar.stopped", "Why", lang.T(i18n.StopKey(c.StoppedBy)))
	case b.Error:
		b.Title += " · " + lang.T("bar.failed", "Error", view.Excerpt(c.Error, 80))
	}
	return b
}

// toolBar is a tool call's bar, running (its end comes with tool.finished).
func (p *Page) toolBar(t view.ToolChange, now bool) templates.Bar {
	b := templates.Bar{ID: "tool-" + t.ToolCallID, Kind: "tool", Step: t.Step, S: p.ms(t.At), Running: true,
		URL: templates.CallURL(p.sid(), t.CallID)}
	d := p.st.DelegationByTaskCall(t.ToolCallID)
	if t.Name == delegation.TaskToolName {
		b.Kind = "task"
		if d != nil {
			b.URL = templates.AgentURL(p.sid(), d.ChildID)
		}
	}
	if t.Finished {
		b.S = p.ms(t.Started)
		b.Running, b.Error, b.D = false, t.IsError, max(p.ms(t.At)-b.S, 0)
	}
	b.Title = toolTitle(i18n.From(p.ctx), &b, t.Name, d, p.st)
	return b
}

func toolTitle(lang *i18n.Lang, b *templates.Bar, name string, d *view.Delegation, st *view.State) string {
	t := lang.T("bar.tool", "Name", name)
	if d != nil {
		t = "task → " + d.ChildID + " " + d.SubagentType
		if a := st.Agent(d.ChildID); a != nil {
			t = "task → " + a.ID + " " + a.Name
		}
	}
	t += lang.T("bar.asked_in", "Step", b.Step)
	if b.Running {
		return t + " · " + lang.T("state.running")
	}
	if b.Error {
		t += " · " + lang.T("state.failed")
	}
	return t + " · " + duration(lang, b.D)
}

// duration writes ms for a person: 820 ms, 1.4 s, 2 min 5 s.
func duration(lang *i18n.Lang, ms int64) string {
	switch {
	case ms < 1000:
		return lang.T("dur.ms", "N", ms)
	case ms < 60_000:
		return lang.T("dur.s", "N", strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64))
	}
	return lang.T("dur.min_s", "M", ms/60_000, "S", ms%60_000/1000)
}

// ticks are the axis's labels: round times from t0 across span, a few.
func ticks(lang *i18n.Lang, t0, span int64) []templates.Tick {
	step := int64(1)
	// The smallest of 1, 2, 5 × 10^k ms that makes at most 6 intervals.
	for k := int64(1); ; k *= 10 {
		found := false
		for _, m := range []int64{1, 2, 5} {
			if span/(m*k) <= 6 {
				step, found = m*k, true
				break
			}
		}
		if found || k > 1e12 {
			break
		}
	}
	var out []templates.Tick
	first := int64(math.Ceil(float64(t0)/float64(step))) * step
	for t := first; t < t0+span*95/100; t += step {
		pct := float64(t-t0) / float64(span) * 100
		out = append(out, templates.Tick{Pct: strconv.FormatFloat(pct, 'f', 2, 64) + "%", Label: clock(lang, t, step)})
	}
	return out
}

// clock writes a time of the axis: 0 s, 500 ms, 1.5 s, 2 min.
func clock(lang *i18n.Lang, ms, step int64) string {
	switch {
	case step < 1000 && ms < 1000:
		return lang.T("dur.ms", "N", ms)
	case ms < 60_000 || step < 60_000:
		if ms%1000 == 0 {
			return lang.T("dur.s", "N", ms/1000)
		}
		return lang.T("dur.s", "N", strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64))
	}
	return lang.T("dur.min", "N", ms/60_000)
}
