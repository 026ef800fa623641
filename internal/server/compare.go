package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/delegationstudio/studio/internal/conformance"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/present"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// comparePage puts two sessions side by side (?a=ID&b=ID); with fewer than
// two it is a picker of recent sessions, lessons' runs and teams' runs.
// ?fragment=1 is the comparison alone, which the page redraws while either
// side runs.
func (s *Server) comparePage(c echo.Context) error {
	ctx := c.Request().Context()
	a, b := c.QueryParam("a"), c.QueryParam("b")
	v := templates.ComparePage{Page: s.page(c, tr(c).T("nav.compare"))}
	if a != "" && b != "" {
		body, err := s.compareBody(ctx, a, b)
		if err != nil {
			return err
		}
		if c.QueryParam("fragment") != "" {
			return render(c, http.StatusOK, templates.CompareBodyView(body))
		}
		v.Body = &body
		v.Page.Title = "Compare " + body.A.Name + " and " + body.B.Name
	}
	var err error
	if v.Picker, err = s.comparePicker(ctx, a, b); err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.CompareView(v, s.now()))
}

// compareBody is two sessions side by side, each drawn from its page state
// (the same fold as its session page, live while it runs), with the
// differences between them.
func (s *Server) compareBody(ctx context.Context, a, b string) (templates.CompareBody, error) {
	body := templates.CompareBody{FragmentURL: "/compare?a=" + url.QueryEscape(a) + "&b=" + url.QueryEscape(b) + "&fragment=1"}
	var states [2]*view.State
	var files [2][]db.File
	for i, id := range []string{a, b} {
		st, rd, err := s.runner.View(ctx, id)
		if err != nil {
			return body, err
		}
		side, err := present.New(ctx, st, rd).CompareSide()
		if err == nil {
			files[i], err = rd.Files(ctx, "", compareFiles+1, diffBytes+1)
		}
		rd.Close()
		if err != nil {
			return body, err
		}
		states[i] = st
		if s.running(ctx, id, st.Session.Status) {
			body.Live = true
			if body.LiveSessions != "" {
				body.LiveSessions += " "
			}
			body.LiveSessions += id + ":" + strconv.FormatInt(st.Seq, 10)
		}
		if i == 0 {
			body.A = side
		} else {
			body.B = side
		}
	}
	body.Figures = compareFigures(states[0], states[1], files[0], files[1])
	body.Agents, body.Receipts = pairAgents(body.A.Agents, body.B.Agents)
	body.Files, body.FilesMore = diffFiles(files[0], files[1])
	if body.Live {
		body.Received.Skipped = "What each call received is set side by side once both sessions have ended."
		return body, nil
	}
	var err error
	body.Received, err = s.conformance(ctx, [2]string{a, b}, [2]templates.CompareSide{body.A, body.B})
	return body, err
}

// maxConformanceCalls bounds the sessions compare reads whole to set what
// each call received side by side: the scenarios a framework is checked
// against are small, and a page must not hold a huge session in memory.
const maxConformanceCalls = 2000

// conformance is compare's call-by-call view of what the two sessions'
// calls received (conformance.Compare), for sessions of at most
// maxConformanceCalls calls each.
func (s *Server) conformance(ctx context.Context, ids [2]string, sides [2]templates.CompareSide) (conformance.Report, error) {
	for _, side := range sides {
		if side.Calls > maxConformanceCalls {
			return conformance.Report{Skipped: fmt.Sprintf("%s made %d model calls: compare sets what each call received side by side "+
				"for sessions of at most %d.", side.Name, side.Calls, maxConformanceCalls)}, nil
		}
	}
	var traces [2]*trace.Trace
	for i, id := range ids {
		t, err := s.cfg.DB.Trace(ctx, id)
		if err != nil {
			return conformance.Report{}, err
		}
		traces[i] = t
	}
	return conformance.Compare(traces[0], traces[1]), nil
}

// compareFiles is how many of each side's files a comparison reads, in
// path order; diffBytes how much of a file it diffs.
const (
	compareFiles = 100
	diffBytes    = 32 << 10
)

