package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/live"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// wireEvent is a live message: the event as the trace keeps it, the message
// or model call it introduced, and the patches that bring a session page up
// to date (server-rendered fragments for the page to apply). The patches of
// a batch of events ride on its last event. A "sync" message (seq, no
// event) brings a page opened at an older seq to its session's seq at once.
type wireEvent struct {
	Seq     int64            `json:"seq"`
	Type    string           `json:"type"`
	AgentID *string          `json:"agent_id"`
	At      time.Time        `json:"at"`
	Data    json.RawMessage  `json:"data,omitempty"`
	Message *trace.Message   `json:"message,omitempty"`
	Call    *trace.ModelCall `json:"call,omitempty"`
	Patches []patch          `json:"patches,omitempty"`
}

// patch is a change to a session page at the elements Sel finds. Op:
// "append" (a child, or in place of the child with the same data-k or
// id), "replace", "inner", "before" and "after" (insert beside), "remove", "text" (set
// the text), "stream" (add Text at At of the streamed text) and "attrs"
// (set, or with null remove, attributes). SVG: the HTML is SVG content.
type patch struct {
	Sel   string             `json:"sel"`
	Op    string             `json:"op"`
	HTML  string             `json:"html,omitempty"`
	At    int                `json:"at,omitempty"`
	Attrs map[string]*string `json:"attrs,omitempty"`
	SVG   bool               `json:"svg,omitempty"`
}

// liveViews renders the patches of a session's batches for its viewers,
// once per batch whatever the number of viewers, and nothing for a session
// nobody watches.
type liveViews struct {
	hub *live.Hub
	db  Store
	log *slog.Logger
}

var _ session.Publisher = (*liveViews)(nil)

// Publish takes a session's next stored batch, or a live-only event.
func (lv *liveViews) Publish(sessionID string, events []delegation.Event, ch view.Changes, v *session.Live) {
	if len(events) == 0 {
		return
	}
	lv.publish(sessionID, events[0].Seq, events[len(events)-1].Seq, len(events), func(i int, ps []patch) ([]byte, error) {
		return encodeWire(events[i], ps)
	}, ch, v)
}

// PublishStored takes a batch of a session another replica runs, read back
// from the store and folded into v here (replicas.go).
func (lv *liveViews) PublishStored(sessionID string, events []db.LoggedEvent, ch view.Changes, v *session.Live) {
	if len(events) == 0 {
		return
	}
	lv.publish(sessionID, events[0].Seq, events[len(events)-1].Seq, len(events), func(i int, ps []patch) ([]byte, error) {
		return encodeLogged(events[i].Event, events[i].Message, events[i].Call, ps)
	}, ch, v)
}

// publish sends a batch of n events, seqs first … last, as one message; line
// encodes the i-th with its patches (the last event's are the batch's).
func (lv *liveViews) publish(sessionID string, first, last int64, n int, line func(int, []patch) ([]byte, error), ch view.Changes, v *session.Live) {
	if lv.hub.Viewers(sessionID) == 0 {
		return
	}
	patches, err := lv.patches(sessionID, first == 0, ch, v)
	if err != nil {
		lv.log.Error("live patches", "session", sessionID, "err", err)
	}
	// One message for the batch, one event a line: one send to each
	// viewer, and one write.
	var data []byte
	for i := range n {
		var ps []patch
		if i == n-1 {
			ps = patches
		}
		l, err := line(i, ps)
		if err != nil {
			lv.log.Error("encode live event", "session", sessionID, "err", err)
			return
		}
		if i > 0 {
			data = append(data, '\n')
		}
		data = append(data, l...)
	}
	lv.hub.Publish(sessionID, live.Message{First: first, Seq: last, Data: data})
}

func (lv *liveViews) patches(sessionID string, streamed bool, ch view.Changes, v *session.Live) ([]patch, error) {
	if ch.None() {
		return nil, nil
	}
	if streamed {
		return streamPatches(ch), nil // nothing else changes with streamed text
	}
	st := v.Clone()
	rd, err := lv.db.ReadPage(context.Background(), sessionID)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	p := &pageData{ctx: context.Background(), st: st, rd: rd}
	return p.patches(ch)
}

