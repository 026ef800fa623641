// Package present draws a session's page from its page state (the fold of
// its log, internal/view) and a read of its store at the same seq: the first
// render and every live patch, each panel drawn by the same functions
// and components for both. It renders; internal/server routes to it.
package present

import (
	"context"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// New draws a session's pages from its state st and its store's read rd at
// the same seq, in the language ctx carries. Close closes rd.
func New(ctx context.Context, st *view.State, rd db.PageReader) *Page {
	return &Page{ctx: ctx, st: st, rd: rd}
}

// State is the page state the page is drawn from.
func (p *Page) State() *view.State { return p.st }

// Reader is the store's read the page is drawn from.
func (p *Page) Reader() db.PageReader { return p.rd }

// SessionID is the id of the session drawn.
func (p *Page) SessionID() string { return p.sid() }

// Close closes the page's read of the store.
func (p *Page) Close() { p.rd.Close() }

// Scrub is the scrubber at a step (0: now).
func (p *Page) Scrub(step int) (templates.ScrubView, error) {
	at, err := p.stepAt(step)
	if err != nil {
		return templates.ScrubView{}, err
	}
	return p.scrub(at)
}

// Inherited is the pane paneID (named as the session page names it:
// child:a1, parent:a1, agent:main) at a step with its inherited messages
// alone, which the pane loads when they are opened; false if there is no
// such pane.
func (p *Page) Inherited(paneID string, step int) (templates.ContextView, bool, error) {
	pn, ok := p.paneByID(paneID)
	if !ok {
		return templates.ContextView{}, false, nil
	}
	at, err := p.stepAt(step)
	if err != nil {
		return templates.ContextView{}, true, err
	}
	p.inheritedOnly = true
	v, err := p.pane(pn, at)
	return v, true, err
}
