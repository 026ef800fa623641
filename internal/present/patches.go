package present

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/a-h/templ"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// Patch is a change to a session page at the elements Sel finds. Op:
// "append" (a child, or in place of the child with the same data-k or
// id), "replace", "inner", "before" and "after" (insert beside), "remove", "text" (set
// the text), "stream" (add Text at At of the streamed text) and "attrs"
// (set, or with null remove, attributes). SVG: the HTML is SVG content.
type Patch struct {
	Sel   string             `json:"sel"`
	Op    string             `json:"op"`
	HTML  string             `json:"html,omitempty"`
	At    int                `json:"at,omitempty"`
	Attrs map[string]*string `json:"attrs,omitempty"`
	SVG   bool               `json:"svg,omitempty"`
}

// html renders a fragment of the page, in the page's language.
func (p *Page) html(c templ.Component) string { return HTML(p.ctx, c) }

// HTML renders a fragment in the language ctx carries.
func HTML(ctx context.Context, c templ.Component) string {
	var b bytes.Buffer
	_ = c.Render(ctx, &b)
	return b.String()
}

func str(s string) *string { return &s }

// StreamPatches add streamed text to running calls' rows.
func StreamPatches(ch view.Changes) []Patch {
	var ps []Patch
	for _, s := range ch.Stream {
		ps = append(ps, Patch{Sel: attrIs("data-stream", s.CallID), Op: "stream", HTML: s.Text, At: s.At})
	}
	return ps
}

// Panels a page draws at a step of the past (data-at) show the session as it
// was then: no live patch reaches them. These are the selectors of the
// tree and the delegation panel on pages that show now.
const (
	liveTree  = "#tree:not([data-at])"
	livePanel = "#delegation:not([data-at])"
	liveBars  = "#timeline:not([data-at])"
)

// treePatches: the whole tree when its shape changed, else the boxes that
// did. The page marks the selected box itself.
func (p *Page) treePatches(ch view.Changes) ([]Patch, error) {
	if ch.TreeShape {
		return []Patch{{Sel: liveTree, Op: "inner", HTML: p.html(templates.TreeSVG(p.sid(), p.tree("")))}}, nil
	}
	if len(ch.Nodes) == 0 {
		return nil, nil
	}
	var ps []Patch
	for _, n := range p.tree("").Nodes {
		for _, id := range ch.Nodes {
			if n.AgentID == id {
				ps = append(ps, Patch{Sel: liveTree + " " + attrIs("data-agent", id), Op: "replace", SVG: true, HTML: p.html(templates.TreeNode(p.sid(), n))})
			}
		}
	}
	return ps, nil
}

// waterfallPatches keep the timelines that follow the session and those
// that show every step as a fresh render would draw them: new lanes, the
// bars of the calls and tool calls that started, those that ended redrawn,
// the steps that left a following window taken out, and the axis.
func (p *Page) waterfallPatches(ch view.Changes) ([]Patch, error) {
	if ch.Seq == 0 {
		return nil, nil
	}
	rows, err := p.startedCalls(ch)
	if err != nil {
		return nil, err
	}
	follow, err := p.waterfallFrame(false, nil)
	if err != nil {
		return nil, err
	}
	all, err := p.waterfallFrame(true, nil)
	if err != nil {
		return nil, err
	}
	type kind struct {
		bases []string
		w     templates.Waterfall
	}
	kinds := []kind{{[]string{"#timeline[data-follow]"}, follow}, {[]string{"#timeline[data-all]"}, all}}
	if follow.From == all.From && follow.T0 == all.T0 {
		// Every step fits the following window: both draw the same.
		kinds = []kind{{[]string{"#timeline[data-follow]", "#timeline[data-all]"}, all}}
	}
	drawn := map[string]bool{}
	var ps []Patch
	for _, k := range kinds {
		ps = append(ps, p.framePatches(k.bases, k.w, ch, rows, drawn)...)
	}
	more, err := p.endedBars(ch, drawn)
	if err != nil {
		return nil, err
	}
	return append(append(ps, more...), p.runningBars(drawn)...), nil
}

