package server

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

func (s *Server) lessonsPage(c echo.Context) error {
	v := templates.LessonsPage{Page: s.page(c, tr(c).T("nav.lessons"))}
	latest, err := s.latestLessonRuns(c)
	if err != nil {
		return err
	}
	for _, l := range lessons.Course() {
		o := lessonOption(tr(c), l)
		if r, ok := latest[l.Name]; ok {
			o.LastRun, o.LastStatus = r.CreatedAt, runStatus(r)
		}
		v.Lessons = append(v.Lessons, o)
	}
	return render(c, http.StatusOK, templates.LessonsPageView(v, s.now()))
}

// latestLessonRuns is each lesson's latest run.
func (s *Server) latestLessonRuns(c echo.Context) (map[string]db.Run, error) {
	runs, err := s.cfg.DB.Runs(c.Request().Context(), db.RunFilter{Kind: db.RunLesson, Limit: 500})
	if err != nil {
		return nil, err
	}
	out := map[string]db.Run{}
	for _, r := range runs {
		if _, ok := out[r.Lesson]; !ok {
			out[r.Lesson] = r
		}
	}
	return out, nil
}

// runStatus is a run's status in a word: running while any session runs,
// done when every one ended as its variant expects, else failed.
func runStatus(r db.Run) string {
	if r.Running() {
		return delegation.StatusRunning
	}
	for _, s := range r.Sessions {
		if s.Status != delegation.StatusDone {
			return delegation.StatusFailed
		}
	}
	return delegation.StatusDone
}

// lessonOption is a lesson as a list shows it; its title and description
// stay English here, the template says them in the page's language (they
// are lesson texts, keyed by their English), its sources are named in
// the reader's language already.
func lessonOption(lang *i18n.Lang, l lessons.Lesson) templates.LessonOption {
	return templates.LessonOption{Name: l.Name, Title: l.Title, Description: l.Summary(), Source: citeText(lang, l.Cites), BothModes: l.BothModes}
}

// citeText names a lesson's sources for a line: the articles by title, with
// their sections. In English the title is glossed with the one the article
// was published under; in Chinese the article is named as published.
func citeText(lang *i18n.Lang, cs []lessons.Cite) string {
	var parts []string
	for _, c := range cs {
		if c.Article == nil {
			parts = append(parts, lang.T("cite.own", "What", lang.Text(c.Own)))
			continue
		}
		var secs []string
		for _, sec := range c.Sections {
			title := sec.Title
			if lang.Code == i18n.Chinese {
				title = sec.Original
			}
			secs = append(secs, lang.T("cite.section", "N", sec.Number, "Title", title))
		}
		if lang.Code == i18n.Chinese {
			parts = append(parts, lang.T("cite.article", "Title", c.Article.Original, "Sections", strings.Join(secs, "；")))
		} else {
			parts = append(parts, lang.T("cite.article", "Title", c.Article.Title, "Original", c.Article.Original, "Sections", strings.Join(secs, "; ")))
		}
	}
	return strings.Join(parts, " · ")
}

// Lesson modes: as written (ours), or every variant with compat
// "deepagents", to see where deepagents does otherwise.
const (
	modeOurs       = "ours"
	modeDeepagents = "deepagents"
)

// runLesson starts every variant of a lesson, keeps them as one run of the
// lesson, and shows the lesson, which shows its latest run; with
// mode=deepagents every variant runs with compat "deepagents".
func (s *Server) runLesson(c echo.Context) error {
	l, err := lessons.Get(c.Param("name"))
	if err != nil {
		return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
	}
	mode := c.FormValue("mode")
	switch mode {
	case "", modeOurs:
		mode = modeOurs
	case modeDeepagents:
	default:
		return delegation.Errorf(delegation.EINVALID, "%s", tr(c).T("msg.unknown_mode", "Mode", mode))
	}
	run, err := s.startLesson(c.Request().Context(), l, mode)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/lessons/"+url.PathEscape(l.Name)+"?run="+url.QueryEscape(run.ID))
}

// startLesson starts every variant of a lesson and stores them as a run.
func (s *Server) startLesson(ctx context.Context, l lessons.Lesson, mode string) (*db.Run, error) {
	run := &db.Run{Kind: db.RunLesson, Lesson: l.Name, Mode: mode}
	for _, v := range l.Variants {
		if v.Recorded != nil { // a recorded trace of another framework: mapped, as received
			ids, err := s.runner.ImportFile(ctx, v.Recorded)
			if err != nil {
				return nil, err
			}
			run.Sessions = append(run.Sessions, db.RunSession{Variant: v.Name, SessionID: ids[0]})
			continue
		}
		sc, err := scenario.Parse(v.Scenario)
		if err != nil {
			return nil, err
		}
		if mode == modeDeepagents {
			if sc, err = scenario.WithCompat(sc, delegation.CompatDeepagents); err != nil {
				return nil, err
			}
		}
		id, err := s.runner.Start(ctx, sc)
		if err != nil {
			return nil, err
		}
		run.Sessions = append(run.Sessions, db.RunSession{Variant: v.Name, SessionID: id})
	}
	if err := s.cfg.DB.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	return run, nil
}

