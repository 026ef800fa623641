package server

import (
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
)

// apiSession is a line of GET /api/sessions.
type apiSession struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Title       string    `json:"title,omitempty"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	Agents      int       `json:"agents"`
	ModelCalls  int       `json:"model_calls"`
	InputTokens int       `json:"input_tokens"`
	URL         string    `json:"url"`
}

func (s *Server) apiSessions(c echo.Context) error {
	list, err := s.cfg.DB.Sessions(c.Request().Context(), 0)
	if err != nil {
		return err
	}
	out := make([]apiSession, 0, len(list))
	for _, x := range list {
		out = append(out, apiSession{ID: x.ID, Name: x.Name, Title: x.Title, Status: x.Status, CreatedAt: x.CreatedAt,
			Agents: x.Agents, ModelCalls: x.ModelCalls, InputTokens: x.InputTokens, URL: "/sessions/" + x.ID})
	}
	return c.JSON(http.StatusOK, out)
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
		return nil, echo.NewHTTPError(http.StatusRequestEntityTooLarge, "the body is too large")
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
	return c.JSON(http.StatusCreated, map[string]string{"id": id, "url": "/sessions/" + id})
}

func download(c echo.Context, name string) {
	if c.QueryParam("download") != "" {
		c.Response().Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	}
}

func (s *Server) apiTrace(c echo.Context) error {
	t, err := s.cfg.DB.Trace(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	download(c, "session-"+t.Session.ID+".trace.json")
	return c.JSONPretty(http.StatusOK, t, "  ")
}

func (s *Server) apiOTLP(c echo.Context) error {
	t, err := s.cfg.DB.Trace(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	doc, err := otlp.Export(t)
	if err != nil {
		return err
	}
	download(c, "session-"+t.Session.ID+".otlp.json")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
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
	return c.JSON(http.StatusCreated, map[string]any{"id": ids[0], "url": "/sessions/" + ids[0], "ids": ids})
}
