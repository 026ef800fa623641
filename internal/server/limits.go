package server

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/trace"
)

// Limits are what the server takes at once; zero values take the defaults.
type Limits struct {
	// MaxRunning is how many sessions run at once (DefaultMaxRunning).
	MaxRunning int
	// MaxViewers is how many live websockets are open in all, and
	// MaxSessionViewers how many watch one session.
	MaxViewers, MaxSessionViewers int
	// MaxChecks is how many documents (scenarios, traces, teams) are
	// checked at once; others wait up to CheckWait for their turn.
	MaxChecks int
	CheckWait time.Duration
	// A request body must come at MinBodyRate bytes a second once its
	// first BodyGrace has passed, and one client address sends at most
	// MaxClientBodies at once (bodies.go; the defaults there).
	BodyGrace       time.Duration
	MinBodyRate     int
	MaxClientBodies int
	// MaxBigCalls is how many model calls with a body above BigCallBody
	// (or of no declared length) are taken at once (DefaultMaxBigCalls);
	// the next is refused at once, 503 with Retry-After (bigCall).
	MaxBigCalls int
}

// Defaults of Limits.
const (
	DefaultMaxRunning        = 64
	DefaultMaxViewers        = 256
	DefaultMaxSessionViewers = 64
	DefaultCheckWait         = 10 * time.Second
	DefaultMaxBigCalls       = 4
)

func (l Limits) withDefaults() Limits {
	if l.MaxRunning <= 0 {
		l.MaxRunning = DefaultMaxRunning
	}
	if l.MaxViewers <= 0 {
		l.MaxViewers = DefaultMaxViewers
	}
	if l.MaxSessionViewers <= 0 {
		l.MaxSessionViewers = DefaultMaxSessionViewers
	}
	if l.MaxChecks <= 0 {
		l.MaxChecks = 2 * runtime.GOMAXPROCS(0)
	}
	if l.CheckWait <= 0 {
		l.CheckWait = DefaultCheckWait
	}
	if l.BodyGrace <= 0 {
		l.BodyGrace = DefaultBodyGrace
	}
	if l.MinBodyRate <= 0 {
		l.MinBodyRate = DefaultMinBodyRate
	}
	if l.MaxClientBodies <= 0 {
		l.MaxClientBodies = DefaultMaxClientBodies
	}
	if l.MaxBigCalls <= 0 {
		l.MaxBigCalls = DefaultMaxBigCalls
	}
	return l
}

// Body limits, sized to what each kind of request carries: a scenario or a
// team is a few kilobytes to a few hundred, a trace can be large, anything
// else is a small form.
const (
	MaxScenarioBody = 4 << 20
	MaxTraceBody    = trace.MaxBytes + 1<<20 // and a multipart form's wrapping
	MaxFormBody     = 64 << 10
	// MaxOTLPBody is the largest OTLP request POST /v1/traces takes,
	// compressed or, once decompressed, not: 16 MiB. OpenTelemetry's
	// exporters send batches of at most 512 spans, far below it.
	MaxOTLPBody = 16 << 20
	// MaxChatBody is the largest chat-completions request the recording
	// endpoint takes: a long context with a few images.
	MaxChatBody = 32 << 20
	// BigCallBody: a model call whose body is larger is a big one, taken
	// a few at a time (bigCall). An agent's call is rarely near it.
	BigCallBody = 1 << 20
)

// bodyLimit is the most a route's body may hold.
func bodyLimit(method, route string) int64 {
	if method == http.MethodGet || method == http.MethodHead {
		return 0
	}
	switch {
	case route == "/api/traces" || route == "/traces":
		return MaxTraceBody
	case route == "/v1/traces":
		return MaxOTLPBody
	case route == "/v1/chat/completions" || route == "/v1/messages":
		return MaxChatBody
	case route == "/api/sessions" || route == "/sessions" || route == "/compare" || route == "/clone-team" ||
		strings.HasPrefix(route, "/teams") || strings.HasPrefix(route, "/lessons/"):
		return MaxScenarioBody
	}
	return MaxFormBody
}

// modelCall reports whether a route is the recording endpoint's.
func modelCall(method, route string) bool {
	return method == http.MethodPost && (route == "/v1/chat/completions" || route == "/v1/messages")
}

// heavy reports whether a route checks a whole document: those wait their
// turn (admit).
func heavy(method, route string) bool {
	// A model call is not a document to check: it waits on its model,
	// and agents make many at once. Only a big one is held (bigCall).
	return method == http.MethodPost && bodyLimit(method, route) > MaxFormBody && !modelCall(method, route)
}

