package server

import (
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/present"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/schema"
	"github.com/delegationstudio/studio/web/templates"
)

func csrfToken(c echo.Context) string {
	t, _ := c.Get(csrfContextKey).(string)
	return t
}

func (s *Server) page(c echo.Context, title string) templates.Page {
	return templates.Page{Title: title, CSRF: csrfToken(c), Nav: navOf(c.Path()), Here: c.Request().URL.RequestURI()}
}

// navOf is the section of the nav a route belongs to.
func navOf(route string) string {
	switch {
	case route == "/" || strings.HasPrefix(route, "/sessions") || route == "/traces":
		return "sessions"
	case strings.HasPrefix(route, "/lessons"):
		return "lessons"
	case strings.HasPrefix(route, "/compare"):
		return "compare"
	case strings.HasPrefix(route, "/teams") || route == "/clone-team":
		return "teams"
	}
	return ""
}

// summary heads a page whose form came back: each problem linking to href
// (the field it is about, which the form has as one text).
func summary(form, href string, errs []templates.FieldError) *templates.ErrorSummary {
	sm := &templates.ErrorSummary{Form: form}
	for _, e := range errs {
		sm.Items = append(sm.Items, templates.SummaryItem{Field: e.Field, Message: e.Message, Href: href})
	}
	return sm
}

// sessionsPageView builds the sessions page; the form fields carry what the
// user typed when a form comes back with errors.
func (s *Server) sessionsPageView(c echo.Context) (templates.SessionsPage, error) {
	v := templates.SessionsPage{Page: s.page(c, tr(c).T("nav.sessions"))}
	for _, e := range s.cfg.Endpoints {
		v.Endpoints = append(v.Endpoints, templates.Choice{Value: e.Name, Label: e.Label()})
	}
	list, err := s.cfg.DB.Sessions(c.Request().Context(), 200)
	if err != nil {
		return v, err
	}
	for _, x := range list {
		v.Sessions = append(v.Sessions, templates.SessionRow{ID: x.ID, Name: x.Name, Title: x.Title, Status: x.Status,
			Agents: x.Agents, ModelCalls: x.ModelCalls, InputTokens: x.InputTokens, CreatedAt: x.CreatedAt})
	}
	for _, l := range lessons.Course() {
		v.Lessons = append(v.Lessons, lessonOption(tr(c), l))
	}
	return v, nil
}

func (s *Server) sessionsPage(c echo.Context) error {
	v, err := s.sessionsPageView(c)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.SessionsPageView(v, s.now()))
}

// formText reads a textarea, or the file field beside it when one was sent.
func formText(c echo.Context, text, file string) (string, error) {
	fh, err := c.FormFile(file)
	if err == nil && fh.Size > 0 {
		return readFormFile(fh)
	}
	if err != nil && !errors.Is(err, http.ErrMissingFile) && !errors.Is(err, http.ErrNotMultipart) {
		return "", err
	}
	return c.FormValue(text), nil
}

func readFormFile(fh *multipart.FileHeader) (string, error) {
	if fh.Size > trace.MaxBytes {
		return "", delegation.Errorf(delegation.ETOOLARGE, "the file is %d bytes; the most it may have is %d", fh.Size, trace.MaxBytes)
	}
	f, err := fh.Open()
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, trace.MaxBytes+1))
	return string(b), err
}

// badInput reports whether err is the user's to fix (the form comes back
// with it) rather than ours.
func badInput(err error) bool {
	code := delegation.ErrorCode(err)
	return code == delegation.EINVALID || code == delegation.ETOOLARGE
}

// typed is what a form sends back of a document the user gave: all of it,
// unless it is too big to send back.
func typed(doc string) string {
	if len(doc) > 1<<20 {
		return ""
	}
	return doc
}

func fieldErrors(err error) []templates.FieldError {
	var out []templates.FieldError
	var fe delegation.FieldErrors
	var de *delegation.Error
	switch {
	case errors.As(err, &fe):
		for _, e := range fe {
			out = append(out, templates.FieldError{Field: e.Field, Message: e.Message})
		}
	case errors.As(err, &de) && len(de.Fields) > 0:
		for _, e := range de.Fields {
			out = append(out, templates.FieldError{Field: e.Field, Message: e.Message})
		}
	default:
		out = append(out, templates.FieldError{Message: err.Error()})
	}
	return out
}

