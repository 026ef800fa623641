package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/web/templates"
)

// SessionLine is a line of a sessions list as GET /api/sessions and
// `studio sessions --json` give it.
type SessionLine struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Title       string    `json:"title,omitempty"`
	Status      string    `json:"status"`
	Origin      string    `json:"origin"`
	CreatedAt   time.Time `json:"created_at"`
	Agents      int       `json:"agents"`
	ModelCalls  int       `json:"model_calls"`
	InputTokens int       `json:"input_tokens"`
	URL         string    `json:"url"`
	// LeaseLapsed is set on a session marked running whose process stopped
	// renewing its lease by now (db.Session.Lapsed): it is gone.
	LeaseLapsed bool `json:"lease_lapsed,omitempty"`
}

// SessionLines are the lines of list at now.
func SessionLines(list []db.Session, now time.Time) []SessionLine {
	out := make([]SessionLine, 0, len(list))
	for _, x := range list {
		out = append(out, SessionLine{ID: x.ID, Name: x.Name, Title: x.Title, Status: x.Status, Origin: x.Origin,
			CreatedAt: x.CreatedAt, Agents: x.Agents, ModelCalls: x.ModelCalls, InputTokens: x.InputTokens,
			URL: templates.SessionURL(x.ID), LeaseLapsed: x.Lapsed(now)})
	}
	return out
}

// SessionFilterOf checks a sessions list's filters, as the API's query and
// the command line's flags give them: a status and an origin ("" for any),
// a limit (0 for all).
func SessionFilterOf(status, origin string, limit int) (db.SessionFilter, error) {
	var problems []string
	if status != "" && !slices.Contains(delegation.Statuses(), status) {
		problems = append(problems, fmt.Sprintf("status %q is none of %s", status, strings.Join(delegation.Statuses(), ", ")))
	}
	if origin != "" && !slices.Contains(delegation.Origins(), origin) {
		problems = append(problems, fmt.Sprintf("origin %q is none of %s", origin, strings.Join(delegation.Origins(), ", ")))
	}
	if limit < 0 {
		problems = append(problems, fmt.Sprintf("limit %d: give a number of sessions, or 0 for all", limit))
	}
	if problems != nil {
		return db.SessionFilter{}, errors.New(strings.Join(problems, "; "))
	}
	return db.SessionFilter{Status: status, Origin: origin, Limit: limit}, nil
}

// apiSessions lists the sessions, newest first; ?status=, ?origin= and
// ?limit= pick some.
func (s *Server) apiSessions(c echo.Context) error {
	limit := 0
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil {
			return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("limit %q: give a number of sessions, or 0 for all", i18n.Excerpt(l, 100)))
		}
		limit = n
	}
	f, err := SessionFilterOf(c.QueryParam("status"), c.QueryParam("origin"), limit)
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error()+".")
	}
	list, err := s.cfg.DB.SessionsWhere(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, SessionLines(list, s.cfg.DB.Now()))
}

// jsonBody reads a JSON request body. Requiring the JSON content type keeps
// other sites' pages from posting here: a browser must ask before sending
// it across origins.
func jsonBody(c echo.Context) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if mt != echo.MIMEApplicationJSON {
		return nil, echo.NewHTTPError(http.StatusUnsupportedMediaType, "send the body as JSON, with Content-Type: application/json")
	}
	b, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, bodyTooLarge(tooLarge.Limit))
		}
		return nil, echo.NewHTTPError(http.StatusBadRequest, "The request body could not be read: "+err.Error()+".")
	}
	return b, nil
}

func (s *Server) apiStartSession(c echo.Context) error {
	doc, err := jsonBody(c)
	if err != nil {
		return err
	}
	sc, err := scenario.ParseContext(c.Request().Context(), doc)
	if err != nil {
		return err
	}
	id, err := s.runner.Start(c.Request().Context(), sc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]string{"id": id, "url": templates.SessionURL(id)})
}

func download(c echo.Context, name string) {
	if c.QueryParam("download") != "" {
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	}
}

