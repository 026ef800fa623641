package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// comparePage puts two sessions side by side (?a=ID&b=ID).
func (s *Server) comparePage(c echo.Context) error {
	ids := [2]string{c.QueryParam("a"), c.QueryParam("b")}
	if ids[0] == "" || ids[1] == "" {
		return echo.NewHTTPError(http.StatusBadRequest, "name two sessions to compare: /compare?a=ID&b=ID")
	}
	var sides [2]templates.CompareSide
	for i, id := range ids {
		st, rd, err := s.runner.View(c.Request().Context(), id)
		if err != nil {
			return err
		}
		p := &pageData{ctx: c.Request().Context(), st: st, rd: rd}
		sides[i], err = p.compareSide()
		rd.Close()
		if err != nil {
			return err
		}
	}
	received, err := s.conformance(c, ids, sides)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.CompareView(templates.ComparePage{Page: s.page(c, "Compare"), A: sides[0], B: sides[1],
		Deltas: compareDeltas(sides[0], sides[1]), Received: received}))
}

// maxConformanceCalls bounds the sessions compare reads whole to set what
// each call received side by side: the scenarios a framework is checked
// against are small, and a page must not hold a huge session in memory.
const maxConformanceCalls = 2000

// conformance is compare's call-by-call view of what the two sessions'
// calls received (session.Compare), for sessions of at most
// maxConformanceCalls calls each.
func (s *Server) conformance(c echo.Context, ids [2]string, sides [2]templates.CompareSide) (session.Conformance, error) {
	for _, side := range sides {
		if side.Calls > maxConformanceCalls {
			return session.Conformance{Skipped: fmt.Sprintf("%s made %d model calls: compare sets what each call received side by side "+
				"for sessions of at most %d.", side.Name, side.Calls, maxConformanceCalls)}, nil
		}
	}
	var traces [2]*trace.Trace
	for i, id := range ids {
		t, err := s.cfg.DB.Trace(c.Request().Context(), id)
		if err != nil {
			return session.Conformance{}, err
		}
		traces[i] = t
	}
	return session.Compare(traces[0], traces[1]), nil
}