// framePatches keep the timelines at bases, which draw the frame w, as a
// fresh render would: new lanes and bars, the steps that left the window
// taken out, and the axis. drawn gets the bars drawn.
func (p *Page) framePatches(bases []string, w templates.Waterfall, ch view.Changes, rows []db.CallRow, drawn map[string]bool) []Patch {
	var ps []Patch
	for _, id := range ch.Agents {
		if a := p.st.Agent(id); a != nil {
			ps = append(ps, Patch{Sel: within(bases, " [data-lanes]"), Op: "append", HTML: p.html(templates.LaneItem(w, p.lane(a)))})
		}
	}
	if len(ch.Appended) > 0 {
		for s := max(1, ch.CallsBefore-view.WaterfallSteps+1); s < w.From; s++ { // the steps that left a following window
			ps = append(ps, Patch{Sel: within(bases, " "+attrIs("data-step", strconv.Itoa(s))), Op: "remove"})
		}
	}
	for _, nb := range p.newBars(w, ch, rows) {
		drawn[nb.b.ID] = true
		ps = append(ps, Patch{Sel: within(bases, " "+attrIs("data-track", nb.agent)), Op: "append", SVG: true, HTML: p.html(templates.BarItem(w, nb.b))})
	}
	if len(ch.Appended) == 0 && max(p.ms(ch.AtBefore), 0) == w.Now {
		return ps // the axis has not moved
	}
	box := trackBoxOf(w)
	if len(ch.Appended) > 0 {
		ps = append(ps, Patch{Sel: within(bases, " [data-wf-range]"), Op: "replace", HTML: p.html(templates.WaterfallRange(w))})
	}
	var axis strings.Builder
	for _, t := range w.Ticks {
		axis.WriteString(p.html(templates.TickItem(t)))
	}
	return append(ps, Patch{Sel: within(bases, " [data-axis]"), Op: "inner", SVG: true, HTML: axis.String()},
		Patch{Sel: within(bases, " svg.track"), Op: "attrs", Attrs: map[string]*string{"viewBox": &box}},
		Patch{Sel: within(bases, ""), Op: "attrs", Attrs: map[string]*string{"data-t0": str(strconv.FormatInt(w.T0, 10)),
			"data-span": str(strconv.FormatInt(w.Span, 10)), "data-now": str(strconv.FormatInt(w.Now, 10))}})
}

// A newBar is a bar of a call or tool call that started in a batch.
type newBar struct {
	seq   int64
	agent string
	b     templates.Bar
}

// newBars are the bars of the calls (rows) and tool calls that started in
// a batch and that the frame w shows, in the order they started, as a
// fresh render has them.
func (p *Page) newBars(w templates.Waterfall, ch view.Changes, rows []db.CallRow) []newBar {
	finishedNow := map[string]bool{} // tool calls that started and ended in this batch
	for _, t := range ch.Tools {
		if t.Finished {
			finishedNow[t.ToolCallID] = true
		}
	}
	var bars []newBar
	for _, c := range rows {
		if c.Step >= w.From {
			_, running := p.st.Running[c.ID]
			bars = append(bars, newBar{c.Seq, c.AgentID, p.callBar(c, running)})
		}
	}
	for _, t := range ch.Tools {
		if t.Finished || t.Step < w.From || t.Step == 0 {
			continue
		}
		tc := t
		if finishedNow[t.ToolCallID] {
			for _, f := range ch.Tools {
				if f.Finished && f.ToolCallID == t.ToolCallID {
					tc = f
				}
			}
		}
		bars = append(bars, newBar{t.Seq, t.AgentID, p.toolBar(tc, true)})
	}
	slices.SortStableFunc(bars, func(a, b newBar) int { return cmp.Compare(a.seq, b.seq) })
	return bars
}