// encodeWire encodes an event with what it introduced, as the trace has
// them, and its patches.
func encodeWire(ev delegation.Event, patches []patch) ([]byte, error) {
	st, err := trace.StepOf(ev)
	if err != nil {
		return nil, err
	}
	stored, err := st.Stored()
	if err != nil {
		return nil, err
	}
	return encodeLogged(stored, st.Message, st.Call, patches)
}

func encodeLogged(ev delegation.Event, m *trace.Message, c *trace.ModelCall, patches []patch) ([]byte, error) {
	w := wireEvent{Seq: ev.Seq, Type: string(ev.Type), At: ev.At.UTC(), Data: ev.Data, Message: m, Call: c, Patches: patches}
	if ev.AgentID != "" {
		id := ev.AgentID
		w.AgentID = &id
	}
	if c != nil && w.Call.StartedAt.IsZero() {
		cc := *c
		cc.StartedAt = w.At
		w.Call = &cc
	}
	return json.Marshal(w)
}

func html(c templ.Component) string {
	var b bytes.Buffer
	_ = c.Render(context.Background(), &b)
	return b.String()
}

func str(s string) *string { return &s }

// streamPatches add streamed text to running calls' rows.
func streamPatches(ch view.Changes) []patch {
	var ps []patch
	for _, s := range ch.Stream {
		ps = append(ps, patch{Sel: attrIs("data-stream", s.CallID), Op: "stream", HTML: s.Text, At: s.At})
	}
	return ps
}

// patches are what a page showing the state before changes must do to
// show the state p draws, panel by panel, each drawn by the functions that
// draw the first render.
func (p *pageData) patches(ch view.Changes) ([]patch, error) {
	st := p.st
	var ps []patch
	add := func(more ...patch) { ps = append(ps, more...) }

	if ch.Status {
		add(patch{Sel: "#status", Op: "replace", HTML: html(templates.StatusBadge(st.Session.Status, st.Session.Error))},
			patch{Sel: "#session-error", Op: "replace", HTML: html(templates.SessionError(st.Session.Status, st.Session.Error))},
			patch{Sel: "#answer", Op: "inner", HTML: html(templates.Answer(st.Session.Answer, st.Session.Status))})
		if st.Session.Status != delegation.StatusRunning {
			add(patch{Sel: "#stop", Op: "remove"}, patch{Sel: ".session", Op: "attrs", Attrs: map[string]*string{"data-running": nil}})
		}
	}
	if ch.Totals {
		add(patch{Sel: "#totals", Op: "inner", HTML: html(templates.Totals(totals(st)))})
	}
	add(p.treePatches(ch)...)
	if ch.NotesAdded {
		add(patch{Sel: "#notes", Op: "replace", HTML: html(templates.NotesSection(p.notes()))})
	}
	more, err := p.delegationPatches(ch)
	if err != nil {
		return ps, err
	}
	add(more...)
	if more, err = p.timelinePatches(ch); err != nil {
		return ps, err
	}
	add(more...)
	if more, err = p.scrubPatches(ch); err != nil {
		return ps, err
	}
	add(more...)
	if more, err = p.filePatches(ch); err != nil {
		return ps, err
	}
	add(more...)
	add(streamPatches(ch)...)
	for _, ev := range ch.Spans {
		if r, ok := spanRow(ev); ok {
			add(patch{Sel: "#spans", Op: "append", HTML: html(templates.SpanItem(r))})
		}
	}
	return ps, nil
}

// treePatches: the whole tree when its shape changed, else the boxes that
// did. The page marks the selected box itself.
func (p *pageData) treePatches(ch view.Changes) []patch {
	if ch.TreeShape {
		return []patch{{Sel: "#tree", Op: "inner", HTML: html(templates.TreeSVG(p.sid(), p.tree("")))}}
	}
	if len(ch.Nodes) == 0 {
		return nil
	}
	var ps []patch
	for _, n := range p.tree("").Nodes {
		for _, id := range ch.Nodes {
			if n.AgentID == id {
				ps = append(ps, patch{Sel: "#tree " + attrIs("data-agent", id), Op: "replace", SVG: true, HTML: html(templates.TreeNode(p.sid(), n))})
			}
		}
	}
	return ps
}