// compareFigures are the figures a comparison sets side by side, each with
// its difference: one row each, in order. Add a figure here and the page
// shows it with its delta.
func compareFigures(a, b *view.State, fa, fb []db.File) []templates.Figure {
	children := func(st *view.State) (n, entry, inherited, cached int) {
		for _, ag := range st.Agents {
			if ag.ParentID != "" {
				n++
				entry += ag.EntryTokens
				inherited += ag.InheritedTokens
				cached += ag.EntryCached
			}
		}
		return
	}
	ca, ea, ia, xa := children(a)
	cb, eb, ib, xb := children(b)
	ms := func(st *view.State) int {
		if st.Session.FinishedAt == nil || st.Session.CreatedAt.IsZero() {
			return 0
		}
		return int(st.Session.FinishedAt.Sub(st.Session.CreatedAt).Milliseconds())
	}
	n := func(key, label string, x, y int) templates.Figure {
		return templates.Figure{Key: key, Label: label, A: float64(x), B: float64(y)}
	}
	out := []templates.Figure{
		n("agents", "Agents", len(a.Agents), len(b.Agents)),
		n("children", "Subagents started", ca, cb),
		n("calls", "Model calls", a.Calls, b.Calls),
		n("tokens", "Input tokens, in all", a.Tokens, b.Tokens),
		n("cached", "of which cached (a prompt cache can serve them)", a.Cached, b.Cached),
		n("uncached", "of which new (not cached)", a.Tokens-a.Cached, b.Tokens-b.Cached),
		n("entry", "Entry cost of the subagents (their first calls' input)", ea, eb),
		n("inherited", "of which inherited from a parent", ia, ib),
		n("entry-cached", "of which cached at entry", xa, xb),
	}
	if a.Cost.Priced() && b.Cost.Priced() {
		out = append(out, templates.Figure{Key: "cost", Label: "Cost, at each agent's price", A: a.Cost.Total, B: b.Cost.Total, Dollars: true})
	}
	return append(out,
		n("notes", "Notes (worth a look)", len(a.Notes), len(b.Notes)),
		n("files", "Main's files at the end", a.Files.Count(), b.Files.Count()),
		templates.Figure{Key: "duration", Label: "Duration (ms)", A: float64(ms(a)), B: float64(ms(b)), Noise: 0.1},
	)
}

// pairAgents matches the agents of two sessions: the n-th agent of a name
// on one side with the n-th of that name on the other, in the order they
// started; and the receipts of the children so matched, diffed.
func pairAgents(a, b []templates.AgentCost) ([]templates.AgentPair, []templates.ReceiptPair) {
	key := func(list []templates.AgentCost) []string {
		seen := map[string]int{}
		out := make([]string, len(list))
		for i, ag := range list {
			seen[ag.Name]++
			out[i] = ag.Name + "#" + strconv.Itoa(seen[ag.Name])
		}
		return out
	}
	ka, kb := key(a), key(b)
	inB := map[string]int{}
	for i, k := range kb {
		inB[k] = i
	}
	var pairs []templates.AgentPair
	used := map[int]bool{}
	for i := range a {
		p := templates.AgentPair{Name: a[i].Name, A: &a[i]}
		if j, ok := inB[ka[i]]; ok {
			p.B, used[j] = &b[j], true
		}
		pairs = append(pairs, p)
	}
	for j := range b {
		if !used[j] {
			pairs = append(pairs, templates.AgentPair{Name: b[j].Name, B: &b[j]})
		}
	}
	var receipts []templates.ReceiptPair
	for _, p := range pairs {
		if (p.A == nil || p.A.Mode == "") && (p.B == nil || p.B.Mode == "") {
			continue // the main agents: no receipt
		}
		r := templates.ReceiptPair{Name: p.Name}
		if p.A != nil {
			r.A, r.AIsError, r.AHas = p.A.Receipt, p.A.ReceiptIsError, p.A.HasReceipt
		}
		if p.B != nil {
			r.B, r.BIsError, r.BHas = p.B.Receipt, p.B.ReceiptIsError, p.B.HasReceipt
		}
		r.Same = r.AHas == r.BHas && r.A == r.B && r.AIsError == r.BIsError
		if !r.Same && r.AHas && r.BHas {
			r.Diff = diffText(r.A, r.B)
		}
		receipts = append(receipts, r)
	}
	return pairs, receipts
}

// diffText is the difference of two texts for a person: the parts they
// share, and what only one has, cleaned up to whole words where it can.
func diffText(a, b string) []templates.DiffPart {
	dmp := diffmatchpatch.New()
	ds := dmp.DiffCleanupSemantic(dmp.DiffMain(a, b, false))
	out := make([]templates.DiffPart, 0, len(ds))
	for _, d := range ds {
		op := "same"
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			op = "a"
		case diffmatchpatch.DiffInsert:
			op = "b"
		}
		out = append(out, templates.DiffPart{Op: op, Text: d.Text})
	}
	return out
}

// diffFiles sets main's final files of two sessions side by side: the same,
// changed (diffed, when both are small enough), or on one side only.
func diffFiles(a, b []db.File) ([]templates.FilePair, bool) {
	more := len(a) > compareFiles || len(b) > compareFiles
	a, b = a[:min(len(a), compareFiles)], b[:min(len(b), compareFiles)]
	var out []templates.FilePair
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].Path < b[j].Path):
			out = append(out, templates.FilePair{Path: a[i].Path, Status: "only-a", ASize: a[i].Size})
			i++
		case i >= len(a) || b[j].Path < a[i].Path:
			out = append(out, templates.FilePair{Path: b[j].Path, Status: "only-b", BSize: b[j].Size})
			j++
		default:
			fa, fb := a[i], b[j]
			p := templates.FilePair{Path: fa.Path, Status: "same", ASize: fa.Size, BSize: fb.Size}
			if fa.Size != fb.Size || fa.Preview != fb.Preview {
				p.Status = "changed"
				if fa.Size <= diffBytes && fb.Size <= diffBytes {
					p.Diff = diffText(fa.Preview, fb.Preview)
				}
			}
			out = append(out, p)
			i, j = i+1, j+1
		}
	}
	return out, more
}