// endedBars redraw, wherever a live timeline shows them, the bars of the
// calls and tool calls that ended, and a task call's once its child has
// started (it names the child), unless drawn already.
func (p *Page) endedBars(ch view.Changes, drawn map[string]bool) ([]Patch, error) {
	st := p.st
	var ps []Patch
	for _, f := range ch.Finished {
		if drawn["bar-"+f.ID] {
			continue
		}
		c, err := p.rd.Call(p.ctx, f.ID)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		c.Step = f.Step
		w := templates.Waterfall{Now: p.ms(st.LastAt)}
		ps = append(ps, Patch{Sel: liveBars + " " + attrIs("id", "bar-"+f.ID), Op: "replace", SVG: true, HTML: p.html(templates.BarItem(w, p.callBar(*c, st.Running[c.ID] != nil)))})
	}
	for _, child := range ch.Started {
		if d := st.Delegation(child); d != nil && !drawn["tool-"+d.TaskCallID] {
			if t := st.RunningTools[d.TaskCallID]; t != nil {
				drawn["tool-"+d.TaskCallID] = true
				ps = append(ps, Patch{Sel: liveBars + " " + attrIs("id", "tool-"+d.TaskCallID), Op: "replace", SVG: true,
					HTML: p.html(templates.BarItem(templates.Waterfall{Now: p.ms(st.LastAt)}, p.toolBar(*t, true)))})
			}
		}
	}
	for _, t := range ch.Tools {
		if !t.Finished || drawn["tool-"+t.ToolCallID] {
			continue
		}
		ps = append(ps, Patch{Sel: liveBars + " " + attrIs("id", "tool-"+t.ToolCallID), Op: "replace", SVG: true,
			HTML: p.html(templates.BarItem(templates.Waterfall{}, p.toolBar(t, true)))})
	}
	return ps, nil
}

// runningBars: running bars, unless drawn already, reach the log's last
// event.
func (p *Page) runningBars(drawn map[string]bool) []Patch {
	var ps []Patch
	now := p.ms(p.st.LastAt)
	grow := func(id string, s int64) {
		if !drawn[id] {
			ps = append(ps, Patch{Sel: liveBars + " " + attrIs("id", id) + " rect", Op: "attrs", Attrs: map[string]*string{"width": str(strconv.FormatInt(max(now-s, 0), 10))}})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.st.Running)) {
		grow("bar-"+id, p.ms(p.st.Running[id].StartedAt))
	}
	for _, id := range slices.Sorted(maps.Keys(p.st.RunningTools)) {
		grow("tool-"+id, p.ms(p.st.RunningTools[id].At))
	}
	return ps
}

// within joins a selector's suffix to each of its bases.
func within(bases []string, suffix string) string {
	out := make([]string, len(bases))
	for i, b := range bases {
		out[i] = b + suffix
	}
	return strings.Join(out, ", ")
}

func trackBoxOf(w templates.Waterfall) string {
	return strconv.FormatInt(w.T0, 10) + " 0 " + strconv.FormatInt(max(w.Span, 1), 10) + " 20"
}