// lessonPage is a lesson: its explanation, its latest run (or the one of
// ?run=ID) with the table computed from it beside the article's figures
// once every session is done, and its earlier runs. ?fragment=1 is the run
// alone, for the page to redraw it while it runs.
func (s *Server) lessonPage(c echo.Context) error {
	l, err := lessons.Get(c.Param("name"))
	if err != nil {
		return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
	}
	ctx := c.Request().Context()
	v := templates.LessonPage{Page: s.page(c, tr(c).Text(l.Title)), Lesson: lessonOption(tr(c), l), Article: l.Article}
	runs, err := s.cfg.DB.Runs(ctx, db.RunFilter{Kind: db.RunLesson, Lesson: l.Name, Limit: 20})
	if err != nil {
		return err
	}
	var shown *db.Run
	if id := c.QueryParam("run"); id != "" {
		r, err := s.cfg.DB.Run(ctx, id)
		if err != nil {
			return err
		}
		if r.Kind != db.RunLesson || r.Lesson != l.Name {
			return delegation.Errorf(delegation.ENOTFOUND, "%s", tr(c).T("msg.not_run_of", "Run", id, "Lesson", l.Name))
		}
		shown = r
	} else if len(runs) > 0 {
		shown = &runs[0]
	}
	for _, r := range runs {
		if shown == nil || r.ID != shown.ID {
			v.Runs = append(v.Runs, templates.RunRow{ID: r.ID, Mode: r.Mode, CreatedAt: r.CreatedAt, Status: runStatus(r),
				URL: "/lessons/" + url.PathEscape(l.Name) + "?run=" + url.QueryEscape(r.ID)})
		}
	}
	if v.Run, err = s.lessonRun(ctx, tr(c), l, shown); err != nil {
		return err
	}
	if c.QueryParam("fragment") != "" {
		return render(c, http.StatusOK, templates.LessonRunSection(v.Run, s.now()))
	}
	return render(c, http.StatusOK, templates.LessonPageView(v, s.now()))
}

// lessonRun is a run of a lesson as its page shows it: each variant's
// session, and once every one is done, the table and its checks.
func (s *Server) lessonRun(ctx context.Context, lang *i18n.Lang, l lessons.Lesson, run *db.Run) (templates.LessonRunView, error) {
	v := templates.LessonRunView{Lesson: l.Name}
	if run == nil {
		for _, variant := range l.Variants {
			v.Variants = append(v.Variants, templates.LessonRun{Variant: variant.Name, Label: variant.Label})
		}
		return v, nil
	}
	v.ID, v.CreatedAt, v.Deepagents = run.ID, run.CreatedAt, run.Mode == modeDeepagents
	v.FragmentURL = "/lessons/" + url.PathEscape(l.Name) + "?run=" + url.QueryEscape(run.ID) + "&fragment=1"
	traces := map[string]*trace.Trace{}
	for _, variant := range l.Variants {
		lr := templates.LessonRun{Variant: variant.Name, Label: variant.Label, Expect: variant.Expect}
		if rs, ok := run.Session(variant.Name); ok {
			lr.SessionID, lr.Status, lr.Agents, lr.Calls, lr.Tokens = rs.SessionID, rs.Status, rs.Agents, rs.ModelCalls, rs.InputTokens
			if rs.Status == delegation.StatusRunning {
				v.Running = true
				sess, err := s.cfg.DB.Session(ctx, rs.SessionID)
				if err != nil {
					return v, err
				}
				lr.Seq = sess.LastSeq
			}
		}
		v.Variants = append(v.Variants, lr)
	}
	if len(run.Sessions) == 2 && len(l.Variants) == 2 {
		v.CompareURL = "/compare?a=" + url.QueryEscape(run.Sessions[0].SessionID) + "&b=" + url.QueryEscape(run.Sessions[1].SessionID)
	} else if len(l.Variants) > 2 {
		first, ok := run.Session(l.Variants[0].Name)
		for _, other := range l.Variants[1:] {
			if rs, found := run.Session(other.Name); ok && found {
				v.Compares = append(v.Compares, templates.LessonCompare{A: l.Variants[0].Name, B: other.Name,
					URL: "/compare?a=" + url.QueryEscape(first.SessionID) + "&b=" + url.QueryEscape(rs.SessionID)})
			}
		}
	}
	if v.Running {
		return v, nil
	}
	for _, rs := range run.Sessions {
		t, err := s.cfg.DB.Trace(ctx, rs.SessionID)
		if err != nil {
			return v, err
		}
		traces[rs.Variant] = t
	}
	if len(traces) != len(l.Variants) {
		v.Error = "lesson.error_deleted"
		return v, nil
	}
	tbl, err := l.Table(traces)
	switch {
	case err != nil && v.Deepagents:
		v.Error, v.ErrorDetail = "lesson.error_deepagents", err.Error()
	case err != nil:
		v.Error, v.ErrorDetail = "lesson.error_table", err.Error()
	default:
		v.Table = tableView(tbl)
		v.Chart = entryChart(lang, tbl.Lines)
		v.Bars = barChart(tbl.Chart)
	}
	return v, nil
}

