package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/i18n"
)

// langCookie remembers the language a person chose with the switch.
const langCookie = "studio_lang"

// language picks each page's language — the one chosen with the switch
// (?lang=zh, remembered in a cookie), else the browser's Accept-Language —
// and puts it in the request's context, where the templates and the
// messages read it. A GET with ?lang= sets the cookie and sends the
// browser back to the same page without it, so that a link or a reload
// shows the page and not the switch.
func (s *Server) language(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if isAPI(r.URL.Path) {
			return next(c)
		}
		if want := r.URL.Query().Get("lang"); want != "" && r.Method == http.MethodGet {
			if !i18n.Valid(want) {
				want = i18n.Negotiate(r.Header.Get("Accept-Language"))
			}
			c.SetCookie(&http.Cookie{Name: langCookie, Value: want, Path: "/", MaxAge: int(365 * 24 * time.Hour / time.Second),
				HttpOnly: true, SameSite: http.SameSiteLaxMode})
			back := *r.URL
			q := back.Query()
			q.Del("lang")
			back.RawQuery = q.Encode()
			back.Scheme, back.Host, back.User = "", "", nil
			return c.Redirect(http.StatusSeeOther, back.RequestURI())
		}
		lang := requestLang(r)
		c.SetRequest(r.WithContext(i18n.With(r.Context(), i18n.Get(lang))))
		h := c.Response().Header()
		h.Add("Vary", "Accept-Language, Cookie")
		h.Set("Content-Language", i18n.Tag(lang))
		return next(c)
	}
}

// requestLang is the language a request asks for: its cookie's, else its
// Accept-Language's.
func requestLang(r *http.Request) string {
	if ck, err := r.Cookie(langCookie); err == nil && i18n.Valid(ck.Value) {
		return ck.Value
	}
	return i18n.Negotiate(r.Header.Get("Accept-Language"))
}

// tr is the language of a request.
func tr(c echo.Context) *i18n.Lang { return i18n.From(c.Request().Context()) }

// statusText names an HTTP status in the request's language.
func statusText(c echo.Context, status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusServiceUnavailable:
		return tr(c).T("status." + strconv.Itoa(status))
	}
	return http.StatusText(status)
}
