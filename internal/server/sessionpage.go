package server

// The session page's handlers' helpers: what a viewer asked for, and a
// component written as the response. The page itself is drawn by
// internal/present.

import (
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/present"
)

// render writes a templ component as the response.
func render(c echo.Context, status int, comp templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response().Writer)
}

// choiceOf is what a viewer of a session page asked to see: from its URL.
func choiceOf(c echo.Context) present.Choice {
	return present.Choice{Agent: c.QueryParam("agent"), Step: atoiDefault(c.QueryParam("step"), 0), TimelineAll: c.QueryParam("timeline") == "all"}
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