// scrubPatches: the scrubber's range follows the calls; a scrubber at the
// newest call (data-follow) follows them too.
func (p *Page) scrubPatches(ch view.Changes) ([]Patch, error) {
	answered := false // the newest call's answer came in
	for _, f := range ch.Finished {
		answered = answered || f.Step == p.st.Calls
	}
	if (!ch.Scrub && !answered) || p.st.Calls == 0 {
		return nil, nil
	}
	v, err := p.scrub(nil)
	if err != nil {
		return nil, err
	}
	if !ch.Scrub && v.Answer == "" {
		return nil, nil // an answer with nothing to quote
	}
	grew := len(ch.Appended) > 0
	if grew && ch.CallsBefore == 0 {
		return []Patch{{Sel: "#scrubber", Op: "replace", HTML: p.html(templates.ScrubberSection(v))}}, nil
	}
	// The call line, and the rows that changed: those of the agents that
	// made calls, of the one whose call was the newest, and the new ones.
	box := "#scrubber[data-follow] [data-scrub-view]"
	ps := []Patch{{Sel: box + " [data-testid=scrub-call]", Op: "replace", HTML: p.html(templates.ScrubCall(v))}}
	changed, started := map[string]bool{}, map[string]bool{}
	for _, id := range ch.AppendedBy {
		changed[id] = true
	}
	for _, id := range ch.Agents {
		started[id] = true
	}
	if grew {
		for _, a := range p.st.Agents {
			if a.Last != nil && a.Last.Step == ch.CallsBefore {
				changed[a.ID] = true // no longer the current one
			}
		}
	}
	var added strings.Builder
	for _, a := range v.Agents {
		switch {
		case started[a.AgentID]:
			added.WriteString(p.html(templates.ScrubRow(a)))
		case changed[a.AgentID]:
			ps = append(ps, Patch{Sel: box + " " + attrIs("data-scrub-agent", a.AgentID), Op: "replace", HTML: p.html(templates.ScrubRow(a))})
		}
	}
	if added.Len() > 0 {
		ps = append(ps, Patch{Sel: box + " tbody", Op: "append", HTML: added.String()})
	}
	// At a step of the past, an agent that starts now had not started.
	var rows strings.Builder
	for _, id := range ch.Agents {
		if a := p.st.Agent(id); a != nil {
			rows.WriteString(p.html(templates.ScrubRow(templates.ScrubAgent{AgentID: a.ID, Name: a.Name, NotStarted: true})))
		}
	}
	if rows.Len() > 0 {
		ps = append(ps, Patch{Sel: "#scrubber:not([data-follow]) [data-scrub-view] tbody", Op: "append", HTML: rows.String()})
	}
	if grew {
		n := strconv.Itoa(v.Steps)
		ps = append(ps,
			Patch{Sel: "#scrubber [data-scrub-steps]", Op: "text", HTML: n},
			Patch{Sel: "#scrubber input[type=range]", Op: "attrs", Attrs: map[string]*string{"max": str(n)}},
			Patch{Sel: "#scrubber[data-follow] input[type=range]", Op: "attrs", Attrs: map[string]*string{"value": str(n)}},
			Patch{Sel: "#scrubber[data-follow] output [data-scrub-step]", Op: "text", HTML: n})
	}
	return ps, nil
}

// filePatches redraw the rows of main's first page of files that changed,
// put in the new ones and take out those that left it. The state knows the
// page's paths; only the rows drawn anew are read from the store.
func (p *Page) filePatches(ch view.Changes) ([]Patch, error) {
	if ch.FilesPage == nil {
		return nil, nil
	}
	count := p.st.Files.Count()
	page := p.st.Files.Page()
	if ch.FilesBefore == 0 || count == 0 || len(page) != min(count, view.FilesPage) {
		// A first file, none left, or a state that keeps only the count
		// (restored once the session ended): the whole list.
		v, err := p.Files("")
		return []Patch{{Sel: "#files", Op: "inner", HTML: p.html(templates.Files(v))}}, err
	}
	more := templates.FilesView{SessionID: p.sid(), Count: count}
	if count > view.FilesPage {
		more.Next = p.filesAfter(page[len(page)-1])
	}
	countPatches := func() []Patch {
		if count == ch.FilesBefore {
			return nil
		}
		return []Patch{{Sel: "#files [data-files-count]", Op: "text", HTML: templates.N(p.ctx, "count.files", count)},
			{Sel: "#files [data-files-more]", Op: "replace", HTML: p.html(templates.FilesMore(more))}}
	}
	if old := ch.FilesPage; len(old) == view.FilesPage && old[len(old)-1] < minPath(ch.FilesTouched) {
		// Every change is past a full first page: only the count moves.
		return countPatches(), nil
	}
	before := map[string]bool{}
	for _, path := range ch.FilesPage {
		before[path] = true
	}
	now := map[string]bool{}
	for _, path := range page {
		now[path] = true
	}
	touched := map[string]bool{}
	for _, path := range ch.FilesTouched {
		touched[path] = true
	}
	var drawn []string // the rows drawn anew: new on the page, or changed
	for _, path := range page {
		if !before[path] || touched[path] {
			drawn = append(drawn, path)
		}
	}
	rows, err := p.rd.FilesAt(p.ctx, drawn, filePreview)
	if err != nil {
		return nil, err
	}
	const list = "#files [data-files]"
	var ps []Patch
	for _, path := range ch.FilesPage {
		if !now[path] {
			ps = append(ps, Patch{Sel: list + " > " + attrIs("data-file", path), Op: "remove"})
		}
	}
	// New rows go in before the next row that was there already.
	for i, path := range page {
		if before[path] && !touched[path] {
			continue
		}
		f, ok := rows[path]
		if !ok {
			return nil, fmt.Errorf("file %s of the page state is not in the store", path)
		}
		item := p.html(templates.FileItem(fileView(f)))
		if before[path] {
			ps = append(ps, Patch{Sel: list + " > " + attrIs("data-file", path), Op: "replace", HTML: item})
			continue
		}
		next := ""
		for _, g := range page[i+1:] {
			if before[g] {
				next = g
				break
			}
		}
		if next == "" {
			ps = append(ps, Patch{Sel: list, Op: "append", HTML: item})
		} else {
			ps = append(ps, Patch{Sel: list + " > " + attrIs("data-file", next), Op: "before", HTML: item})
		}
	}
	return append(ps, countPatches()...), nil
}

