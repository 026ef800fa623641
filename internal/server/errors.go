package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/web/templates"
)

// apiError is the JSON of every API error (formats.md §5).
type apiError struct {
	Error string `json:"error"`
	// Code is the error's code (delegation's E… codes: "read_only",
	// "not_found"…), when it has one.
	Code   string                  `json:"code,omitempty"`
	Errors []delegation.FieldError `json:"errors"`
}

// handleError is the one place an error becomes a response: our codes map
// to statuses, anything else is logged and shown as "Internal error". API
// requests (and those that accept only JSON) get JSON, the rest a page.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	closeAfter(c) // a refused body is not read to its end
	status, msg, code := http.StatusInternalServerError, "Internal error", ""
	fields := []delegation.FieldError{}
	if d, ok := s.cfg.DB.(describer); ok {
		err = d.Describe(err) // a damaged or read-only file says so
	}
	var he *echo.HTTPError
	var de *delegation.Error
	var fe delegation.FieldErrors
	var be *busyError
	switch {
	case errors.As(err, &be):
		status, msg = be.status, be.msg
		setRetryAfter(c, be.retryAfter)
	case errors.As(err, &he):
		status = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(status)
		}
	case errors.As(err, &de):
		status, msg, code = codeStatus(de.Code), de.Message, de.Code
		if key := i18n.ErrorKey(de.Code); key != "" {
			msg = tr(c).T(key)
		}
		fields = append(fields, de.Fields...)
	case errors.As(err, &fe):
		status, msg = http.StatusBadRequest, fe[0].Error()
		fields = append(fields, fe...)
	}
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
		msg = tr(c).T("error.internal")
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		// Busy or storage trouble: for now, not for good. A read-only
		// database stays so: no retry would help.
		if code != delegation.EREADONLY {
			setRetryAfter(c, 5)
		}
		if status == http.StatusServiceUnavailable {
			s.log.Warn("request refused for now", "method", c.Request().Method, "path", c.Request().URL.Path, "why", msg)
		}
	}
	if anthropicRoute(c.Request().URL.Path) {
		anthropicError(c, status, msg)
		return
	}
	if proxyRoute(c.Request().URL.Path) {
		openAIError(c, status, msg, code)
		return
	}
	if wantsJSON(c) {
		_ = c.JSON(status, apiError{Error: msg, Code: code, Errors: fields})
		return
	}
	_ = render(c, status, templates.ErrorPage(templates.Page{Title: statusText(c, status), Here: c.Request().URL.RequestURI()}, status, msg))
}

func codeStatus(code string) int {
	switch code {
	case delegation.ENOTFOUND:
		return http.StatusNotFound
	case delegation.EINVALID:
		return http.StatusBadRequest
	case delegation.ECONFLICT:
		return http.StatusConflict
	case delegation.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case delegation.EUNAVAILABLE, delegation.EFULL, delegation.EREADONLY, delegation.ESTOPPING:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func wantsJSON(c echo.Context) bool {
	if isAPI(c.Request().URL.Path) {
		return true
	}
	accept := c.Request().Header.Get("Accept")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}