// startSession starts a session from a lesson or a pasted or uploaded
// scenario, and redirects to it; a bad scenario comes back with its errors
// at their fields and the text as typed.
func (s *Server) startSession(c echo.Context) error {
	var doc string
	if name := c.FormValue("lesson"); name != "" {
		l, err := lessons.Get(name)
		if err != nil {
			return delegation.Errorf(delegation.ENOTFOUND, "%v", err)
		}
		doc = string(l.Scenario)
	} else {
		var err error
		if doc, err = formText(c, "scenario", "scenario_file"); err != nil {
			return err
		}
	}
	if kind := documentKind([]byte(doc)); kind == docTrace || kind == docOTLPJSON || kind == docOTLPProto {
		// Not a scenario at all: say what it is rather than list its
		// schema errors, and copy it where it goes.
		v, err := s.sessionsPageView(c)
		if err != nil {
			return err
		}
		v.Scenario = typed(doc)
		if kind != docOTLPProto {
			v.TraceText = typed(doc)
		}
		v.Summary = &templates.ErrorSummary{Form: "scenario", Foreign: kind}
		return render(c, http.StatusBadRequest, templates.SessionsPageView(v, s.now()))
	}
	id, err := s.start(c, []byte(doc), c.FormValue("endpoint"))
	if err != nil {
		if !badInput(err) {
			return err
		}
		v, verr := s.sessionsPageView(c)
		if verr != nil {
			return verr
		}
		v.Scenario, v.ScenarioErrs = typed(doc), fieldErrors(err)
		v.Summary = summary("scenario", "#scenario-text", v.ScenarioErrs)
		return render(c, http.StatusBadRequest, templates.SessionsPageView(v, s.now()))
	}
	return c.Redirect(http.StatusSeeOther, templates.SessionURL(id))
}

// start checks a scenario and starts it, against the chosen endpoint (by
// name) rather than its own model when one is chosen.
func (s *Server) start(c echo.Context, doc []byte, endpoint string) (string, error) {
	if strings.TrimSpace(string(doc)) == "" {
		return "", delegation.FieldErrors{{Field: "", Message: tr(c).T("msg.scenario_empty")}}
	}
	sc, err := scenario.ParseContext(c.Request().Context(), doc)
	if err != nil {
		return "", err
	}
	if endpoint != "" {
		e, ok := s.runner.Endpoints.Lookup(endpoint)
		if !ok {
			return "", delegation.FieldErrors{{Field: "endpoint", Message: tr(c).T("msg.no_endpoint")}}
		}
		model := ""
		if sc.File.Model != nil {
			model = sc.File.Model.Model
		}
		if sc, err = scenario.WithEndpoint(sc, scenario.Model{Provider: e.Kind(), Endpoint: endpoint, Model: model}); err != nil {
			return "", err
		}
		if e.NoStream { // and the scenario as run says it does not stream
			if sc, err = scenario.WithoutStreaming(sc); err != nil {
				return "", err
			}
		}
	}
	return s.runner.Start(c.Request().Context(), sc)
}

func (s *Server) importTrace(c echo.Context) error {
	doc, err := formText(c, "trace", "trace_file")
	if err != nil {
		return err
	}
	if kind := documentKind([]byte(doc)); kind == docScenario || kind == docText {
		v, err := s.sessionsPageView(c)
		if err != nil {
			return err
		}
		v.TraceText = typed(doc)
		if kind == docScenario {
			v.Scenario = typed(doc)
		}
		v.Summary = &templates.ErrorSummary{Form: "trace", Foreign: kind}
		return render(c, http.StatusBadRequest, templates.SessionsPageView(v, s.now()))
	}
	ids, err := s.runner.ImportFile(c.Request().Context(), []byte(doc))
	if err != nil {
		if !badInput(err) {
			return err
		}
		v, verr := s.sessionsPageView(c)
		if verr != nil {
			return verr
		}
		v.TraceText = typed(doc)
		v.TraceErrs = fieldErrors(err)
		v.Summary = summary("trace", "#trace-text", v.TraceErrs)
		return render(c, http.StatusBadRequest, templates.SessionsPageView(v, s.now()))
	}
	if len(ids) > 1 {
		return c.Redirect(http.StatusSeeOther, "/") // several traces: the list shows them all
	}
	return c.Redirect(http.StatusSeeOther, templates.SessionURL(ids[0]))
}

