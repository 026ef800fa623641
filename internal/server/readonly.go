package server

import (
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/web/templates"
)

// readOnlyForms are the forms a read-only studio still takes: they change
// nothing stored. The team form's own buttons (add, remove, move, preview)
// only redraw it; its save is refused in submitTeam.
var readOnlyForms = [...]string{"/sign-in", "/teams/preview", "/teams", "/teams/:id"}

// readOnly, on a studio serving its database read-only (Config.ReadOnly),
// marks every page to say so and refuses every request that would write:
// runs, imports, stops, team changes, OTLP traces, recorded calls.
func (s *Server) readOnly(next echo.HandlerFunc) echo.HandlerFunc {
	reason := s.cfg.ReadOnly
	if reason == "" {
		return next
	}
	return func(c echo.Context) error {
		r := c.Request()
		c.SetRequest(r.WithContext(templates.WithReadOnly(r.Context(), reason)))
		if !changesState(r) {
			return next(c)
		}
		for _, p := range readOnlyForms {
			if c.Path() == p {
				return next(c)
			}
		}
		return s.refuseWrite()
	}
}

// refuseWrite is the error of a change asked of a read-only studio, or nil
// when it writes.
func (s *Server) refuseWrite() error {
	if s.cfg.ReadOnly == "" {
		return nil
	}
	return &delegation.Error{Code: delegation.EREADONLY,
		Message: "the studio serves its database read-only (" + s.cfg.ReadOnly + "): nothing can be run, imported, recorded or saved"}
}
