package server

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

func (s *Server) lessonsPage(c echo.Context) error {
	v := templates.LessonsPage{Page: s.page(c, "Lessons")}
	for _, l := range lessons.All() {
		v.Lessons = append(v.Lessons, templates.LessonOption{Name: l.Name, Title: l.Title, Description: l.Description})
	}
	return render(c, http.StatusOK, templates.LessonsPageView(v))
}

// Lesson modes: as written (ours), or every variant with compat
// "deepagents", to see where deepagents does otherwise.
const (
	modeOurs       = "ours"
	modeDeepagents = "deepagents"
)

// runLesson starts every variant of a lesson and shows the lesson with
// their sessions (?runs=variant:id,…); with mode=deepagents every variant
// runs with compat "deepagents".
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
		return delegation.Errorf(delegation.EINVALID, "unknown mode %q: run a lesson as written (ours) or as deepagents does (deepagents)", mode)
	}
	var runs []string
	for _, v := range l.Variants {
		if v.OTLP != nil { // a recorded trace of another framework: mapped, as received
			ids, err := s.runner.ImportFile(c.Request().Context(), v.OTLP)
			if err != nil {
				return err
			}
			runs = append(runs, v.Name+":"+ids[0])
			continue
		}
		sc, err := scenario.Parse(v.Scenario)
		if err != nil {
			return err
		}
		if mode == modeDeepagents {
			if sc, err = scenario.WithCompat(sc, delegation.CompatDeepagents); err != nil {
				return err
			}
		}
		id, err := s.runner.Start(c.Request().Context(), sc)
		if err != nil {
			return err
		}
		runs = append(runs, v.Name+":"+id)
	}
	target := "/lessons/" + url.PathEscape(l.Name) + "?runs=" + url.QueryEscape(strings.Join(runs, ","))
	if mode == modeDeepagents {
		target += "&mode=" + modeDeepagents
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// lessonPage is a lesson: its explanation, its runs, and, once they are
// done, the table computed from them beside the article's figures.
func (s *Server) lessonPage(c echo.Context) error {
	l, err := lessons.Get(c.Param("name"))
	if err != nil {
		return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
	}
	v := templates.LessonPage{Page: s.page(c, l.Title), Name: l.Name, Title: l.Title, Description: l.Description, Article: l.Article,
		Deepagents: c.QueryParam("mode") == modeDeepagents}
	ids := map[string]string{}
	for _, pair := range strings.Split(c.QueryParam("runs"), ",") {
		if name, id, ok := strings.Cut(pair, ":"); ok {
			ids[name] = id
		}
	}
	if len(ids) == 0 {
		for _, variant := range l.Variants {
			v.Variants = append(v.Variants, templates.LessonRun{Variant: variant.Name, Label: variant.Label})
		}
		return render(c, http.StatusOK, templates.LessonPageView(v))
	}
	traces := map[string]*trace.Trace{}
	for _, variant := range l.Variants {
		run := templates.LessonRun{Variant: variant.Name, Label: variant.Label, SessionID: ids[variant.Name], Expect: variant.Expect}
		if run.SessionID != "" {
			t, err := s.cfg.DB.Trace(c.Request().Context(), run.SessionID)
			if err != nil {
				return err
			}
			run.Status = t.Session.Status
			v.Running = v.Running || t.Session.Status == delegation.StatusRunning
			traces[variant.Name] = t
		}
		v.Variants = append(v.Variants, run)
	}
	if !v.Running && len(traces) == 2 && len(l.Variants) == 2 {
		v.CompareURL = "/compare?a=" + url.QueryEscape(ids[l.Variants[0].Name]) + "&b=" + url.QueryEscape(ids[l.Variants[1].Name])
	}
	if !v.Running && len(traces) == len(l.Variants) {
		tbl, err := l.Table(traces)
		switch {
		case err != nil && v.Deepagents:
			v.Error = "Run as deepagents does, these sessions end differently from ours, and the table, which reads our behaviour, " +
				"cannot be computed from them (" + err.Error() + "): open the sessions to see what deepagents does."
		case err != nil:
			v.Error = "The table cannot be computed from these runs: " + err.Error()
		default:
			v.Table = tableView(tbl)
			v.Chart = entryChart(tbl)
			v.Bars = barChart(tbl.Chart)
		}
	}
	return render(c, http.StatusOK, templates.LessonPageView(v))
}

func tableView(t lessons.Table) *templates.TableView {
	tv := &templates.TableView{Title: t.Title, Columns: t.Columns, Rows: t.Rows, Note: t.Note}
	for _, x := range t.Versus {
		tv.Versus = append(tv.Versus, templates.VersusView{What: x.What, Article: x.Article, Ours: x.Ours, Why: x.Why})
	}
	if t.Article != nil {
		tv.ArticleColumns, tv.ArticleRows = t.Article.Columns, t.Article.Rows
	}
	for _, ch := range t.Checks {
		tv.Checks = append(tv.Checks, templates.CheckView{Claim: ch.Claim, Detail: ch.Detail, OK: ch.OK})
	}
	return tv
}

var firstNumber = regexp.MustCompile(`-?\d[\d,]*`)

func number(cell string) (int, bool) {
	m := firstNumber.FindString(cell)
	if m == "" {
		return 0, false
	}
	n, err := strconv.Atoi(strings.ReplaceAll(m, ",", ""))
	return n, err == nil
}

// entryChart draws a table whose rows are the parent's steps and which has
// an isolated and a fork column — the entry cost lesson — as a line chart
// of entry cost against parent steps, for both modes.
func entryChart(t lessons.Table) *templates.Chart {
	iso, fork := -1, -1
	for i, col := range t.Columns {
		lc := strings.ToLower(col)
		switch {
		case iso < 0 && strings.Contains(lc, "isolated"):
			iso = i
		case fork < 0 && strings.Contains(lc, "fork"):
			fork = i
		}
	}
	if iso < 0 || fork < 0 || len(t.Rows) < 2 {
		return nil
	}
	type pt struct{ x, y int }
	var isoPts, forkPts []pt
	maxX, maxY := 1, 1
	for _, r := range t.Rows {
		x, okX := number(r[0])
		yi, okI := number(r[iso])
		yf, okF := number(r[fork])
		if !okX || !okI || !okF {
			return nil
		}
		isoPts, forkPts = append(isoPts, pt{x, yi}), append(forkPts, pt{x, yf})
		maxX, maxY = max(maxX, x), max(maxY, yi, yf)
	}
	const w, h, left, bottom, top, right = 520, 260, 50, 30, 10, 10
	px := func(x int) int { return left + x*(w-left-right)/maxX }
	py := func(y int) int { return h - bottom - y*(h-bottom-top)/maxY }
	c := &templates.Chart{Title: "Entry cost (tokens of the child's first call) against the parent's steps before it delegates",
		XLabel: "parent steps", YLabel: "tokens", Width: w, Height: h}
	series := func(name, class string, pts []pt) templates.ChartSeries {
		s := templates.ChartSeries{Name: name, Class: class}
		for _, p := range pts {
			s.Points = append(s.Points, templates.ChartPoint{X: px(p.x), Y: py(p.y), Label: strconv.Itoa(p.x) + " steps: " + strconv.Itoa(p.y) + " tokens"})
		}
		return s
	}
	c.Series = []templates.ChartSeries{series("isolated", "isolated", isoPts), series("fork", "fork", forkPts)}
	for _, p := range forkPts {
		c.XTicks = append(c.XTicks, templates.ChartTick{Pos: px(p.x), Label: strconv.Itoa(p.x)})
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
					Class: "p" + strconv.Itoa(j), Title: part.Name + " " + amount(part.Value, g.Unit)})
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
