package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// The CSRF defence of the forms. The studio's pages carry a token in a
// hidden _csrf field; a form is taken only with the token that goes with
// the browser's studio_csrf cookie. The token is a MAC of the cookie under a
// key only this process knows, so a cookie planted by a page on another
// port of the same host (cookies ignore ports) is of no use without its
// token, which such a page cannot read. The token is read from the body
// only, never from the query string, where it would leak into logs and
// history. Origin and Sec-Fetch-Site are checked before this (checkHost).
const (
	csrfCookie     = "studio_csrf"
	csrfField      = "_csrf"
	csrfContextKey = "csrf"
	csrfCookieAge  = 24 * time.Hour
	// formMemory is how much of a multipart form is held in memory; the
	// rest of a large upload goes to a temporary file.
	formMemory = 8 << 20
)

func newKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("server: no randomness: " + err.Error())
	}
	return k
}

// csrfTokenFor is the form token of a cookie's nonce.
func (s *Server) csrfTokenFor(nonce string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte("csrf\x00" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// csrf sets the cookie and the token for the pages, and checks the token of
// every form. The JSON API is for scripts and is skipped: it takes JSON
// bodies only, which a page on another site cannot send without the
// browser asking first, and checkHost refuses other origins.
func (s *Server) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := c.Request().URL.Path
		if isAPI(p) || strings.HasPrefix(p, "/static/") {
			return next(c)
		}
		nonce, fresh := "", false
		if ck, err := c.Cookie(csrfCookie); err == nil && len(ck.Value) == 22 {
			nonce = ck.Value
		} else {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			nonce, fresh = base64.RawURLEncoding.EncodeToString(b), true
		}
		token := s.csrfTokenFor(nonce)
		if changesState(c.Request()) {
			got, err := postedField(c.Request(), csrfField)
			if err != nil {
				return err
			}
			if fresh || !hmac.Equal([]byte(got), []byte(token)) {
				return echo.NewHTTPError(http.StatusForbidden, "This form has expired or did not come from this studio: reload the page and send it again.")
			}
		}
		if fresh {
			c.SetCookie(&http.Cookie{Name: csrfCookie, Value: nonce, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
				Secure: c.Scheme() == "https", Expires: time.Now().Add(csrfCookieAge)})
		}
		c.Set(csrfContextKey, token)
		c.Response().Header().Add(echo.HeaderVary, echo.HeaderCookie)
		return next(c)
	}
}

// postedField reads a field of a form's body (not of its URL). A form that
// cannot be read says why, in words: too large, too many fields, broken.
func postedField(r *http.Request, name string) (string, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType))
	var err error
	if mt == echo.MIMEMultipartForm {
		err = r.ParseMultipartForm(formMemory)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		return "", formError(err)
	}
	// Bad bytes would become U+FFFD on the way to JSON, and the studio
	// would keep other text than was typed.
	for k, vs := range r.PostForm {
		for _, v := range vs {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return "", echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("The form's field %q is not valid UTF-8: send the page's form as it is, from a browser.", k))
			}
		}
	}
	return r.PostForm.Get(name), nil
}

// formError explains why a form could not be read.
func formError(err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, bodyTooLarge(tooLarge.Limit))
	case errors.Is(err, multipart.ErrMessageTooLarge), strings.Contains(err.Error(), "exceeded limit"):
		// net/url and mime/multipart refuse forms of more than some
		// thousands of fields or parts (GODEBUG urlmaxqueryparams,
		// multipartmaxparts); their errors are not exported.
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge, "This form has too many fields to be read ("+err.Error()+"): send fewer.")
	}
	return echo.NewHTTPError(http.StatusBadRequest, "This form could not be read: "+err.Error()+".")
}