// timelinePatches append the calls started, as the window of the timeline
// shows them, and redraw the rows of calls that ended.
func (p *pageData) timelinePatches(ch view.Changes) ([]patch, error) {
	var ps []patch
	before, after := ch.CallsBefore, p.st.Calls
	if len(ch.Appended) > 0 && after > before {
		rows, err := p.rd.CallsTail(p.ctx, after-before, after)
		if err != nil {
			return nil, err
		}
		rowsHTML := func(from, to int) string { // positions, from 0
			var b strings.Builder
			for _, c := range rows {
				if pos := c.Step - 1; pos >= from && pos < to {
					b.WriteString(html(templates.TimelineItem(p.timelineRow(c))))
				}
			}
			return b.String()
		}
		const windowed, whole = "#timeline[data-window]", "#timeline:not([data-window])"
		ps = append(ps, patch{Sel: whole, Op: "append", HTML: rowsHTML(before, after)})
		g := view.TimelineWindow.Grow(before, after)
		for _, pos := range g.Removed {
			ps = append(ps, patch{Sel: windowed + " > " + attrIs("data-step", strconv.Itoa(pos+1)), Op: "remove"})
		}
		if g.HeadTo > g.HeadFrom {
			ps = append(ps, patch{Sel: windowed, Op: "append", HTML: rowsHTML(g.HeadFrom, g.HeadTo)})
		}
		gap := html(templates.TimelineItem(p.timelineGap(after)))
		if g.Appears {
			ps = append(ps, patch{Sel: windowed + " > " + attrIs("data-step", strconv.Itoa(g.GapFrom)), Op: "after", HTML: gap})
		} else if g.Changes {
			ps = append(ps, patch{Sel: windowed + " > [data-gap]", Op: "replace", HTML: gap})
		}
		if g.TailTo > g.TailFrom {
			ps = append(ps, patch{Sel: windowed, Op: "append", HTML: rowsHTML(g.TailFrom, g.TailTo)})
		}
	}
	for _, f := range ch.Finished {
		if f.Step > before && len(ch.Appended) > 0 {
			continue // drawn as it is now, above
		}
		c, err := p.rd.Call(p.ctx, f.ID)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		c.Step = f.Step
		ps = append(ps, patch{Sel: "#timeline > " + attrIs("id", "call-"+f.ID), Op: "replace", HTML: html(templates.TimelineItem(p.timelineRow(*c)))})
	}
	return ps, nil
}

// scrubPatches: the scrubber's range follows the calls; a scrubber at the
// newest call (data-follow) follows them too.
func (p *pageData) scrubPatches(ch view.Changes) ([]patch, error) {
	if !ch.Scrub || p.st.Calls == 0 {
		return nil, nil
	}
	v, err := p.scrub(0)
	if err != nil {
		return nil, err
	}
	grew := len(ch.Appended) > 0
	if grew && ch.CallsBefore == 0 {
		return []patch{{Sel: "#scrubber", Op: "replace", HTML: html(templates.ScrubberSection(p.sid(), v))}}, nil
	}
	ps := []patch{{Sel: "#scrubber[data-follow] [data-scrub-view]", Op: "replace", HTML: html(templates.ScrubTable(v))}}
	// At a step of the past, an agent that starts now had not started.
	var rows strings.Builder
	for _, id := range ch.Agents {
		if a := p.st.Agent(id); a != nil {
			rows.WriteString(html(templates.ScrubRow(templates.ScrubAgent{AgentID: a.ID, Name: a.Name, NotStarted: true})))
		}
	}
	if rows.Len() > 0 {
		ps = append(ps, patch{Sel: "#scrubber:not([data-follow]) [data-scrub-view] tbody", Op: "append", HTML: rows.String()})
	}
	if grew {
		n := strconv.Itoa(v.Steps)
		ps = append(ps,
			patch{Sel: "#scrubber [data-scrub-steps]", Op: "text", HTML: n},
			patch{Sel: "#scrubber input[type=range]", Op: "attrs", Attrs: map[string]*string{"max": str(n)}},
			patch{Sel: "#scrubber[data-follow] input[type=range]", Op: "attrs", Attrs: map[string]*string{"value": str(n)}},
			patch{Sel: "#scrubber[data-follow] output [data-scrub-step]", Op: "text", HTML: n})
	}
	return ps, nil
}