// pageData reads a session for its pages: its page state and its store at
// the same seq. Close its reader.
func (s *Server) pageData(c echo.Context) (*present.Page, error) {
	ctx := c.Request().Context()
	st, rd, err := s.runner.View(ctx, c.Param("id"))
	if err != nil {
		return nil, err
	}
	return present.New(ctx, st, rd), nil
}

func (s *Server) sessionPage(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	running := s.running(c.Request().Context(), p.SessionID(), p.State().Session.Status)
	v, err := p.SessionPage(s.page(c, p.State().Session.Name), choiceOf(c), running)
	if err != nil {
		return err
	}
	if v.RunOf, err = s.runOf(c, p.SessionID()); err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.SessionPageView(v))
}

func (s *Server) scrubFragment(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	v, err := p.Scrub(atoiDefault(c.QueryParam("step"), 0))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.ScrubberSection(v))
}

// inheritedFragment draws the messages a pane's agent inherited (?pane=,
// and ?step= for a page at a step), which the pane loads when opened.
func (s *Server) inheritedFragment(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	v, ok, err := p.Inherited(c.QueryParam("pane"), atoiDefault(c.QueryParam("step"), 0))
	if !ok {
		return delegation.Errorf(delegation.ENOTFOUND, "no pane %q in this session: name one as the session page does (child:a1, parent:a1, agent:main)", c.QueryParam("pane"))
	}
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.InheritedItems(v))
}

// panels draws every panel of the session page for a viewer's choice
// (?agent, ?step, ?timeline) as patches, the way a reconnecting page is
// brought up to date: the scrubber moves the whole page with it.
func (s *Server) panels(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	running := p.State().Session.Status == delegation.StatusRunning && s.runner.Running(p.SessionID())
	ps, err := p.SyncPatches(choiceOf(c), running)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, wireEvent{Seq: p.State().Seq, Type: "sync", At: s.now().UTC(), Patches: ps})
}

// filePage shows one of main's files whole (?path=): a summarization's
// folded history, say.
func (s *Server) filePage(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	path := c.QueryParam("path")
	content, ok, err := p.Reader().FileContent(c.Request().Context(), path)
	if err != nil {
		return err
	}
	if !ok {
		return delegation.Errorf(delegation.ENOTFOUND, "no file %q in the main agent's files of this session; its files are listed on the session page", path)
	}
	return render(c, http.StatusOK, templates.FilePageView(s.page(c, path), p.SessionID(), p.State().Session.Name, path, content))
}

// messagePage is one message, read by its id: the only row it needs.
func (s *Server) messagePage(c echo.Context) error {
	rd, err := s.cfg.DB.ReadPage(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	defer rd.Close()
	msg, err := rd.MessageByID(c.Request().Context(), c.Param("mid"))
	if err != nil {
		return err
	}
	if msg == nil {
		return delegation.Errorf(delegation.ENOTFOUND, "%s", tr(c).T("msg.no_message", "ID", c.Param("mid")))
	}
	if c.QueryParam("fragment") != "" {
		return render(c, http.StatusOK, templates.MessageBody(msg.Content))
	}
	v := present.New(c.Request().Context(), nil, rd).MessageView(*msg)
	v.Reasoning = msg.Reasoning
	return render(c, http.StatusOK, templates.MessagePage(s.page(c, tr(c).T("title.message", "ID", msg.ID)), rd.Session().ID, v, msg.Content))
}

func (s *Server) callPage(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	v, ok, err := p.CallPage(c.Param("cid"))
	if err != nil {
		return err
	}
	if !ok {
		return delegation.Errorf(delegation.ENOTFOUND, "%s", tr(c).T("msg.no_call", "ID", c.Param("cid")))
	}
	return render(c, http.StatusOK, templates.CallPage(s.page(c, tr(c).T("title.call", "ID", c.Param("cid"))), p.SessionID(), v))
}

// filesPage lists main's files a page at a time, after ?after=PATH.
func (s *Server) filesPage(c echo.Context) error {
	p, err := s.pageData(c)
	if err != nil {
		return err
	}
	defer p.Close()
	v, err := p.Files(c.QueryParam("after"))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, templates.FilesPageView(templates.FilesPage{Page: s.page(c, tr(c).T("sess.files_of", "Name", p.State().Session.Name)),
		SessionID: p.SessionID(), Name: p.State().Session.Name, Files: v}))
}