func minPath(paths []string) string {
	m := ""
	for i, p := range paths {
		if i == 0 || p < m {
			m = p
		}
	}
	return m
}

// delegationPatches: a delegation's panel appears where it is awaited; the
// panes grow with the agents they follow, or are redrawn when a context
// changed otherwise; what came back, what was held back and what it cost
// are redrawn as they change; the agents' lists of calls grow. Pages at a
// step of the past are left as they are.
func (p *Page) delegationPatches(ch view.Changes) ([]Patch, error) {
	fresh := map[string]bool{} // panes drawn whole in this batch
	var ps []Patch
	for _, part := range []func(view.Changes, map[string]bool) ([]Patch, error){
		p.startedPatches, p.contextPatches, p.callEndedPatches, p.receiptPatches, p.callsPatches,
	} {
		more, err := part(ch, fresh)
		if err != nil {
			return nil, err
		}
		ps = append(ps, more...)
	}
	return ps, nil
}

// startedPatches: a delegation's panel appears where it is awaited, and
// main's viewers get it to pick. fresh gets the panes drawn.
func (p *Page) startedPatches(ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	st := p.st
	var ps []Patch
	picksDrawn := false // the picks list drawn whole: it holds this batch's later delegations too
	for _, child := range ch.Started {
		d := st.Delegation(child)
		if d == nil {
			continue
		}
		panel, err := p.delegationPanel(child, nil)
		if err != nil {
			return nil, err
		}
		body := p.html(templates.DelegationBody(panel))
		sel := livePanel + attrIs("data-show", child)
		first := st.Delegations[0] == d
		if first {
			sel += ", " + livePanel + attrIs("data-show", "") // the first is shown by default
		}
		ps = append(ps, Patch{Sel: sel, Op: "inner", HTML: body})
		if first {
			// Viewers of the main agent now have a delegation to pick: only
			// that changes in their panel (its pane grows as it would).
			var picks templates.AgentPanel
			p.agentPicks(&picks, nil)
			ps = append(ps, Patch{Sel: livePanel + ":not(" + attrIs("data-show", "") + "):not(" + attrIs("data-show", child) + ") [data-picks]",
				Op: "replace", HTML: p.html(templates.AgentPicks(p.sid(), picks))})
			picksDrawn = true
		} else if !picksDrawn {
			ps = append(ps, Patch{Sel: livePanel + " [data-pick]", Op: "append", HTML: p.html(templates.PickItem(p.sid(), pickOption(st, d)))})
		}
		pp, cp := st.PanesOf(d)
		fresh[pp.ID()], fresh[cp.ID()] = true, true
		fresh["calls:"+child] = true
	}
	return ps, nil
}