// compareSide is what a comparison shows of one session: its page state's
// tree and costs, and the receipts, read by their places.
func (p *pageData) compareSide() (templates.CompareSide, error) {
	st := p.st
	side := templates.CompareSide{ID: st.Session.ID, Name: st.Session.Name, Title: st.Session.Title, Status: st.Session.Status,
		Tree: p.tree(""), Calls: st.Calls, Tokens: st.Tokens, Cached: st.Cached, Cost: st.Cost.Total, Priced: st.Cost.Priced()}
	var walk func(n *view.Node) error
	walk = func(n *view.Node) error {
		a := n.Agent
		ac := templates.AgentCost{ID: a.ID, Name: a.Name, Mode: a.Mode, Status: a.Status, Own: a.OwnTokens, Subtree: n.SubtreeTokens,
			Entry: a.EntryTokens, Inherited: a.InheritedTokens, Calls: a.Calls,
			EntryCached: a.EntryCached, SubtreeCached: n.SubtreeCached, Cost: n.SubtreeCost.Total, Priced: n.SubtreeCost.Priced()}
		if ac.Priced {
			ac.SubtreeCost = view.Dollars(ac.Cost)
		}
		if d := n.Delegation; d != nil && d.Receipt != nil {
			m, err := p.rd.MessageAt(p.ctx, d.Receipt.AgentID, d.Receipt.Index)
			if err != nil {
				return err
			}
			if m != nil {
				ac.Receipt, ac.ReceiptIsError = m.Content, m.IsError
			}
		}
		first, err := p.rd.FirstCall(p.ctx, a.ID)
		if err != nil {
			return err
		}
		if first != nil {
			for _, r := range first.Context {
				ac.EntryMessages += r.Len()
			}
		}
		side.Agents = append(side.Agents, ac)
		for _, c := range n.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if root := st.Tree(); root != nil {
		if err := walk(root); err != nil {
			return side, err
		}
	}
	return side, nil
}

// bothModes runs a lesson's or a session's scenario twice — every subagent
// isolated, then every subagent a fork — and compares the two runs.
func (s *Server) bothModes(c echo.Context) error {
	var doc []byte
	switch {
	case c.FormValue("lesson") != "":
		l, err := lessons.Get(c.FormValue("lesson"))
		if err != nil {
			return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
		}
		doc = l.Scenario
	case c.FormValue("session") != "":
		sess, err := s.cfg.DB.Session(c.Request().Context(), c.FormValue("session"))
		if err != nil {
			return err
		}
		doc = sess.Scenario
	default:
		return echo.NewHTTPError(http.StatusBadRequest, "name a lesson or a session to run in both modes")
	}
	var ids [2]string
	for i, mode := range []delegation.Mode{delegation.ModeIsolated, delegation.ModeFork} {
		sc, err := inMode(doc, mode)
		if err != nil {
			return err
		}
		if ids[i], err = s.runner.Start(c.Request().Context(), sc); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, "/compare?a="+ids[0]+"&b="+ids[1])
}

// inMode is a scenario with every subagent in one mode, the built-in
// general-purpose one included (declared, so its mode can change).
func inMode(doc []byte, mode delegation.Mode) (*scenario.Scenario, error) {
	var f scenario.File
	if err := json.Unmarshal(doc, &f); err != nil {
		return nil, delegation.Errorf(delegation.EINVALID, "the scenario cannot be read: %v", err)
	}
	declared := false
	for i := range f.Subagents {
		f.Subagents[i].Mode = string(mode)
		if mode == delegation.ModeFork {
			f.Subagents[i].Skills = nil // a fork inherits its parent's
			f.Subagents[i].Tools = nil  // and its tools
		}
		declared = declared || f.Subagents[i].Name == delegation.GeneralPurposeName
	}
	gpOff := f.Agent != nil && f.Agent.GeneralPurpose != nil && !*f.Agent.GeneralPurpose
	if !declared && !gpOff {
		gp := delegation.GeneralPurpose
		f.Subagents = append([]scenario.Subagent{{Name: gp.Name, Description: gp.Description, SystemPrompt: gp.SystemPrompt,
			Mode: string(mode)}}, f.Subagents...)
	}
	f.Name += " (" + string(mode) + ")"
	if f.Title != "" {
		f.Title += " — all subagents " + string(mode)
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return scenario.Build(f, raw)
}

// compareDeltas sets B's figures against A's: the sessions' input, cached
// and cost, then, for each agent both have (by id), its entry, the cached
// part of it, and its subtree's cost.
func compareDeltas(a, b templates.CompareSide) []templates.CompareDelta {
	ints := func(what string, x, y int) templates.CompareDelta {
		return templates.CompareDelta{What: what, A: templates.Thousands(x), B: templates.Thousands(y), Delta: signedThousands(y - x)}
	}
	money := func(what string, x, y float64, px, py bool) (templates.CompareDelta, bool) {
		if !px || !py {
			return templates.CompareDelta{}, false
		}
		d := "+" + view.Dollars(y-x)
		if y < x {
			d = "−" + view.Dollars(x-y)
		}
		return templates.CompareDelta{What: what, A: view.Dollars(x), B: view.Dollars(y), Delta: d}, true
	}
	out := []templates.CompareDelta{ints("input tokens", a.Tokens, b.Tokens), ints("cached", a.Cached, b.Cached),
		ints("new (not cached)", a.Tokens-a.Cached, b.Tokens-b.Cached)}
	if d, ok := money("cost", a.Cost, b.Cost, a.Priced, b.Priced); ok {
		out = append(out, d)
	}
	byID := map[string]templates.AgentCost{}
	for _, x := range a.Agents {
		byID[x.ID] = x
	}
	for _, y := range b.Agents {
		x, ok := byID[y.ID]
		if !ok {
			continue
		}
		name := y.Name + " (" + y.ID + ")"
		out = append(out, ints(name+": entry", x.Entry, y.Entry), ints(name+": cached at entry", x.EntryCached, y.EntryCached))
		if d, ok := money(name+": subtree cost", x.Cost, y.Cost, x.Priced, y.Priced); ok {
			out = append(out, d)
		}
	}
	return out
}

func signedThousands(n int) string {
	switch {
	case n > 0:
		return "+" + templates.Thousands(n)
	case n < 0:
		return "−" + templates.Thousands(-n)
	}
	return "0"
}