func tableView(t lessons.Table) *templates.TableView {
	tv := &templates.TableView{Title: t.Title, Columns: t.Columns, Rows: t.Rows, Note: t.Note}
	for _, x := range t.Versus {
		vv := templates.VersusView{What: x.What, Article: x.Article, Ours: x.Ours, Why: x.Why}
		if c := x.Counted; c != nil {
			vv.Counted = &templates.CountedView{Ours: c.Ours, Diff: c.Diff(), Off: c.Off(), Gap: c.Gap}
			tv.HasCounted = true
		}
		tv.Versus = append(tv.Versus, vv)
	}
	if t.Article != nil {
		tv.ArticleColumns, tv.ArticleRows = t.Article.Columns, t.Article.Rows
	}
	for _, ch := range t.Checks {
		tv.Checks = append(tv.Checks, templates.CheckView{Claim: ch.Claim, Detail: ch.Detail, OK: ch.OK})
	}
	return tv
}

// entryChart draws a table's lines — the entry cost of each mode against
// the parent's steps — as a line chart.
func entryChart(lang *i18n.Lang, lines *lessons.LineChart) *templates.Chart {
	if lines == nil || len(lines.Series) == 0 {
		return nil
	}
	maxX, maxY := 1, 1
	for _, s := range lines.Series {
		for _, p := range s.Points {
			maxX, maxY = max(maxX, p.X), max(maxY, p.Y)
		}
	}
	const w, h, left, bottom, top, right = 520, 260, 50, 30, 10, 10
	px := func(x int) int { return left + x*(w-left-right)/maxX }
	py := func(y int) int { return h - bottom - y*(h-bottom-top)/maxY }
	c := &templates.Chart{Title: lang.T("chart.title"), XLabel: lang.T("chart.x"), YLabel: lang.T("chart.y"), Width: w, Height: h}
	for _, s := range lines.Series {
		cs := templates.ChartSeries{Name: string(s.Mode), Class: string(s.Mode)}
		for _, p := range s.Points {
			cs.Points = append(cs.Points, templates.ChartPoint{X: px(p.X), Y: py(p.Y), Label: lang.T("chart.point", "Steps", lang.Num(p.X), "Tokens", lang.Num(p.Y))})
		}
		c.Series = append(c.Series, cs)
	}
	for _, p := range lines.Series[0].Points { // every line has the same steps
		c.XTicks = append(c.XTicks, templates.ChartTick{Pos: px(p.X), Label: strconv.Itoa(p.X)})
	}
	for _, y := range []int{0, maxY / 2, maxY} {
		c.YTicks = append(c.YTicks, templates.ChartTick{Pos: py(y), Label: strconv.Itoa(y)})
	}
	return c
}

// barChart lays a table's bar chart out: each panel's bars scaled to its
// largest, parts side by side, the total written after each bar.
func barChart(c *lessons.BarChart) *templates.BarChart {
	if c == nil {
		return nil
	}
	const width, left, area, rowH = 560, 150, 300, 28
	out := &templates.BarChart{Title: c.Title, Width: width}
	for _, g := range c.Groups {
		p := templates.BarPanel{Title: g.Title, Height: len(g.Bars)*rowH + 4}
		largest := 0.0
		for _, b := range g.Bars {
			total := 0.0
			for _, part := range b.Parts {
				total += part.Value
			}
			largest = max(largest, total)
		}
		for i, b := range g.Bars {
			row := templates.BarRow{Label: b.Label, Y: i*rowH + 2}
			x, total := float64(left), 0.0
			for j, part := range b.Parts {
				w := 0.0
				if largest > 0 {
					w = part.Value / largest * area
				}
				row.Parts = append(row.Parts, templates.BarRect{X: int(x + 0.5), Width: max(int(x+w+0.5)-int(x+0.5), 0),
					Class: "p" + strconv.Itoa(j), Part: part.Name, Amount: amount(part.Value, g.Unit)})
				x += w
				total += part.Value
			}
			row.Total, row.TextX = amount(total, g.Unit), int(x+0.5)+6
			p.Bars = append(p.Bars, row)
		}
		if len(g.Bars) > 0 {
			for j, part := range g.Bars[0].Parts {
				p.Legend = append(p.Legend, templates.BarKey{Name: part.Name, Class: "p" + strconv.Itoa(j)})
			}
		}
		out.Panels = append(out.Panels, p)
	}
	return out
}

// amount writes a bar's value in its unit.
func amount(v float64, unit string) string {
	if unit == "dollars" {
		return view.Dollars(v)
	}
	return templates.Thousands(int(v+0.5)) + " " + unit
}