// redraw draws a pane whole into ps, unless it was in this batch.
func (p *Page) redraw(ps *[]Patch, pn view.Pane, fresh map[string]bool) error {
	if fresh[pn.ID()] {
		return nil
	}
	item, err := p.paneHTML(pn)
	if err != nil {
		return err
	}
	*ps = append(*ps, Patch{Sel: livePanel + " " + attrIs("data-pane", pn.ID()), Op: "replace", HTML: item})
	fresh[pn.ID()] = true
	return nil
}

// contextPatches: the panes grow with the agents they follow, or are
// redrawn when a context changed otherwise.
func (p *Page) contextPatches(ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	var ps []Patch
	for _, agent := range ch.Replaced {
		for _, pn := range p.showing(agent, ch) {
			if err := p.redraw(&ps, pn, fresh); err != nil {
				return nil, err
			}
		}
	}
	for _, agent := range ch.Grown {
		// A parent's pane folds its history around the delegation: drawn
		// whole (it grows only while its children's receipts come in).
		for _, pn := range p.showing(agent, ch) {
			if pn.Kind == view.PaneParent {
				if err := p.redraw(&ps, pn, fresh); err != nil {
					return nil, err
				}
			}
		}
		more, err := p.growPatches(agent, ch.Appends[agent], ch, fresh)
		if err != nil {
			return nil, err
		}
		ps = append(ps, more...)
	}
	return ps, nil
}

// callEndedPatches: the panes of agents whose call changed or ended show
// their new totals and gaps.
func (p *Page) callEndedPatches(ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	st := p.st
	var ps []Patch
	// A pane's call that ended stops showing it under way.
	changed := slices.Clone(ch.CallChanged)
	for _, f := range ch.Finished {
		for _, a := range st.Agents {
			if a.History.Call != nil && a.History.Call.ID == f.ID && !slices.Contains(changed, a.ID) {
				changed = append(changed, a.ID)
			}
		}
	}
	for _, agent := range changed {
		for _, pn := range p.showing(agent, ch) {
			if fresh[pn.ID()] {
				continue
			}
			if pn.Kind == view.PaneParent {
				if err := p.redraw(&ps, pn, fresh); err != nil {
					return nil, err
				}
				continue
			}
			p.countsOnly = true // its total and its gaps change, not its messages
			v, err := p.pane(pn, nil)
			p.countsOnly = false
			if err != nil {
				return nil, err
			}
			base := livePanel + " " + attrIs("data-pane", pn.ID())
			ps = append(ps, Patch{Sel: base + " [data-total]", Op: "replace", HTML: p.html(templates.PaneTotal(v))})
			if d := st.Delegation(pn.Delegation); pn.Kind == view.PaneChild && d != nil && d.Mode == string(delegation.ModeFork) {
				ps = append(ps, Patch{Sel: base + " [data-note]", Op: "replace", HTML: p.html(templates.ChildNote(d.Mode, v))})
			}
			for _, list := range [][]templates.MessageView{v.Inherited, v.Messages} {
				for _, m := range list {
					if m.Gap > 0 {
						which := "ol.own"
						if m.Inherited {
							which = "ol.inherited"
						}
						ps = append(ps, Patch{Sel: base + " " + which + " > [data-testid=gap]", Op: "replace", HTML: p.html(templates.MessageItem(m))})
					}
				}
			}
		}
	}
	return ps, nil
}

