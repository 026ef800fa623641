package present

import (
	"github.com/a-h/templ"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// A panel is one part of the session page, described once: where it sits
// (the element sel, which its component fills by op), the component that
// draws it from the viewer's page — the same for the first render, a sync
// and a live redraw — and which changes a live page must follow.
// The first render places it with @v.Panel(name) (web/templates); the
// live-equals-reload test compares every panel listed here.
type panel struct {
	// name is the panel's name in the page (v.Panel) and in tests.
	name string
	// sel is the element that holds the panel; op how draw fills it:
	// "replace" (draw is the element) or "inner" (its content).
	sel, op string
	// draw is the panel as a fresh render of the viewer's page v has it
	// (nil: not drawn whole; whole says what a sync does).
	draw func(v *templates.SessionPage) templ.Component
	// whole, when set, is what brings a page's panel to v instead of
	// drawing it into sel.
	whole func(v *templates.SessionPage) []Patch
	// dirty: the changes after which a live page gets the panel whole, as
	// it is now.
	dirty func(ch view.Changes) bool
	// patch is what a live batch does to the panel otherwise: for panels
	// drawn for a viewer's choice (the agent picked, a step of the past),
	// which a patch for every viewer must leave as their choice has them.
	patch func(p *Page, ch view.Changes) ([]Patch, error)
}

// panels are the session page's panels, in the order their patches go.
func panels() []panel {
	statusChanged := func(ch view.Changes) bool { return ch.Status }
	return []panel{
		{name: "status", sel: "#status", op: "replace", dirty: statusChanged,
			draw: func(v *templates.SessionPage) templ.Component {
				return templates.StatusBadge(v.Status, v.Error, v.StoppedBy, v.Code)
			}},
		{name: "session-error", sel: "#session-error", op: "replace", dirty: statusChanged,
			draw: func(v *templates.SessionPage) templ.Component {
				return templates.SessionError(v.Status, v.Error, v.StoppedBy, v.Code)
			}},
		{name: "totals", sel: "#totals", op: "inner", dirty: func(ch view.Changes) bool { return ch.Totals },
			draw: func(v *templates.SessionPage) templ.Component { return templates.Totals(v.Totals) }},
		{name: "tree", sel: "#tree", op: "replace", patch: (*Page).treePatches,
			draw: func(v *templates.SessionPage) templ.Component {
				return templates.TreeBox(v.ID, v.Tree, v.At, v.Scrub.Steps)
			}},
		{name: "notes", sel: "#notes", op: "replace", dirty: func(ch view.Changes) bool { return ch.NotesAdded },
			draw: func(v *templates.SessionPage) templ.Component { return templates.NotesSection(v.Notes) }},
		{name: "delegation", sel: "#delegation", op: "replace", patch: (*Page).delegationPatches,
			draw: func(v *templates.SessionPage) templ.Component { return templates.DelegationSection(v.Delegation) }},
		{name: "timeline", sel: "#timeline", op: "replace", patch: (*Page).waterfallPatches,
			draw: func(v *templates.SessionPage) templ.Component { return templates.WaterfallView(v.Timeline) }},
		{name: "scrubber", sel: "#scrubber", op: "replace", patch: (*Page).scrubPatches,
			draw: func(v *templates.SessionPage) templ.Component { return templates.ScrubberSection(v.Scrub) }},
		{name: "answer", sel: "#answer", op: "inner", dirty: statusChanged,
			draw: func(v *templates.SessionPage) templ.Component { return templates.Answer(v.Answer, v.Status) }},
		{name: "files", sel: "#files", op: "inner", patch: (*Page).filePatches,
			draw: func(v *templates.SessionPage) templ.Component { return templates.Files(v.Files) }},
		// The controls: a session that ended has nothing to stop.
		{name: "controls", sel: ".session > .head .actions", dirty: statusChanged,
			whole: func(v *templates.SessionPage) []Patch {
				if v.Running {
					return nil
				}
				return []Patch{{Sel: "#stop", Op: "remove"}, {Sel: ".session", Op: "attrs", Attrs: map[string]*string{"data-running": nil}}}
			}},
		// Text streamed into running calls' rows, and spans that map to
		// nothing of ours: live only, a reload draws them in their panels.
		{name: "stream", sel: "[data-stream]", patch: func(_ *Page, ch view.Changes) ([]Patch, error) { return StreamPatches(ch), nil }},
		{name: "spans", sel: "#spans", patch: (*Page).spanPatches},
	}
}

// wholePatches bring the panel of a page to v.
func (pn panel) wholePatches(p *Page, v *templates.SessionPage) []Patch {
	if pn.whole != nil {
		return pn.whole(v)
	}
	if pn.draw == nil {
		return nil
	}
	return []Patch{{Sel: pn.sel, Op: pn.op, HTML: p.html(pn.draw(v))}}
}

// Patches are what a page showing the state before changes must do to
// show the state p draws, panel by panel, each drawn by the components
// that draw the first render.
func (p *Page) Patches(ch view.Changes) ([]Patch, error) {
	var ps []Patch
	var now *templates.SessionPage // the page as it is now, for panels drawn whole
	for _, pn := range panels() {
		if pn.dirty != nil && pn.dirty(ch) {
			if now == nil {
				v := p.statePage(templates.Page{}, p.st.Session.Status == delegation.StatusRunning)
				now = &v
			}
			ps = append(ps, pn.wholePatches(p, now)...)
		}
		if pn.patch != nil {
			more, err := pn.patch(p, ch)
			if err != nil {
				return ps, err
			}
			ps = append(ps, more...)
		}
	}
	return ps, nil
}

// SyncPatches bring a page opened at an older seq to the state p draws:
// every panel drawn again, for the viewer's choice.
func (p *Page) SyncPatches(c Choice, running bool) ([]Patch, error) {
	v, err := p.SessionPage(templates.Page{}, c, running)
	if err != nil {
		return nil, err
	}
	var ps []Patch
	for _, pn := range panels() {
		ps = append(ps, pn.wholePatches(p, &v)...)
	}
	return ps, nil
}

func (p *Page) spanPatches(ch view.Changes) ([]Patch, error) {
	var ps []Patch
	for _, ev := range ch.Spans {
		if r, ok := spanRow(ev); ok {
			ps = append(ps, Patch{Sel: "#spans", Op: "append", HTML: p.html(templates.SpanItem(r))})
		}
	}
	return ps, nil
}
