package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/present"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/web/templates"
)

// teamRoutes registers the team editor (design.md, "Team editor"). A team is
// a scenario document: its main agent and subagents and, optionally, the
// prompt and script that make it runnable.
func (s *Server) teamRoutes(e *echo.Echo) {
	e.GET("/teams", s.teamsPage)                    // the teams, the import form, the lessons to clone
	e.GET("/teams/new", s.newTeamPage)              // an empty team form
	e.POST("/teams", s.createTeam)                  // save a new team, or add/remove/move a subagent, or preview
	e.POST("/teams/preview", s.teamPreviewFragment) // the preview of a form's contents, for the live preview
	e.POST("/teams/import", s.importTeam)           // a pasted or uploaded scenario JSON becomes a team
	e.GET("/teams/:id", s.teamPage)                 // the team form
	e.POST("/teams/:id", s.saveTeam)                // save, or add/remove/move a subagent, or preview
	e.POST("/teams/:id/duplicate", s.duplicateTeam) // a copy, opened
	e.POST("/teams/:id/delete", s.deleteTeam)       // gone; its sessions stay
	e.GET("/teams/:id/export", s.exportTeam)        // the scenario JSON, as a download
	e.POST("/teams/:id/run", s.runTeam)             // start a session from the saved team
	e.POST("/clone-team", s.cloneTeam)              // a team from a session's scenario or a lesson
}

// teamsPageView builds the teams page.
func (s *Server) teamsPageView(c echo.Context) (templates.TeamsPage, error) {
	v := templates.TeamsPage{Page: s.page(c, tr(c).T("nav.teams"))}
	list, err := s.cfg.DB.Teams(c.Request().Context())
	if err != nil {
		return v, err
	}
	for _, t := range list {
		row := templates.TeamRow{ID: t.ID, Name: t.Name, Title: t.Title, UpdatedAt: t.UpdatedAt}
		var f scenario.File
		if json.Unmarshal(t.Scenario, &f) == nil {
			row.Subagents = len(f.Subagents)
			row.Runnable = teamRunnable(f)
		}
		v.Teams = append(v.Teams, row)
	}
	for _, l := range lessons.All() {
		v.Lessons = append(v.Lessons, templates.LessonOption{Name: l.Name, Title: l.Title, Description: l.Description})
	}
	return v, nil
}

func (s *Server) teamsPage(c echo.Context) error {
	v, err := s.teamsPageView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.TeamsPageView(v, s.now()))
}

// newTeam is what a new team starts as: the default stack, general-purpose
// on, no subagent of its own.
func newTeam() scenario.File {
	return scenario.File{Name: "my-team"}
}

func (s *Server) newTeamPage(c echo.Context) error {
	return s.renderTeam(c, http.StatusOK, "", fileForm(newTeam()), nil, "")
}