// receiptPatches: what came back, what was held back and what it cost are
// redrawn as they change; a parent pane that stopped following says so.
func (p *Page) receiptPatches(ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	st := p.st
	var ps []Patch
	for _, child := range ch.Frozen {
		if d := st.Delegation(child); d != nil {
			pp, _ := st.PanesOf(d)
			if !fresh[pp.ID()] {
				ps = append(ps, Patch{Sel: livePanel + " " + attrIs("data-pane", pp.ID()), Op: "attrs", Attrs: map[string]*string{"data-follows": nil}})
			}
		}
	}
	for _, child := range ch.Crossing {
		d := st.Delegation(child)
		if d == nil || slices.Contains(ch.Started, child) {
			continue
		}
		v, err := p.delegationView(d, nil)
		if err != nil {
			return nil, err
		}
		ps = append(ps, Patch{Sel: livePanel + " " + attrIs("data-came-back", child), Op: "replace", HTML: p.html(templates.CameBack(v.CameBack))},
			Patch{Sel: livePanel + " " + attrIs("data-held-back", child), Op: "replace", HTML: p.html(templates.HeldBack(v.HeldBack))})
	}
	// What a delegation cost grows with its child's work and its receipt.
	for _, d := range st.Delegations {
		if slices.Contains(ch.Started, d.ChildID) || !(slices.Contains(ch.Worked, d.ChildID) || slices.Contains(ch.Crossing, d.ChildID)) {
			continue
		}
		e, err := p.economics(d, nil)
		if err != nil {
			return nil, err
		}
		ps = append(ps, Patch{Sel: livePanel + " " + attrIs("data-economics", d.ChildID), Op: "replace", HTML: p.html(templates.Economics(e))})
	}
	return ps, nil
}

// callsPatches grow the agents' lists of calls, as their window shows them.
func (p *Page) callsPatches(ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	added := map[string]int{}
	var order []string
	for _, id := range ch.AppendedBy {
		if added[id] == 0 {
			order = append(order, id)
		}
		added[id]++
	}
	started, err := p.startedCalls(ch)
	if err != nil {
		return nil, err
	}
	var ps []Patch
	for _, id := range order {
		a := p.st.Agent(id)
		if a == nil || fresh["calls:"+id] {
			continue
		}
		list := livePanel + " " + attrIs("data-calls", id)
		before, after := a.Calls-added[id], a.Calls
		rowsHTML := func(from, to int) string {
			var b strings.Builder
			for _, c := range started {
				if c.AgentID == id && c.Index >= from && c.Index < to {
					b.WriteString(p.html(templates.CallItem(p.callRow(a, c))))
				}
			}
			return b.String()
		}
		g := view.CallsWindow.Grow(before, after)
		for _, pos := range g.Removed {
			ps = append(ps, Patch{Sel: list + " > " + attrIs("data-pos", strconv.Itoa(pos)), Op: "remove"})
		}
		if g.HeadTo > g.HeadFrom {
			ps = append(ps, Patch{Sel: list, Op: "append", HTML: rowsHTML(g.HeadFrom, g.HeadTo)})
		}
		gap := p.html(templates.CallItem(p.callsGap(id, g.GapTo-g.GapFrom)))
		if g.Appears {
			ps = append(ps, Patch{Sel: list + " > " + attrIs("data-pos", strconv.Itoa(g.GapFrom-1)), Op: "after", HTML: gap})
		} else if g.Changes {
			ps = append(ps, Patch{Sel: list + " > [data-gap]", Op: "replace", HTML: gap})
		}
		if g.TailTo > g.TailFrom {
			ps = append(ps, Patch{Sel: list, Op: "append", HTML: rowsHTML(g.TailFrom, g.TailTo)})
		}
		ps = append(ps, Patch{Sel: livePanel + " " + attrIs("data-calls-count", id), Op: "text", HTML: templates.N(p.ctx, "count.model_calls", after)})
	}
	return ps, nil
}

// paneHTML draws a pane whole.
func (p *Page) paneHTML(pn view.Pane) (string, error) {
	v, err := p.pane(pn, nil)
	if err != nil {
		return "", err
	}
	switch pn.Kind {
	case view.PaneParent:
		return p.html(templates.ParentPane(p.sid(), v)), nil
	case view.PaneAgent:
		return p.html(templates.AgentPane(p.sid(), v)), nil
	}
	d := p.st.Delegation(pn.Delegation)
	name := pn.AgentID
	if a := p.st.Agent(pn.AgentID); a != nil {
		name = a.Name
	}
	mode := ""
	if d != nil {
		mode = d.Mode
	}
	return p.html(templates.ChildPane(p.sid(), mode, name, v)), nil
}

