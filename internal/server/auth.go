package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// MinTokenLen is the shortest access token the studio takes.
const MinTokenLen = 16

// CheckToken refuses an access token that is easy to guess: short, made of
// few distinct characters, or guessable from its kinds of characters in
// fewer than 2^64 tries. It says how to make a good one.
func CheckToken(token string) error {
	const how = "; make one with: openssl rand -hex 32"
	if strings.TrimSpace(token) != token {
		return errors.New("the access token starts or ends with whitespace (a copy-paste slip?)" + how)
	}
	for _, r := range token {
		if unicode.IsControl(r) {
			return errors.New("the access token holds a control character" + how)
		}
	}
	n := utf8.RuneCountInString(token)
	if n < MinTokenLen {
		return fmt.Errorf("the access token is %d characters long; it needs at least %d%s", n, MinTokenLen, how)
	}
	distinct := map[rune]bool{}
	var lower, upper, digit, other bool
	for _, r := range token {
		distinct[r] = true
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			other = true
		}
	}
	if len(distinct) < 8 {
		return fmt.Errorf("the access token repeats a few characters (%d distinct); it is easy to guess%s", len(distinct), how)
	}
	alphabet := 0
	for _, k := range []struct {
		on   bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if k.on {
			alphabet += k.size
		}
	}
	if bits := float64(n) * math.Log2(float64(alphabet)); bits < 64 {
		return fmt.Errorf("the access token is easy to guess (about %.0f bits); make it longer or mix letters, digits and signs%s", bits, how)
	}
	return nil
}

// auth is the access token's gate: the sign-in cookie, the bearer header,
// and the limits on guessing.
type auth struct {
	token string
	// signKey signs sign-in cookies; derived from the token, so a new
	// token signs everyone out, and the cookie is never the token.
	signKey []byte
	now     func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter // failed attempts, per client address
	all     *rate.Limiter            // failed attempts, from anywhere
}

// Guessing limits: a client may fail ten times, then once every six
// seconds; everyone together two hundred times, then twice a second.
const (
	clientFailBurst = 10
	clientFailEvery = 6 * time.Second
	allFailBurst    = 200
	allFailEvery    = 500 * time.Millisecond
	maxClients      = 10000
	signInAge       = 30 * 24 * time.Hour
	sessionCookie   = "studio_session"
)

func newAuth(token string, now func() time.Time) *auth {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("delegation-studio sign-in v1"))
	return &auth{token: token, signKey: m.Sum(nil), now: now,
		clients: map[string]*rate.Limiter{}, all: rate.NewLimiter(rate.Every(allFailEvery), allFailBurst)}
}

// matches compares in constant time, whatever the lengths.
func (a *auth) matches(got string) bool {
	x, y := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(a.token))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// clientOf is the client a request came from: its connection's peer
// address, without the port (no forwarding header is believed).
func clientOf(r *http.Request) string { return hostOf(r.RemoteAddr) }

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

func (a *auth) limiter(client string) *rate.Limiter {
	l := a.clients[client]
	if l == nil {
		if len(a.clients) >= maxClients {
			// Forget the clients that have not failed lately.
			for k, v := range a.clients {
				if v.TokensAt(a.now()) >= clientFailBurst {
					delete(a.clients, k)
				}
			}
			if len(a.clients) >= maxClients {
				a.clients = map[string]*rate.Limiter{}
			}
		}
		l = rate.NewLimiter(rate.Every(clientFailEvery), clientFailBurst)
		a.clients[client] = l
	}
	return l
}

// blocked says how long a client must wait before it may try a token
// again, or 0.
func (a *auth) blocked(r *http.Request) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	var wait time.Duration
	for _, l := range []*rate.Limiter{a.limiter(clientOf(r)), a.all} {
		if t := l.TokensAt(now); t < 1 {
			wait = max(wait, time.Duration((1-t)/float64(l.Limit())*float64(time.Second)))
		}
	}
	return wait
}

// failed records a wrong token.
func (a *auth) failed(r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.limiter(clientOf(r)).AllowN(now, 1)
	a.all.AllowN(now, 1)
}

// tooManyTries is the answer to a client that guessed too often.
func tooManyTries(c echo.Context, wait time.Duration) error {
	secs := int(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf("Too many wrong access tokens: wait %d s before trying again.", max(secs, 1)))
}

// newSession makes a sign-in cookie's value: a random id and an expiry,
// signed. It says nothing of the token.
func (a *auth) newSession() string {
	var b [24]byte
	_, _ = rand.Read(b[:16])
	binary.BigEndian.PutUint64(b[16:], uint64(a.now().Add(signInAge).Unix()))
	return base64.RawURLEncoding.EncodeToString(b[:]) + "." + a.sign(b[:])
}

func (a *auth) sign(b []byte) string {
	m := hmac.New(sha256.New, a.signKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validSession checks a sign-in cookie's signature and expiry.
func (a *auth) validSession(v string) bool {
	id, mac, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 24 || !hmac.Equal([]byte(mac), []byte(a.sign(b))) {
		return false
	}
	return a.now().Unix() < int64(binary.BigEndian.Uint64(b[16:]))
}

// bearerToken is the token of an Authorization header of the Bearer
// scheme, whose name is compared without regard to case (RFC 9110 §11.1):
// "bearer x" is as much the token as "Bearer x".
func bearerToken(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// studioTokenHeader carries the access token on the recording endpoint,
// whose Authorization is the client's key for the upstream.
const studioTokenHeader = "X-Studio-Token"

// requireToken lets a request through when no token is set, or when it
// carries a valid sign-in cookie or the token as a bearer header. The token
// is compared first: the right one always passes, whoever sent wrong ones
// from the same address (behind a reverse proxy every client has its
// address). Only wrong tokens are counted, and a client that sends too many
// waits.
func (s *Server) requireToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		a := s.auth
		if a == nil {
			return next(c)
		}
		r := c.Request()
		p := r.URL.Path
		if p == "/sign-in" || p == "/healthz" || strings.HasPrefix(p, "/static/") {
			return next(c)
		}
		if ck, err := c.Cookie(sessionCookie); err == nil && a.validSession(ck.Value) {
			return next(c)
		}
		wrong := false
		if h := r.Header.Get("Authorization"); h != "" {
			if bearer, ok := bearerToken(h); ok && a.matches(bearer) {
				return next(c)
			}
			// The recording endpoint's clients send their upstream key as
			// Authorization, and the studio's token beside it.
			wrong = !proxyRoute(p) || r.Header.Get(studioTokenHeader) == ""
		}
		if k := r.Header.Get("X-Api-Key"); k != "" && proxyRoute(p) && a.matches(k) {
			return next(c) // Anthropic's SDKs send the token as their key
		}
		if t := r.Header.Get(studioTokenHeader); t != "" && proxyRoute(p) {
			if a.matches(t) {
				return next(c)
			}
			wrong = true
		}
		if wrong {
			if err := a.wrongToken(c); err != nil {
				return err
			}
		}
		if isAPI(p) {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="studio"`)
			return echo.NewHTTPError(http.StatusUnauthorized, "This studio needs its access token: send Authorization: Bearer <token>.")
		}
		closeAfter(c)
		return c.Redirect(http.StatusSeeOther, "/sign-in")
	}
}

// wrongToken counts a wrong token, or answers 429 to a client that has
// sent too many of late.
func (a *auth) wrongToken(c echo.Context) error {
	if wait := a.blocked(c.Request()); wait > 0 {
		return tooManyTries(c, wait)
	}
	a.failed(c.Request())
	return nil
}