func (s *Server) teamPage(c echo.Context) error {
	t, err := s.cfg.DB.Team(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	f, err := decodeTeam(t)
	if err != nil {
		return err
	}
	form := fileForm(f)
	if c.QueryParam("saved") != "" {
		form.Saved = true
	}
	return s.renderTeam(c, http.StatusOK, t.ID, form, nil, "")
}

// teamRuns are a team's runs, newest first, each offered to compare with
// the one before it and with what the team was cloned from.
func (s *Server) teamRuns(ctx context.Context, id string) ([]templates.TeamRunRow, templates.TeamSource, error) {
	var src templates.TeamSource
	source, err := s.cfg.DB.TeamSource(ctx, id)
	if err != nil {
		return nil, src, err
	}
	switch kind, name, _ := strings.Cut(source, ":"); kind {
	case "lesson":
		src.Label, src.URL = "the lesson "+lessonTitle(name), "/lessons/"+url.PathEscape(name)
		// A lesson is cloned from its first variant: the team's runs set
		// beside that variant's session of the lesson's latest run.
		runs, err := s.cfg.DB.Runs(ctx, db.RunFilter{Kind: db.RunLesson, Lesson: name, Limit: 1})
		if err != nil {
			return nil, src, err
		}
		if l, lerr := lessons.Get(name); lerr == nil && len(runs) > 0 {
			if rs, ok := runs[0].Session(l.Variants[0].Name); ok {
				src.SessionID = rs.SessionID
			}
		}
	case "session":
		src.Label, src.URL, src.SessionID = "the session it was cloned from", templates.SessionURL(url.PathEscape(name)), name
		if _, err := s.cfg.DB.Session(ctx, name); err != nil {
			src.SessionID = "" // deleted since
		}
	}
	runs, err := s.cfg.DB.Runs(ctx, db.RunFilter{Kind: db.RunTeam, TeamID: id, Limit: 20})
	if err != nil {
		return nil, src, err
	}
	var out []templates.TeamRunRow
	for i, r := range runs {
		if len(r.Sessions) == 0 {
			continue
		}
		rs := r.Sessions[0]
		row := templates.TeamRunRow{SessionID: rs.SessionID, Name: rs.Name, Status: rs.Status, CreatedAt: r.CreatedAt,
			Agents: rs.Agents, Calls: rs.ModelCalls, Tokens: rs.InputTokens}
		if i+1 < len(runs) && len(runs[i+1].Sessions) > 0 {
			row.ComparePrevious = "/compare?a=" + url.QueryEscape(runs[i+1].Sessions[0].SessionID) + "&b=" + url.QueryEscape(rs.SessionID)
		}
		if src.SessionID != "" {
			row.CompareSource = "/compare?a=" + url.QueryEscape(src.SessionID) + "&b=" + url.QueryEscape(rs.SessionID)
		}
		out = append(out, row)
	}
	return out, src, nil
}

func decodeTeam(t *db.Team) (scenario.File, error) {
	var f scenario.File
	if err := json.Unmarshal(t.Scenario, &f); err != nil {
		return f, fmt.Errorf("read team %s: %w", t.ID, err)
	}
	return f, nil
}

// renderTeam renders the team form with its problems at their fields and
// the preview of what it holds.
func (s *Server) renderTeam(c echo.Context, status int, id string, form templates.TeamForm, errs []templates.FieldError, notice string) error {
	title := tr(c).T("team.new")
	if id != "" {
		title = form.Name
	}
	form.Page = s.page(c, title)
	form.ID = id
	form.Notice = notice
	form.StackTools = append(delegation.StackToolNames(), delegation.TaskToolName)
	form.SubagentTools = delegation.StackToolNames()
	for _, e := range s.cfg.Endpoints {
		form.Endpoints = append(form.Endpoints, e.Name)
		if e.Anthropic() {
			form.AnthropicEndpoints = append(form.AnthropicEndpoints, e.Name)
		}
	}
	f, _ := formFile(form)
	form.Preview = teamPreview(tr(c), f)
	counter := teamCounter(f)
	form.Agent.Size = size(counter, form.Agent.SystemPrompt)
	for i := range form.Subagents {
		form.Subagents[i].Size = size(counter, form.Subagents[i].SystemPrompt)
	}
	form.SetErrors(errs)
	if id != "" {
		var err error
		if form.Runs, form.Source, err = s.teamRuns(c.Request().Context(), id); err != nil {
			return err
		}
		form.Runnable = teamRunnable(f)
	}
	form.Page.Summary = teamSummary(&form)
	return render(c, status, templates.TeamPage(form))
}

// teamSummary heads the team page with the form's problems, each linking to
// its field; nil when there are none.
func teamSummary(form *templates.TeamForm) *templates.ErrorSummary {
	items := form.SummaryItems()
	if len(items) == 0 {
		return nil
	}
	if form.RunRefused {
		return &templates.ErrorSummary{Form: "team-run", Items: items}
	}
	return &templates.ErrorSummary{Form: "team", Items: items}
}

// teamRunnable says whether a team can run as it is: a prompt, and a
// script or a real model.
func teamRunnable(f scenario.File) bool {
	return strings.TrimSpace(f.Prompt) != "" && (hasScript(f) || (f.Model != nil && remoteProvider(f.Model.Provider)))
}

func (s *Server) createTeam(c echo.Context) error { return s.submitTeam(c, "") }

func (s *Server) saveTeam(c echo.Context) error {
	if _, err := s.cfg.DB.Team(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return s.submitTeam(c, c.Param("id"))
}

// submitTeam handles the form's buttons: save checks the team and stores it
// (303 to its page) or shows every problem at its field with everything
// typed kept (400); add, remove, up, down and preview re-render the form
// with the change applied, so the editor works without JavaScript.
func (s *Server) submitTeam(c echo.Context, id string) error {
	values, err := c.FormParams()
	if err != nil {
		return delegation.Errorf(delegation.EINVALID, "cannot read the form: %v", err)
	}
	form := readTeamForm(values)
	action := values.Get("action")
	switch action {
	case "", "save":
	case "preview":
		return s.renderTeam(c, http.StatusOK, id, form, nil, "")
	default:
		if !applyAction(&form, action) {
			return delegation.Errorf(delegation.EINVALID, "unknown form action %q", action)
		}
		return s.renderTeam(c, http.StatusOK, id, form, nil, "")
	}
	if err := s.refuseWrite(); err != nil {
		return err
	}
	f, errs := checkTeamForm(tr(c), form)
	if len(errs) > 0 {
		return s.renderTeam(c, http.StatusBadRequest, id, form, viewErrors(errs), "")
	}
	t, err := teamRecord(id, f)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id == "" {
		err = s.cfg.DB.CreateTeam(ctx, t)
	} else {
		err = s.cfg.DB.UpdateTeam(ctx, t)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/teams/"+t.ID+"?saved=1")
}

// teamPreviewFragment answers the live preview: the preview of the posted
// form's contents, alone.
func (s *Server) teamPreviewFragment(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return delegation.Errorf(delegation.EINVALID, "cannot read the form: %v", err)
	}
	form := readTeamForm(values)
	if c.QueryParam("check") == "" {
		f, _ := formFile(form)
		return render(c, http.StatusOK, templates.TeamPreviewBody(teamPreview(tr(c), f)))
	}
	// The live check: the preview, and every problem saving would meet,
	// placed at its field as the page places them.
	f, errs := checkTeamForm(tr(c), form)
	form.SetErrors(viewErrors(errs))
	pv := teamPreview(tr(c), f)
	out := teamCheck{Built: pv.Built, Preview: present.HTML(c.Request().Context(), templates.TeamPreviewBody(pv)), Fields: map[string][]string{}, Count: form.ErrorCount()}
	for _, k := range form.ErrorKeys() {
		out.Fields[k] = form.Errs(k)
	}
	out.Notice = present.HTML(c.Request().Context(), templates.TeamNotice(form.ErrorCount(), ""))
	out.Top = present.HTML(c.Request().Context(), templates.TeamTopErrors(form.TopErrors))
	return c.JSON(http.StatusOK, out)
}

// teamCheck is the live check of the team form: the preview (kept by the
// page from the last team that built, when this one does not), each field's
// problems, and the banner.
type teamCheck struct {
	Built   bool                `json:"built"`
	Preview string              `json:"preview"`
	Fields  map[string][]string `json:"fields"`
	Count   int                 `json:"count"`
	Notice  string              `json:"notice"`
	Top     string              `json:"top"`
}

func teamRecord(id string, f scenario.File) (*db.Team, error) {
	doc, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode team %q: %w", f.Name, err)
	}
	return &db.Team{ID: id, Name: f.Name, Title: f.Title, Scenario: doc}, nil
}

// importTeam turns a pasted or uploaded scenario into a team. It is checked
// whole first: a bad one comes back with its problems and nothing is
// written.
func (s *Server) importTeam(c echo.Context) error {
	doc, err := formText(c, "team", "team_file")
	if err != nil {
		return err
	}
	if kind := documentKind([]byte(doc)); kind == docTrace || kind == docOTLPJSON || kind == docOTLPProto {
		v, err := s.teamsPageView(c)
		if err != nil {
			return err
		}
		if kind != docOTLPProto {
			v.ImportText = typed(doc)
		}
		v.Summary = &templates.ErrorSummary{Form: "team-import", Foreign: kind}
		return render(c, http.StatusBadRequest, templates.TeamsPageView(v, s.now()))
	}
	id, err := s.storeTeamDoc(c, []byte(doc))
	if err != nil {
		if !badInput(err) {
			return err
		}
		v, verr := s.teamsPageView(c)
		if verr != nil {
			return verr
		}
		v.ImportText = typed(doc)
		v.ImportErrs = fieldErrors(err)
		v.Summary = summary("team-import", "#team-import-text", v.ImportErrs)
		return render(c, http.StatusBadRequest, templates.TeamsPageView(v, s.now()))
	}
	return c.Redirect(http.StatusSeeOther, "/teams/"+id)
}

// cloneTeam makes a team of a session's scenario (form field session) or a
// lesson's (lesson), to change a spec and run it again.
func (s *Server) cloneTeam(c echo.Context) error {
	ctx := c.Request().Context()
	var doc []byte
	var source string
	switch id, name := c.FormValue("session"), c.FormValue("lesson"); {
	case id != "":
		sess, err := s.cfg.DB.Session(ctx, id)
		if err != nil {
			return err
		}
		doc, source = sess.Scenario, "session:"+id
	case name != "":
		l, err := lessons.Get(name)
		if err != nil {
			return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
		}
		doc, source = l.Scenario, "lesson:"+name
	default:
		return delegation.Errorf(delegation.EINVALID, "%s", tr(c).T("msg.what_to_clone"))
	}
	id, err := s.storeTeamDocFrom(c, doc, source, "-team")
	if err != nil {
		var fe delegation.FieldErrors
		if errors.As(err, &fe) {
			return &delegation.Error{Code: delegation.EINVALID, Message: "this scenario cannot be a team: " + fe[0].Error(), Fields: fe}
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/teams/"+id)
}

// storeTeamDoc checks a scenario document as a team and stores it.
func (s *Server) storeTeamDoc(c echo.Context, doc []byte) (string, error) {
	return s.storeTeamDocFrom(c, doc, "", "")
}

// storeTeamDocFrom stores a team cloned from source ("lesson:NAME",
// "session:ID"), named after it with suffix and a number when that name
// is taken, so its sessions can be told from the original's.
func (s *Server) storeTeamDocFrom(c echo.Context, doc []byte, source, suffix string) (string, error) {
	ctx := c.Request().Context()
	f, err := parseTeamDoc(ctx, doc)
	if err != nil {
		return "", err
	}
	if suffix != "" {
		base := regexp.MustCompile(regexp.QuoteMeta(suffix)+`(-\d+)?$`).ReplaceAllString(f.Name, "")
		if f.Name, err = s.freeTeamName(ctx, base+suffix); err != nil {
			return "", err
		}
	}
	t, err := teamRecord("", f)
	if err != nil {
		return "", err
	}
	if err := s.cfg.DB.CreateTeamFrom(ctx, t, source); err != nil {
		return "", err
	}
	return t.ID, nil
}

// freeTeamName is name, or name-2, name-3 … the first no team has.
func (s *Server) freeTeamName(ctx context.Context, name string) (string, error) {
	taken, err := s.cfg.DB.TeamNames(ctx)
	if err != nil {
		return "", err
	}
	out := name
	for n := 2; taken[out]; n++ {
		out = name + "-" + strconv.Itoa(n)
	}
	return out, nil
}

// parseTeamDoc checks a scenario document as a team: everything
// scenario.Parse checks, but a team need not be runnable yet.
func parseTeamDoc(ctx context.Context, doc []byte) (scenario.File, error) {
	var f scenario.File
	if len(bytes.TrimSpace(doc)) == 0 {
		return f, delegation.FieldErrors{{Message: i18n.From(ctx).T("msg.nothing_to_import")}}
	}
	_, err := scenario.ParseContext(ctx, doc)
	var fe delegation.FieldErrors
	if err != nil && !errors.As(err, &fe) {
		return f, err
	}
	// Parse accepted the document's shape when the only problem is the
	// missing script, so it decodes.
	if err := json.Unmarshal(doc, &f); err != nil {
		if len(fe) > 0 {
			return f, fe
		}
		return f, delegation.FieldErrors{{Message: fmt.Sprintf("cannot read the scenario: %v", err)}}
	}
	if errs := withoutMissingScript(fe, f); len(errs) > 0 {
		return f, errs
	}
	if strings.TrimSpace(f.Name) == "" {
		return f, delegation.FieldErrors{{Field: "name", Message: i18n.From(ctx).T("msg.team_name")}}
	}
	return f, nil
}

// loadTeam reads the team of the request's :id, and its scenario.
func (s *Server) loadTeam(c echo.Context) (*db.Team, scenario.File, error) {
	t, err := s.cfg.DB.Team(c.Request().Context(), c.Param("id"))
	if err != nil {
		return nil, scenario.File{}, err
	}
	f, err := decodeTeam(t)
	return t, f, err
}

func (s *Server) duplicateTeam(c echo.Context) error {
	ctx := c.Request().Context()
	_, f, err := s.loadTeam(c)
	if err != nil {
		return err
	}
	if f.Name, err = s.freeTeamName(ctx, f.Name+"-copy"); err != nil {
		return err
	}
	dup, err := teamRecord("", f)
	if err != nil {
		return err
	}
	if err := s.cfg.DB.CreateTeam(ctx, dup); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/teams/"+dup.ID)
}

func (s *Server) deleteTeam(c echo.Context) error {
	if err := s.cfg.DB.DeleteTeam(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/teams")
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// exportTeam sends the team's scenario document, indented, as a download.
func (s *Server) exportTeam(c echo.Context) error {
	t, err := s.cfg.DB.Team(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, t.Scenario, "", "  "); err != nil {
		return fmt.Errorf("export team %s: %w", t.ID, err)
	}
	out.WriteByte('\n')
	name := strings.Trim(unsafeFileChars.ReplaceAllString(t.Name, "-"), "-.")
	if name == "" {
		name = "team"
	}
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s.json"`, name))
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, out.Bytes())
}

// runTeam starts a session from the team as saved. A team that cannot run
// (no prompt, no script and no real model) comes back to its page with
// the problems at their fields.
func (s *Server) runTeam(c echo.Context) error {
	ctx := c.Request().Context()
	t, f, err := s.loadTeam(c)
	if err != nil {
		return err
	}
	sc, err := scenario.Parse(t.Scenario)
	var errs delegation.FieldErrors
	if err != nil && !errors.As(err, &errs) {
		return err
	}
	endpoint := c.FormValue("endpoint")
	if endpoint != "" && sc == nil && !hasScript(f) {
		// No script, but a real model to play it: build it as it would run there.
		errs = withoutMissingScript(errs, f)
		if len(errs) == 0 {
			m := scenario.Model{Provider: s.endpointKind(endpoint), Endpoint: endpoint}
			g := f
			g.Model = &m
			raw, err := json.Marshal(g)
			if err != nil {
				return err
			}
			if sc, err = scenario.Build(g, raw); err != nil && !errors.As(err, &errs) {
				return err
			}
		}
	} else if endpoint != "" && sc != nil {
		e, ok := s.runner.Endpoints.Lookup(endpoint)
		if !ok {
			return delegation.Errorf(delegation.EINVALID, "%s", tr(c).T("msg.no_endpoint_named", "Name", endpoint))
		}
		if sc, err = scenario.WithEndpoint(sc, scenario.Model{Provider: e.Kind(), Endpoint: endpoint}); err != nil {
			return err
		}
	}
	if strings.TrimSpace(f.Prompt) == "" {
		errs = append(delegation.FieldErrors{{Field: "prompt",
			Message: tr(c).T("team.err.prompt")}}, errs...)
	}
	if len(errs) > 0 {
		form := fileForm(f)
		form.NeedsScript = !hasScript(f) && (f.Model == nil || !remoteProvider(f.Model.Provider))
		form.RunRefused = true
		return s.renderTeam(c, http.StatusBadRequest, t.ID, form, viewErrors(errs),
			tr(c).T("team.err.cannot_run"))
	}
	id, err := s.runner.Start(ctx, sc)
	if errors.As(err, &errs) {
		// Where its calls would go: a URL or key variable of its own, an
		// endpoint this studio does not have.
		form := fileForm(f)
		form.RunRefused = true
		return s.renderTeam(c, http.StatusBadRequest, t.ID, form, viewErrors(errs),
			tr(c).T("team.err.cannot_run_here"))
	}
	if err != nil {
		return err
	}
	if err := s.cfg.DB.CreateRun(ctx, &db.Run{Kind: db.RunTeam, TeamID: t.ID, Sessions: []db.RunSession{{Variant: "run", SessionID: id}}}); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, templates.SessionURL(id))
}

// skeleton is a script to fill in for a team that has none: the main
// agent hands one task to each subagent (general-purpose when it has none)
// and then answers; each subagent answers once. Every text is a
// placeholder that says what to put there.
func skeleton(form templates.TeamForm) string {
	names := []string{}
	for _, sub := range form.Subagents {
		if n := strings.TrimSpace(sub.Name); n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 && form.Agent.GeneralPurpose {
		names = append(names, delegation.GeneralPurposeName)
	}
	type call struct {
		Name string            `json:"name"`
		Args map[string]string `json:"args"`
	}
	type turn struct {
		Content   string `json:"content,omitempty"`
		ToolCalls []call `json:"tool_calls,omitempty"`
	}
	var order []string
	script := map[string]any{}
	var calls []call
	for _, n := range names {
		calls = append(calls, call{Name: delegation.TaskToolName, Args: map[string]string{
			"description": "The task for " + n + ": say everything it needs, it sees nothing else unless it is a fork.", "subagent_type": n}})
		if _, ok := script[n]; !ok {
			script[n] = [][]turn{{{Content: "What " + n + " answers: its final message is the receipt its parent gets."}}}
			order = append(order, n)
		}
	}
	main := []turn{}
	if len(calls) > 0 {
		main = append(main, turn{ToolCalls: calls})
	}
	main = append(main, turn{Content: "The main agent's answer, drawing on the receipts."})
	// main first, then the subagents in the form's order.
	var b bytes.Buffer
	b.WriteString("{\n  \"main\": ")
	mj, _ := json.MarshalIndent(main, "  ", "  ")
	b.Write(mj)
	for _, n := range order {
		k, _ := json.Marshal(n)
		v, _ := json.MarshalIndent(script[n], "  ", "  ")
		b.WriteString(",\n  ")
		b.Write(k)
		b.WriteString(": ")
		b.Write(v)
	}
	b.WriteString("\n}")
	return b.String()
}

// checkTeamForm turns the form into a scenario and checks it with the
// engine's own rules (scenario.Build, hence delegation.BuildTeam), adding
// the form's own problems: numbers that are not numbers, JSON that is not
// JSON, a missing name. Every problem is returned at once.
func checkTeamForm(lang *i18n.Lang, form templates.TeamForm) (scenario.File, delegation.FieldErrors) {
	f, errs := formFile(form)
	if strings.TrimSpace(f.Name) == "" {
		errs = append(delegation.FieldErrors{{Field: "name", Message: lang.T("msg.team_name_runs")}}, errs...)
	}
	_, err := scenario.Build(f, nil)
	var fe delegation.FieldErrors
	if errors.As(err, &fe) {
		errs = append(errs, withoutMissingScript(fe, f)...)
	} else if err != nil {
		errs.Add("", "%v", err)
	}
	return f, errs
}

// withoutMissingScript drops the complaint that a scripted team has no
// script: a team need not be runnable to be kept. Running it says so.
func withoutMissingScript(errs delegation.FieldErrors, f scenario.File) delegation.FieldErrors {
	if hasScript(f) {
		return errs
	}
	var out delegation.FieldErrors
	for _, e := range errs {
		if e.Code == scenario.ENoScript {
			continue
		}
		out = append(out, e)
	}
	return out
}

func hasScript(f scenario.File) bool {
	s := bytes.TrimSpace(f.Script)
	return len(s) > 0 && !bytes.Equal(s, []byte("null"))
}

func viewErrors(errs delegation.FieldErrors) []templates.FieldError {
	out := make([]templates.FieldError, len(errs))
	for i, e := range errs {
		out[i] = templates.FieldError{Field: e.Field, Message: e.Message}
	}
	return out
}

// applyAction applies a subagent button: add, remove:I, up:I, down:I. It
// reports whether the action is one of those.
func applyAction(form *templates.TeamForm, action string) bool {
	if action == "add" {
		form.Subagents = append(form.Subagents, templates.SubagentForm{Mode: string(delegation.ModeIsolated)})
		return true
	}
	if action == "skeleton" {
		if strings.TrimSpace(form.Script) == "" {
			form.Script = skeleton(*form)
		}
		if strings.TrimSpace(form.Prompt) == "" {
			form.Prompt = "The user's opening message to the main agent."
		}
		return true
	}
	verb, arg, ok := strings.Cut(action, ":")
	if !ok {
		return false
	}
	i, err := strconv.Atoi(arg)
	if err != nil {
		return false
	}
	subs := form.Subagents
	if i < 0 || i >= len(subs) {
		return true // a stale button: nothing to do
	}
	switch verb {
	case "remove":
		form.Subagents = slices.Delete(subs, i, i+1)
	case "up":
		if i > 0 {
			subs[i-1], subs[i] = subs[i], subs[i-1]
		}
	case "down":
		if i+1 < len(subs) {
			subs[i], subs[i+1] = subs[i+1], subs[i]
		}
	default:
		return false
	}
	return true
}

// readTeamForm reads the team form as typed. Subagents are the indexes that
// appear in field names (subagents[N].name …), in order.
func readTeamForm(v url.Values) templates.TeamForm {
	form := templates.TeamForm{
		Name: v.Get("name"), Title: v.Get("title"), Description: v.Get("description"), Tokenizer: v.Get("tokenizer"),
		Prompt: v.Get("prompt"), Script: v.Get("script"), Files: v.Get("files"),
		Agent: templates.AgentForm{
			SystemPrompt:   v.Get("agent.system_prompt"),
			Tools:          v["agent.tools"],
			GeneralPurpose: v.Get("agent.general_purpose") != "",
			MaxSteps:       v.Get("agent.max_steps"),
			MaxConcurrency: v.Get("agent.max_concurrency"),
			FilesMerge:     v.Get("agent.files_merge"),
			Compat:         v.Get("agent.compat"),
			MaxTokens:      v.Get("agent.summarization.max_tokens"),
			KeepMessages:   v.Get("agent.summarization.keep_messages"),
			TimeoutMS:      v.Get("agent.timeout_ms"),
			Model:          v.Get("agent.model"),
			BaseURL:        v.Get("agent.base_url"),
		},
		Model: templates.ModelForm{
			Provider: v.Get("model.provider"), Model: v.Get("model.model"), Endpoint: v.Get("model.endpoint"), BaseURL: v.Get("model.base_url"),
			APIKeyEnv: v.Get("model.api_key_env"), NativeJSONSchema: v.Get("model.native_json_schema") != "",
		},
	}
	seen := map[int]bool{}
	var idx []int
	for k := range v {
		rest, ok := strings.CutPrefix(k, "subagents[")
		if !ok {
			continue
		}
		n, _, ok := strings.Cut(rest, "]")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || seen[i] {
			continue
		}
		seen[i] = true
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		get := func(field string) string { return v.Get(templates.SubKey(i, field)) }
		form.Subagents = append(form.Subagents, templates.SubagentForm{
			Name: get("name"), Description: get("description"), SystemPrompt: get("system_prompt"), Mode: get("mode"),
			Tools: v[templates.SubKey(i, "tools")], Model: get("model"), Endpoint: get("endpoint"), BaseURL: get("base_url"), APIKeyEnv: get("api_key_env"), Skills: get("skills"),
			MaxSteps: get("max_steps"), TimeoutMS: get("timeout_ms"), ResponseFormat: get("response_format"),
		})
	}
	return form
}

// formFile turns the form into the scenario it stands for, with the
// problems only the form can have: numbers that are not numbers, a script
// or files that are not JSON. A response_format is passed on as typed: the
// engine checks it is JSON and a JSON Schema object.
func formFile(form templates.TeamForm) (scenario.File, delegation.FieldErrors) {
	var errs delegation.FieldErrors
	num := func(key, label, s string) int {
		s = strings.TrimSpace(s)
		if s == "" {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs.Add(key, "%s must be a whole number; got '%s'", label, s)
			return 0
		}
		return n
	}
	f := scenario.File{Name: strings.TrimSpace(form.Name), Title: form.Title, Description: form.Description,
		Prompt: form.Prompt, Tokenizer: form.Tokenizer}

	a := form.Agent
	agent := scenario.Agent{
		SystemPrompt:   a.SystemPrompt,
		MaxSteps:       num("agent.max_steps", "max_steps", a.MaxSteps),
		MaxConcurrency: num("agent.max_concurrency", "max_concurrency", a.MaxConcurrency),
		FilesMerge:     a.FilesMerge,
		TimeoutMS:      num("agent.timeout_ms", "timeout_ms", a.TimeoutMS),
		Model:          strings.TrimSpace(a.Model),
		BaseURL:        strings.TrimSpace(a.BaseURL),
	}
	if len(a.Tools) > 0 && !slices.Equal(a.Tools, delegation.DefaultTools()) {
		agent.Tools = slices.Clone(a.Tools)
	}
	if !a.GeneralPurpose {
		off := false
		agent.GeneralPurpose = &off
	}
	if c := strings.TrimSpace(a.Compat); c != "" {
		agent.Compat = &c
	}
	maxTokens := num("agent.summarization.max_tokens", "max_tokens", a.MaxTokens)
	keep := num("agent.summarization.keep_messages", "keep_messages", a.KeepMessages)
	if maxTokens != 0 || keep != 0 {
		agent.Summarization = &scenario.Summarization{MaxTokens: maxTokens, KeepMessages: keep}
	}
	if !reflect.ValueOf(agent).IsZero() {
		f.Agent = &agent
	}

	m := scenario.Model{Provider: form.Model.Provider, Model: strings.TrimSpace(form.Model.Model), Endpoint: strings.TrimSpace(form.Model.Endpoint),
		BaseURL: strings.TrimSpace(form.Model.BaseURL), APIKeyEnv: strings.TrimSpace(form.Model.APIKeyEnv),
		NativeJSONSchema: form.Model.NativeJSONSchema}
	if m != (scenario.Model{}) {
		f.Model = &m
	}

	if script := strings.TrimSpace(form.Script); script != "" {
		if !json.Valid([]byte(script)) {
			errs.Add("script", "the script is not valid JSON: %v", jsonProblem(script))
		} else {
			f.Script = json.RawMessage(script)
		}
	}
	if files := strings.TrimSpace(form.Files); files != "" {
		if err := json.Unmarshal([]byte(files), &f.Files); err != nil {
			errs.Add("files", `files must be a JSON object of path → content, e.g. {"/notes.md": "…"}: %v`, err)
			f.Files = nil
		}
	}

	for i, sf := range form.Subagents {
		sub := scenario.Subagent{
			Name: strings.TrimSpace(sf.Name), Description: sf.Description, SystemPrompt: sf.SystemPrompt,
			Mode: strings.TrimSpace(sf.Mode), Model: strings.TrimSpace(sf.Model), Endpoint: strings.TrimSpace(sf.Endpoint),
			BaseURL: strings.TrimSpace(sf.BaseURL), APIKeyEnv: strings.TrimSpace(sf.APIKeyEnv),
			MaxSteps:  num(templates.SubKey(i, "max_steps"), "max_steps", sf.MaxSteps),
			TimeoutMS: num(templates.SubKey(i, "timeout_ms"), "timeout_ms", sf.TimeoutMS),
		}
		if len(sf.Tools) > 0 {
			sub.Tools = slices.Clone(sf.Tools)
		}
		for _, sk := range strings.Split(sf.Skills, ",") {
			if sk = strings.TrimSpace(sk); sk != "" {
				sub.Skills = append(sub.Skills, sk)
			}
		}
		if rf := strings.TrimSpace(sf.ResponseFormat); rf != "" && rf != "null" {
			sub.ResponseFormat = json.RawMessage(rf)
		}
		f.Subagents = append(f.Subagents, sub)
	}
	return f, errs
}

// jsonProblem says where a JSON text goes wrong.
func jsonProblem(s string) error {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + strings.Count(s[:se.Offset], "\n")
		return fmt.Errorf("%v (line %d)", err, line)
	}
	return err
}

// fileForm fills the form from a scenario.
func fileForm(f scenario.File) templates.TeamForm {
	form := templates.TeamForm{Name: f.Name, Title: f.Title, Description: f.Description, Tokenizer: f.Tokenizer,
		Prompt: f.Prompt, Script: indentJSON(f.Script)}
	if len(f.Files) > 0 {
		b, _ := json.MarshalIndent(f.Files, "", "  ")
		form.Files = string(b)
	}
	form.Agent = templates.AgentForm{Tools: delegation.DefaultTools(), GeneralPurpose: true}
	if a := f.Agent; a != nil {
		form.Agent.SystemPrompt = a.SystemPrompt
		if a.Tools != nil {
			form.Agent.Tools = a.Tools
		}
		form.Agent.GeneralPurpose = a.GeneralPurpose == nil || *a.GeneralPurpose
		form.Agent.MaxSteps = numText(a.MaxSteps)
		form.Agent.MaxConcurrency = numText(a.MaxConcurrency)
		form.Agent.FilesMerge = a.FilesMerge
		if a.Compat != nil {
			form.Agent.Compat = *a.Compat
		}
		form.Agent.TimeoutMS = numText(a.TimeoutMS)
		form.Agent.Model, form.Agent.BaseURL = a.Model, a.BaseURL
		if sm := a.Summarization; sm != nil {
			form.Agent.MaxTokens, form.Agent.KeepMessages = numText(sm.MaxTokens), numText(sm.KeepMessages)
		}
	}
	if m := f.Model; m != nil {
		form.Model = templates.ModelForm{Provider: m.Provider, Model: m.Model, Endpoint: m.Endpoint, BaseURL: m.BaseURL,
			APIKeyEnv: m.APIKeyEnv, NativeJSONSchema: m.NativeJSONSchema}
	}
	for _, s := range f.Subagents {
		form.Subagents = append(form.Subagents, templates.SubagentForm{
			Name: s.Name, Description: s.Description, SystemPrompt: s.SystemPrompt, Mode: s.Mode,
			Tools: s.Tools, Model: s.Model, Endpoint: s.Endpoint, BaseURL: s.BaseURL, APIKeyEnv: s.APIKeyEnv, Skills: strings.Join(s.Skills, ", "),
			MaxSteps: numText(s.MaxSteps), TimeoutMS: numText(s.TimeoutMS), ResponseFormat: indentJSON(s.ResponseFormat),
		})
	}
	return form
}

func numText(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func indentJSON(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var b bytes.Buffer
	if json.Indent(&b, raw, "", "  ") != nil {
		return string(raw)
	}
	return b.String()
}

// teamCounter is the team's tokenizer; an unknown name (reported at its
// field) counts with the default one meanwhile.
func teamCounter(f scenario.File) tokens.Counter {
	if c, err := tokens.Get(f.Tokenizer); err == nil {
		return c
	}
	c, _ := tokens.Get("")
	return c
}

func size(c tokens.Counter, text string) templates.Size {
	return templates.Size{Chars: utf8.RuneCountInString(text), Tokens: c.Count(text)}
}

// teamPreview is what the main agent will receive, built by the engine:
// delegation.BuildTeam, then the task entry of the team's main tools; each
// tool definition costs the tokens of its JSON, as the engine counts it.
func teamPreview(lang *i18n.Lang, f scenario.File) templates.TeamPreview {
	counter := teamCounter(f)
	p := templates.TeamPreview{Tokenizer: counter.Name()}
	p.Prompts = append(p.Prompts, templates.PromptSize{Key: "agent.system_prompt", Label: "main",
		Size: size(counter, agentPrompt(f))})
	for i, s := range f.Subagents {
		label := s.Name
		if label == "" {
			label = lang.T("team.pv.subagent_n", "N", i+1)
		}
		p.Prompts = append(p.Prompts, templates.PromptSize{Key: templates.SubKey(i, "system_prompt"), Label: label,
			Size: size(counter, s.SystemPrompt)})
	}
	team, err := delegation.BuildTeam(f.TeamSpec())
	if err != nil {
		var fe delegation.FieldErrors
		if !errors.As(err, &fe) {
			fe = delegation.FieldErrors{{Message: err.Error()}}
		}
		p.Problems = viewErrors(fe)
		return p
	}
	p.Built = true
	p.Warnings = viewErrors(team.Warnings)
	for _, def := range team.MainTools() {
		n := counter.Count(delegation.ToolJSON(def)) // as the engine counts it
		p.Tools = append(p.Tools, templates.ToolView{Name: def.Name, Tokens: n})
		p.ToolTokens += n
		if def.Name == delegation.TaskToolName {
			p.HasTask = true
			p.TaskDescription = def.Description
			p.TaskSize = size(counter, def.Description)
		}
	}
	// write_todos brings a section of the system prompt too, paid on every
	// call as its definition is.
	if section := team.MainPromptSections(); section != "" {
		p.TodoSection = counter.Count(section)
		p.ToolTokens += p.TodoSection
	}
	return p
}

func agentPrompt(f scenario.File) string {
	if f.Agent == nil {
		return ""
	}
	return f.Agent.SystemPrompt
}

// endpointKind is the API of the endpoint of that name (openai when there is
// none: its run is refused by name where it starts).
func (s *Server) endpointKind(name string) string {
	e, _ := s.runner.Endpoints.Lookup(name)
	return e.Kind()
}

// remoteProvider: the provider's answers come from a model endpoint, not a
// script.
func remoteProvider(p string) bool {
	return p == scenario.ProviderOpenAI || p == scenario.ProviderAnthropic
}