func (s *Server) stopSession(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.cfg.DB.Session(c.Request().Context(), id); err != nil {
		return err
	}
	if !s.runner.Cancel(id) && s.replicas != nil {
		// Another replica may be running it: it stops it when told.
		if err := s.replicas.RequestStop(c.Request().Context(), id); err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, templates.SessionURL(id))
}

func (s *Server) signInPage(c echo.Context) error {
	return render(c, http.StatusOK, templates.SignInPage(s.page(c, tr(c).T("signin.title")), false))
}

// signIn checks the token typed and sets the sign-in cookie: a signed
// session id, never the token itself. The right token always signs in;
// wrong ones are counted, and a client that sends too many waits (429).
func (s *Server) signIn(c echo.Context) error {
	a := s.auth
	if a == nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	if !a.matches(c.FormValue("token")) {
		if err := a.wrongToken(c); err != nil {
			return err
		}
		return render(c, http.StatusUnauthorized, templates.SignInPage(s.page(c, tr(c).T("signin.title")), true))
	}
	c.SetCookie(&http.Cookie{Name: sessionCookie, Value: a.newSession(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https", Expires: s.now().Add(signInAge)})
	return c.Redirect(http.StatusSeeOther, "/")
}

func (s *Server) schemaFile(c echo.Context) error {
	switch c.Param("name") {
	case "scenario.schema.json":
		return c.Blob(http.StatusOK, "application/schema+json", schema.Scenario())
	case "trace.schema.json":
		return c.Blob(http.StatusOK, "application/schema+json", schema.Trace())
	}
	return delegation.Errorf(delegation.ENOTFOUND, "no schema %q; there are scenario.schema.json and trace.schema.json", c.Param("name"))
}

// runOf links a session to the run it is part of, if any.
func (s *Server) runOf(c echo.Context, id string) (templates.RunLink, error) {
	runs, err := s.cfg.DB.Runs(c.Request().Context(), db.RunFilter{SessionID: id, Limit: 1})
	if err != nil || len(runs) == 0 {
		return templates.RunLink{}, err
	}
	r := runs[0]
	var other string
	for _, rs := range r.Sessions {
		if rs.SessionID != id {
			other = rs.SessionID
			break
		}
	}
	lang := tr(c)
	switch r.Kind {
	case db.RunLesson:
		return templates.RunLink{Label: lang.T("runof.lesson", "Title", lang.Text(lessonTitle(r.Lesson))), Link: lang.T("runof.lesson_link"),
			URL: "/lessons/" + url.PathEscape(r.Lesson) + "?run=" + url.QueryEscape(r.ID)}, nil
	case db.RunModes:
		if other != "" {
			return templates.RunLink{Label: lang.T("runof.modes"), Link: lang.T("runof.modes_link"),
				URL: "/compare?a=" + url.QueryEscape(r.Sessions[0].SessionID) + "&b=" + url.QueryEscape(r.Sessions[len(r.Sessions)-1].SessionID)}, nil
		}
	case db.RunTeam:
		return templates.RunLink{Label: lang.T("runof.team"), Link: lang.T("runof.team_link"), URL: "/teams/" + url.PathEscape(r.TeamID)}, nil
	}
	return templates.RunLink{}, nil
}

// fontFile serves the Go fonts the tree's labels are measured in
// (internal/view): the browser draws them in these very files.
func fontFile(c echo.Context) error {
	var ttf []byte
	switch c.Param("name") {
	case "go-regular.ttf":
		ttf = view.FontRegular
	case "go-bold.ttf":
		ttf = view.FontBold
	default:
		return delegation.Errorf(delegation.ENOTFOUND, "no font %q; there are go-regular.ttf and go-bold.ttf", c.Param("name"))
	}
	c.Response().Header().Set("Cache-Control", "public, max-age=604800")
	return c.Blob(http.StatusOK, "font/ttf", ttf)
}