// apiTrace streams a session's trace from the store, compact, or indented
// with ?pretty=1.
func (s *Server) apiTrace(c echo.Context) error {
	pretty := truthy(c.QueryParam("pretty"))
	return s.cfg.DB.Read(c.Request().Context(), c.Param("id"), func(r db.Reader) error {
		download(c, "session-"+r.Session().ID+".trace.json")
		c.Response().Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		c.Response().WriteHeader(http.StatusOK)
		if err := trace.Write(c.Response(), r, pretty); err != nil {
			s.abort(c, "the trace export stopped part-way", err)
		}
		return nil
	})
}

// apiOTLP streams a session's spans from the store: OTLP/JSON, or protobuf
// with ?format=otlp-proto (or Accept: application/x-protobuf). ?inputs=full
// (&input_cap=BYTES) writes each call's whole input; ?conventions=
// genai,openinference adds OpenInference's attributes; ?after=SEQ leaves out
// the spans finished by that seq, which the Studio-Last-Seq header of an
// earlier export of a running session gave.
func (s *Server) apiOTLP(c echo.Context) error {
	opts, proto, err := otlpQuery(c)
	if err != nil {
		return err
	}
	return s.cfg.DB.Read(c.Request().Context(), c.Param("id"), func(r db.Reader) error {
		h := c.Response().Header()
		h.Set("Studio-Last-Seq", strconv.FormatInt(r.Head().LastSeq, 10))
		write, name := otlp.WriteJSON, ".otlp.json"
		h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		if proto {
			write, name = otlp.WriteProto, ".otlp.pb"
			h.Set(echo.HeaderContentType, "application/x-protobuf")
		}
		download(c, "session-"+r.Session().ID+name)
		c.Response().WriteHeader(http.StatusOK)
		if _, err := write(c.Response(), r, opts); err != nil {
			s.abort(c, "the OTLP export stopped part-way", err)
		}
		return nil
	})
}

// otlpQuery reads the OTLP export's query parameters; every problem is
// reported at once.
func otlpQuery(c echo.Context) (otlp.Options, bool, error) {
	var opts otlp.Options
	var errs delegation.FieldErrors
	var err error
	if opts.Inputs, err = otlp.ParseInputs(c.QueryParam("inputs")); err != nil {
		errs.Add("inputs", "%v", err)
	}
	if v := c.QueryParam("input_cap"); v != "" {
		if opts.InputCap, err = strconv.Atoi(v); err != nil || opts.InputCap <= 0 {
			errs.Add("input_cap", "give the cap in bytes, a positive whole number (default %d)", otlp.DefaultInputCap)
		}
	}
	if opts.OpenInference, err = otlp.ParseConventions(c.QueryParam("conventions")); err != nil {
		errs.Add("conventions", "%v", err)
	}
	if v := c.QueryParam("after"); v != "" {
		if opts.After, err = strconv.ParseInt(v, 10, 64); err != nil || opts.After < 0 {
			errs.Add("after", "give a seq of the session's log, e.g. the Studio-Last-Seq of an earlier export")
		}
	}
	proto := strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "application/x-protobuf")
	switch c.QueryParam("format") {
	case "", "otlp", "otlp-json":
	case "otlp-proto":
		proto = true
	default:
		errs.Add("format", "use otlp (OTLP/JSON, the default) or otlp-proto (OTLP protobuf)")
	}
	return opts, proto, errs.Err()
}

func truthy(v string) bool { return v == "1" || v == "true" || v == "yes" }

// abort ends a response whose body could not be finished: the status has
// gone, so the connection is dropped, and the client sees a broken body
// rather than a short document that looks whole.
func (s *Server) abort(c echo.Context, what string, err error) {
	s.log.Error(what, "path", c.Request().URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}

func (s *Server) apiImport(c echo.Context) error {
	doc, err := jsonBody(c)
	if err != nil {
		return err
	}
	if len(doc) > trace.MaxBytes {
		return delegation.Errorf(delegation.ETOOLARGE, "the trace is %d bytes; the most a trace may have is %d", len(doc), trace.MaxBytes)
	}
	// A trace, or an OTLP JSON document (one session per trace in it).
	ids, err := s.runner.ImportFile(c.Request().Context(), doc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"id": ids[0], "url": templates.SessionURL(ids[0]), "ids": ids})
}