// growPatches: the panes that showed an agent's context as it grew get its
// new messages, as their window shows them: those that follow it, and those
// that stopped following it in this batch (up to where they stopped). Panes
// whose patches are the same get them once, between them.
func (p *Page) growPatches(agentID string, before int, ch view.Changes, fresh map[string]bool) ([]Patch, error) {
	panes := p.showing(agentID, ch)
	type group struct {
		sels []string
		ps   []Patch // with Sel the suffix after the pane's list
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, pn := range panes {
		if fresh[pn.ID()] {
			continue
		}
		ps, err := p.paneGrowth(pn, before)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			continue
		}
		var key strings.Builder
		for _, x := range ps {
			key.WriteString(x.Op + "\x00" + x.Sel + "\x00" + x.HTML + "\x00")
		}
		g := byKey[key.String()]
		if g == nil {
			g = &group{ps: ps}
			byKey[key.String()] = g
			groups = append(groups, g)
		}
		g.sels = append(g.sels, livePanel+" "+attrIs("data-pane", pn.ID())+" ol.own")
	}
	var out []Patch
	for _, g := range groups {
		for _, x := range g.ps {
			parts := make([]string, len(g.sels))
			for i, s := range g.sels {
				parts[i] = s + x.Sel
			}
			x.Sel = strings.Join(parts, ", ")
			out = append(out, x)
		}
	}
	return out, nil
}

// showing lists the panes that showed an agent's context during a batch:
// those that follow it, and those that stopped following it in the batch.
func (p *Page) showing(agentID string, ch view.Changes) []view.Pane {
	panes := p.st.Following(agentID)
	for _, child := range ch.Frozen {
		if d := p.st.Delegation(child); d != nil && d.ParentID == agentID {
			pp, _ := p.st.PanesOf(d)
			panes = append(panes, pp)
		}
	}
	return panes
}

// paneGrowth is what one pane's list of its agent's own messages does to go
// from `before` messages to what it shows now; selectors are relative to
// the list.
func (p *Page) paneGrowth(pn view.Pane, before int) ([]Patch, error) {
	cx := p.st.PaneContext(pn)
	_, own := cx.Split(pn.AgentID)
	after := 0
	for _, r := range own {
		after += r.Len()
	}
	if after <= before {
		return nil, nil
	}
	url := ""
	if cx.Call != nil {
		url = templates.CallURL(p.sid(), cx.Call.ID)
	}
	span := func(from, to int) (Patch, error) {
		views, err := p.spanViews(own, from, to, false, pn.TaskCallID)
		var b strings.Builder
		for _, m := range views {
			b.WriteString(p.html(templates.MessageItem(m)))
		}
		return Patch{Op: "append", HTML: b.String()}, err
	}
	g := view.PaneWindow.Grow(before, after)
	var ps []Patch
	for _, pos := range g.Removed {
		ps = append(ps, Patch{Sel: " > " + attrIs("data-k", keyAt(own, pos)), Op: "remove"})
	}
	if g.HeadTo > g.HeadFrom {
		x, err := span(g.HeadFrom, g.HeadTo)
		if err != nil {
			return nil, err
		}
		ps = append(ps, x)
	}
	gap := p.html(templates.MessageItem(templates.MessageView{Gap: g.GapTo - g.GapFrom, GapFrom: g.GapFrom, URL: url}))
	if g.Appears {
		ps = append(ps, Patch{Sel: " > " + attrIs("data-k", keyAt(own, g.GapFrom-1)), Op: "after", HTML: gap})
	} else if g.Changes {
		ps = append(ps, Patch{Sel: " > [data-testid=gap]", Op: "replace", HTML: gap})
	}
	if g.TailTo > g.TailFrom {
		x, err := span(g.TailFrom, g.TailTo)
		if err != nil {
			return nil, err
		}
		ps = append(ps, x)
	}
	return ps, nil
}