// bigCall reports whether a request is a model call with a big body, or
// one of no declared length (which may be as big). Reading, checking and
// counting the tokens of a 30 MB body took 14 times its size in memory
// for a while: a few at once take the machine.
func bigCall(r *http.Request, route string) bool {
	return modelCall(r.Method, route) && (r.ContentLength > BigCallBody || r.ContentLength < 0)
}

// limitBody refuses a body larger than its route takes: at once when its
// length is declared, and as soon as it is read past the limit otherwise.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		limit := bodyLimit(r.Method, c.Path())
		if limit == 0 {
			return next(c)
		}
		if r.ContentLength > limit {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, bodyTooLarge(limit))
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
		return next(c)
	}
}

func bodyTooLarge(limit int64) string {
	return fmt.Sprintf("The request is larger than this page or endpoint takes (%s): a scenario or a team may have %s, a trace %s.",
		byteSize(limit), byteSize(MaxScenarioBody), byteSize(trace.MaxBytes))
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// admit lets a bounded number of document checks run at once; the others
// wait their turn, and after CheckWait (or when their client leaves) are
// told to come back. Checking is linear in the document, but a crowd of
// large ones would still take every core.
func (s *Server) admit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if bigCall(c.Request(), c.Path()) {
			return s.admitBigCall(c, next)
		}
		if !heavy(c.Request().Method, c.Path()) {
			return next(c)
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), s.limits.CheckWait)
		defer cancel()
		select {
		case s.checks <- struct{}{}:
			defer func() { <-s.checks }()
			return next(c)
		case <-ctx.Done():
			return busy(http.StatusServiceUnavailable, 5, "The studio is busy checking other documents: send this again in a few seconds.")
		}
	}
}

// admitBigCall takes MaxBigCalls big model calls at once and refuses the
// next at once, before its body is read: its client (every SDK retries a
// 503) comes back after Retry-After. A call holds its place until it is
// taken (proxy.WithTaken): read, checked and recorded, not while its model
// answers; small calls are never held. When a big call has been taken,
// and again when it ends, the memory it took is given back (memReturn).
func (s *Server) admitBigCall(c echo.Context, next echo.HandlerFunc) error {
	select {
	case s.bigCalls <- struct{}{}:
	default:
		s.bigRefused.Add(1)
		return busy(http.StatusServiceUnavailable, 2, fmt.Sprintf(
			"The studio is taking %d large model calls (over %s) at once already, the most it takes at a time: send this again in a few seconds.",
			s.limits.MaxBigCalls, byteSize(BigCallBody)))
	}
	release := sync.OnceFunc(func() {
		<-s.bigCalls
		s.mem.giveBack()
	})
	defer release()
	defer s.mem.giveBack()
	r := c.Request()
	c.SetRequest(r.WithContext(proxy.WithTaken(r.Context(), release)))
	return next(c)
}

// memReturn gives the memory the heap no longer uses back to the system
// (debug.FreeOSMemory), one run at a time: asks that come while one runs
// are met by one more run after it. Go's own scavenger returns it over
// minutes; after a 30 MB call 400 MB were still held 10 s later.
type memReturn struct {
	mu   sync.Mutex    // held by the goroutine that runs
	want chan struct{} // one ask waiting
	runs atomic.Int64  // for tests
}

func newMemReturn() *memReturn { return &memReturn{want: make(chan struct{}, 1)} }

func (m *memReturn) giveBack() {
	select {
	case m.want <- struct{}{}:
	default: // one is waiting already: it covers this ask
	}
	if m.mu.TryLock() {
		go m.run()
	}
}

func (m *memReturn) run() {
	for {
		for len(m.want) > 0 {
			<-m.want
			debug.FreeOSMemory()
			m.runs.Add(1)
		}
		m.mu.Unlock()
		// An ask that came after the check above, while the lock was
		// still held, found it taken: it is run here.
		if len(m.want) == 0 || !m.mu.TryLock() {
			return
		}
	}
}

// busyError is a refusal for now: the client may come back after
// RetryAfter seconds.
type busyError struct {
	status     int
	retryAfter int
	msg        string
}

func (e *busyError) Error() string { return e.msg }

func busy(status, retryAfter int, msg string) error {
	return &busyError{status: status, retryAfter: retryAfter, msg: msg}
}

func setRetryAfter(c echo.Context, seconds int) {
	if c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", strconv.Itoa(seconds))
	}
}