// comparePicker offers what to compare: pairs that go together (a lesson's
// two runs, a scenario in both modes, a team's run beside its source), and
// every recent session grouped by the run it belongs to.
func (s *Server) comparePicker(ctx context.Context, a, b string) (templates.ComparePicker, error) {
	pk := templates.ComparePicker{A: a, B: b}
	lang := i18n.From(ctx)
	runs, err := s.cfg.DB.Runs(ctx, db.RunFilter{Limit: 30})
	if err != nil {
		return pk, err
	}
	list, err := s.cfg.DB.Teams(ctx)
	if err != nil {
		return pk, err
	}
	teams := map[string]string{}
	for _, t := range list {
		teams[t.ID] = t.Name
	}
	inRun := map[string]bool{}
	for _, r := range runs {
		g := templates.SessionGroup{When: r.CreatedAt}
		switch r.Kind {
		case db.RunLesson:
			g.Label = lang.T("compare.group.lesson", "Title", lang.Text(lessonTitle(r.Lesson)))
			if r.Mode == modeDeepagents {
				g.Label = lang.T("compare.group.lesson_deepagents", "Title", lang.Text(lessonTitle(r.Lesson)))
			}
		case db.RunModes:
			g.Label = lang.T("compare.group.modes", "Title", cmp.Or(lang.Text(lessonTitle(r.Lesson)), lang.T("compare.group.a_session")))
		case db.RunTeam:
			g.Label = lang.T("compare.group.team", "Name", cmp.Or(teams[r.TeamID], r.TeamID))
		}
		for _, rs := range r.Sessions {
			g.Options = append(g.Options, templates.SessionOption{ID: rs.SessionID, Label: rs.Variant + " — " + rs.Name, Status: rs.Status})
			inRun[rs.SessionID] = true
		}
		if len(r.Sessions) >= 2 && len(pk.Pairs) < 8 {
			first := r.Sessions[0]
			for _, other := range r.Sessions[1:] {
				pk.Pairs = append(pk.Pairs, templates.ComparePair{Label: g.Label, A: first.Variant, B: other.Variant, When: r.CreatedAt,
					URL: "/compare?a=" + url.QueryEscape(first.SessionID) + "&b=" + url.QueryEscape(other.SessionID)})
				if r.Kind != db.RunLesson {
					break
				}
			}
		}
		pk.Groups = append(pk.Groups, g)
	}
	recent, err := s.cfg.DB.Sessions(ctx, 50)
	if err != nil {
		return pk, err
	}
	g := templates.SessionGroup{Label: lang.T("compare.group.recent")}
	for _, x := range recent {
		if !inRun[x.ID] {
			g.Options = append(g.Options, templates.SessionOption{ID: x.ID, Label: x.Name, Status: x.Status})
		}
	}
	if len(g.Options) > 0 {
		pk.Groups = append([]templates.SessionGroup{g}, pk.Groups...)
	}
	return pk, nil
}

func lessonTitle(name string) string {
	if name == "" {
		return ""
	}
	if l, err := lessons.Get(name); err == nil {
		return l.Title
	}
	return name
}

// bothModes runs a lesson's or a session's scenario twice — every subagent
// isolated, then every subagent a fork — keeps the two as a run, and
// compares them.
func (s *Server) bothModes(c echo.Context) error {
	ctx := c.Request().Context()
	var doc []byte
	run := &db.Run{Kind: db.RunModes}
	switch {
	case c.FormValue("lesson") != "":
		l, err := lessons.Get(c.FormValue("lesson"))
		if err != nil {
			return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
		}
		doc, run.Lesson = l.Scenario, l.Name
	case c.FormValue("session") != "":
		sess, err := s.cfg.DB.Session(ctx, c.FormValue("session"))
		if err != nil {
			return err
		}
		doc, run.Source = sess.Scenario, sess.ID
	default:
		return delegation.Errorf(delegation.EINVALID, "%s", tr(c).T("msg.both_modes_what"))
	}
	for _, mode := range []delegation.Mode{delegation.ModeIsolated, delegation.ModeFork} {
		sc, err := scenario.InMode(doc, mode)
		if err != nil {
			return err
		}
		id, err := s.runner.Start(ctx, sc)
		if err != nil {
			return err
		}
		run.Sessions = append(run.Sessions, db.RunSession{Variant: string(mode), SessionID: id})
	}
	if err := s.cfg.DB.CreateRun(ctx, run); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/compare?a="+run.Sessions[0].SessionID+"&b="+run.Sessions[1].SessionID)
}