// filePatches redraw the rows of main's first page of files that changed,
// put in the new ones and take out those that left it.
func (p *pageData) filePatches(ch view.Changes) ([]patch, error) {
	if ch.FilesPage == nil {
		return nil, nil
	}
	count := p.st.Files.Count()
	if ch.FilesBefore == 0 || count == 0 {
		v, err := p.files("")
		return []patch{{Sel: "#files", Op: "inner", HTML: html(templates.Files(v))}}, err
	}
	if page := ch.FilesPage; len(page) == view.FilesPage && page[len(page)-1] < minPath(ch.FilesTouched) {
		// Every change is past a full first page: only the count moves.
		if count == ch.FilesBefore {
			return nil, nil
		}
		v := templates.FilesView{SessionID: p.sid(), Count: count}
		if count > view.FilesPage {
			v.Next = "/sessions/" + p.sid() + "/files?after=" + url.QueryEscape(page[len(page)-1])
		}
		return []patch{{Sel: "#files [data-files-count]", Op: "text", HTML: templates.Plural(count, "file")},
			{Sel: "#files [data-files-more]", Op: "replace", HTML: html(templates.FilesMore(v))}}, nil
	}
	v, err := p.files("")
	if err != nil {
		return nil, err
	}
	before := map[string]bool{}
	for _, path := range ch.FilesPage {
		before[path] = true
	}
	now := map[string]bool{}
	for _, f := range v.Files {
		now[f.Path] = true
	}
	touched := map[string]bool{}
	for _, path := range ch.FilesTouched {
		touched[path] = true
	}
	const list = "#files [data-files]"
	var ps []patch
	for _, path := range ch.FilesPage {
		if !now[path] {
			ps = append(ps, patch{Sel: list + " > " + attrIs("data-file", path), Op: "remove"})
		}
	}
	// New rows go in before the next row that was there already.
	for i, f := range v.Files {
		item := html(templates.FileItem(f))
		switch {
		case before[f.Path] && touched[f.Path]:
			ps = append(ps, patch{Sel: list + " > " + attrIs("data-file", f.Path), Op: "replace", HTML: item})
		case !before[f.Path]:
			next := ""
			for _, g := range v.Files[i+1:] {
				if before[g.Path] {
					next = g.Path
					break
				}
			}
			if next == "" {
				ps = append(ps, patch{Sel: list, Op: "append", HTML: item})
			} else {
				ps = append(ps, patch{Sel: list + " > " + attrIs("data-file", next), Op: "before", HTML: item})
			}
		}
	}
	if count != ch.FilesBefore {
		ps = append(ps, patch{Sel: "#files [data-files-count]", Op: "text", HTML: templates.Plural(count, "file")},
			patch{Sel: "#files [data-files-more]", Op: "replace", HTML: html(templates.FilesMore(v))})
	}
	return ps, nil
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
// changed otherwise; what came back and what was held back are redrawn as
// they change.
func (p *pageData) delegationPatches(ch view.Changes) ([]patch, error) {
	st := p.st
	var ps []patch
	fresh := map[string]bool{} // panes drawn whole in this batch
	for _, child := range ch.Started {
		d := st.Delegation(child)
		if d == nil {
			continue
		}
		panel, err := p.delegationPanel(child)
		if err != nil {
			return nil, err
		}
		body := html(templates.DelegationBody(panel))
		sel := "#delegation" + attrIs("data-show", child)
		if st.Delegations[0] == d {
			sel += ", #delegation" + attrIs("data-show", "") // the first is shown by default
		}
		ps = append(ps, patch{Sel: sel, Op: "inner", HTML: body})
		if st.Delegations[0] == d {
			// Viewers waiting for another delegation now have one to pick.
			ps = append(ps, patch{Sel: "#delegation:not(" + attrIs("data-show", "") + "):not(" + attrIs("data-show", child) + ")",
				Op: "inner", HTML: html(templates.DelegationBody(p.pickPanel()))})
		} else {
			ps = append(ps, patch{Sel: "#delegation [data-pick]", Op: "append", HTML: html(templates.PickItem(p.sid(), pickOption(st, d)))})
		}
		pp, cp := st.PanesOf(d)
		fresh[pp.ID()], fresh[cp.ID()] = true, true
	}
	for _, agent := range ch.Replaced {
		for _, pn := range p.showing(agent, ch) {
			if fresh[pn.ID()] {
				continue
			}
			item, err := p.paneHTML(pn)
			if err != nil {
				return nil, err
			}
			ps = append(ps, patch{Sel: attrIs("data-pane", pn.ID()), Op: "replace", HTML: item})
			fresh[pn.ID()] = true
		}
	}
	for _, agent := range ch.Grown {
		more, err := p.growPatches(agent, ch.Appends[agent], ch, fresh)
		if err != nil {
			return nil, err
		}
		ps = append(ps, more...)
	}
	for _, agent := range ch.CallChanged {
		for _, pn := range p.showing(agent, ch) {
			if fresh[pn.ID()] {
				continue
			}
			v, err := p.pane(pn)
			if err != nil {
				return nil, err
			}
			base := attrIs("data-pane", pn.ID())
			ps = append(ps, patch{Sel: base + " [data-total]", Op: "replace", HTML: html(templates.PaneTotal(v))})
			if d := st.Delegation(pn.Delegation); pn.Kind == view.PaneChild && d != nil && d.Mode == string(delegation.ModeFork) {
				ps = append(ps, patch{Sel: base + " [data-note]", Op: "replace", HTML: html(templates.ChildNote(d.Mode, v))})
			}
			for _, list := range [][]templates.MessageView{v.Inherited, v.Messages} {
				for _, m := range list {
					if m.Gap > 0 {
						which := "ol.own"
						if m.Inherited {
							which = "ol.inherited"
						}
						ps = append(ps, patch{Sel: base + " " + which + " > [data-testid=gap]", Op: "replace", HTML: html(templates.MessageItem(m))})
					}
				}
			}
		}
	}
	for _, child := range ch.Frozen {
		if d := st.Delegation(child); d != nil {
			pp, _ := st.PanesOf(d)
			if !fresh[pp.ID()] {
				ps = append(ps, patch{Sel: attrIs("data-pane", pp.ID()), Op: "attrs", Attrs: map[string]*string{"data-follows": nil}})
			}
		}
	}
	for _, child := range ch.Crossing {
		d := st.Delegation(child)
		if d == nil || slices.Contains(ch.Started, child) {
			continue
		}
		cb, err := p.cameBack(d)
		if err != nil {
			return nil, err
		}
		ps = append(ps, patch{Sel: attrIs("data-came-back", child), Op: "replace", HTML: html(templates.CameBack(cb))},
			patch{Sel: attrIs("data-held-back", child), Op: "replace", HTML: html(templates.HeldBack(p.heldBack(d)))})
	}
	return ps, nil
}

// paneHTML draws a pane whole.
func (p *pageData) paneHTML(pn view.Pane) (string, error) {
	v, err := p.pane(pn)
	if err != nil {
		return "", err
	}
	if pn.Kind == view.PaneParent {
		return html(templates.ParentPane(p.sid(), v)), nil
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
	return html(templates.ChildPane(p.sid(), mode, name, v)), nil
}

// growPatches: the panes that showed an agent's context as it grew get its
// new messages, as their window shows them: those that follow it, and those
// that stopped following it in this batch (up to where they stopped). Panes
// whose patches are the same get them once, between them.
func (p *pageData) growPatches(agentID string, before int, ch view.Changes, fresh map[string]bool) ([]patch, error) {
	panes := p.showing(agentID, ch)
	type group struct {
		sels []string
		ps   []patch // with Sel the suffix after the pane's list
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
		g.sels = append(g.sels, attrIs("data-pane", pn.ID())+" ol.own")
	}
	var out []patch
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
func (p *pageData) showing(agentID string, ch view.Changes) []view.Pane {
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
func (p *pageData) paneGrowth(pn view.Pane, before int) ([]patch, error) {
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
		url = "/sessions/" + p.sid() + "/calls/" + cx.Call.ID
	}
	span := func(from, to int) (patch, error) {
		views, err := p.spanViews(own, from, to, false, pn.TaskCallID)
		var b strings.Builder
		for _, m := range views {
			b.WriteString(html(templates.MessageItem(m)))
		}
		return patch{Op: "append", HTML: b.String()}, err
	}
	g := view.PaneWindow.Grow(before, after)
	var ps []patch
	for _, pos := range g.Removed {
		ps = append(ps, patch{Sel: " > " + attrIs("data-k", keyAt(own, pos)), Op: "remove"})
	}
	if g.HeadTo > g.HeadFrom {
		x, err := span(g.HeadFrom, g.HeadTo)
		if err != nil {
			return nil, err
		}
		ps = append(ps, x)
	}
	gap := html(templates.MessageItem(templates.MessageView{Gap: g.GapTo - g.GapFrom, URL: url}))
	if g.Appears {
		ps = append(ps, patch{Sel: " > " + attrIs("data-k", keyAt(own, g.GapFrom-1)), Op: "after", HTML: gap})
	} else if g.Changes {
		ps = append(ps, patch{Sel: " > [data-testid=gap]", Op: "replace", HTML: gap})
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

// syncPatches bring a page opened at an older seq to the state p draws:
// every panel drawn again, for the viewer's choice.
func (p *pageData) syncPatches(c choice, running bool) ([]patch, error) {
	v, err := p.sessionPage(templates.Page{}, c, running)
	if err != nil {
		return nil, err
	}
	var rows strings.Builder
	for _, r := range v.Timeline {
		rows.WriteString(html(templates.TimelineItem(r)))
	}
	ps := []patch{
		{Sel: "#status", Op: "replace", HTML: html(templates.StatusBadge(v.Status, v.Error))},
		{Sel: "#session-error", Op: "replace", HTML: html(templates.SessionError(v.Status, v.Error))},
		{Sel: "#totals", Op: "inner", HTML: html(templates.Totals(v.Totals))},
		{Sel: "#tree", Op: "inner", HTML: html(templates.TreeSVG(v.ID, v.Tree))},
		{Sel: "#notes", Op: "replace", HTML: html(templates.NotesSection(v.Notes))},
		{Sel: "#delegation", Op: "inner", HTML: html(templates.DelegationBody(v.Delegation))},
		{Sel: "#scrubber", Op: "replace", HTML: html(templates.ScrubberSection(v.ID, v.Scrub))},
		{Sel: "#timeline", Op: "inner", HTML: rows.String()},
		{Sel: "#answer", Op: "inner", HTML: html(templates.Answer(v.Answer, v.Status))},
		{Sel: "#files", Op: "inner", HTML: html(templates.Files(v.Files))},
	}
	if !running {
		ps = append(ps, patch{Sel: "#stop", Op: "remove"}, patch{Sel: ".session", Op: "attrs", Attrs: map[string]*string{"data-running": nil}})
	}
	return ps, nil
}

// apiLive is the session's websocket: every event after ?after=SEQ, then
// live events as they happen (formats.md §5). With ?view=1 (the session
// page's own), a page opened at SEQ gets instead one "sync" message that
// brings it to the session's seq, drawn for its choice (?agent, ?step,
// ?timeline), then live events with their patches.
func (s *Server) apiLive(c echo.Context) error {
	id := c.Param("id")
	after, err := strconv.ParseInt(c.QueryParam("after"), 10, 64)
	if c.QueryParam("after") == "" {
		after, err = 0, nil
	}
	if err != nil || after < 0 {
		return echo.NewHTTPError(400, "after must be a seq: a whole number, 0 or more")
	}
	if _, err := s.cfg.DB.Session(c.Request().Context(), id); err != nil {
		return err
	}
	var backlog live.Backlog
	if c.QueryParam("view") != "" {
		ch := choiceOf(c)
		backlog = func(ctx context.Context, from int64, limit int) ([]live.Message, error) {
			st, rd, err := s.runner.View(ctx, id)
			if err != nil {
				return nil, err
			}
			defer rd.Close()
			if st.Seq <= from {
				return nil, nil // nothing to send: the page is up to date
			}
			p := &pageData{ctx: ctx, st: st, rd: rd}
			ps, err := p.syncPatches(ch, s.running(ctx, id, st.Session.Status))
			if err != nil {
				return nil, err
			}
			data, err := json.Marshal(wireEvent{Seq: st.Seq, Type: "sync", At: time.Now().UTC(), Patches: ps})
			return []live.Message{{Seq: st.Seq, Data: data}}, err
		}
	} else {
		// The stored log, a page at a time, straight from the store.
		backlog = func(ctx context.Context, from int64, limit int) ([]live.Message, error) {
			events, err := s.cfg.DB.EventsPage(ctx, id, from, limit)
			if err != nil {
				return nil, err
			}
			out := make([]live.Message, 0, len(events))
			for _, ev := range events {
				data, err := encodeLogged(ev.Event, ev.Message, ev.Call, nil)
				if err != nil {
					return nil, err
				}
				out = append(out, live.Message{Seq: ev.Seq, Data: data})
			}
			return out, nil
		}
	}
	return s.hub.Serve(c.Response(), c.Request(), id, after, backlog, live.ServeOptions{})
}
