package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// Request bodies are paced, and a client sends only a few at once. A body
// that trickles holds its connection: with ReadTimeout alone, one client
// with a few hundred sockets sending a byte every few seconds held every
// connection the studio takes for two minutes, and the home page answered
// 503 to everyone. So a body's bytes must come at MinBodyRate on average
// once its first BodyGrace has passed, or the studio stops reading and
// closes the connection; one client address has at most MaxClientBodies
// bodies being read at once, the next refused at once; and a refusal of a
// request whose body was not read closes its connection rather than read
// the rest (Go's server reads up to 256 KiB of an unread body to keep the
// connection).
const (
	DefaultBodyGrace       = 10 * time.Second
	DefaultMinBodyRate     = 16 << 10 // bytes per second
	DefaultMaxClientBodies = 16
)

// bodyGuard counts the bodies being read, per client address.
type bodyGuard struct {
	grace time.Duration
	rate  int64
	max   int

	mu      sync.Mutex
	reading map[string]int

	refused, cut atomic.Int64 // for /metrics
}

func newBodyGuard(l Limits) *bodyGuard {
	return &bodyGuard{grace: l.BodyGrace, rate: int64(l.MinBodyRate), max: l.MaxClientBodies, reading: map[string]int{}}
}

func (g *bodyGuard) take(client string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reading[client] >= g.max {
		return false
	}
	g.reading[client]++
	return true
}

func (g *bodyGuard) give(client string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reading[client]--; g.reading[client] <= 0 {
		delete(g.reading, client)
	}
}

// readingNow is how many bodies are being read, from every client.
func (g *bodyGuard) readingNow() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.reading {
		n += v
	}
	return n
}

// guardBodies paces the request's body and counts it against its client
// until it is read whole (or the request ends). It runs before the token
// check: a client without the token holds sockets as well as one with it.
func (s *Server) guardBodies(next echo.HandlerFunc) echo.HandlerFunc {
	g := s.bodies
	return func(c echo.Context) error {
		r := c.Request()
		if r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		client := clientOf(r)
		if !g.take(client) {
			g.refused.Add(1)
			return busy(http.StatusServiceUnavailable, 5, fmt.Sprintf(
				"This address is sending %d request bodies at once already, the most the studio reads from one client: send this again when they are done.", g.max))
		}
		start := time.Now()
		b := &pacedBody{ReadCloser: r.Body, g: g, start: start, rc: http.NewResponseController(c.Response())}
		b.release = sync.OnceFunc(func() { g.give(client) })
		defer b.release()
		if err := b.rc.SetReadDeadline(start.Add(g.grace)); err != nil {
			b.rc = nil // not a real connection (a test's recorder): only counted
		}
		orig := r.Body
		r.Body = b
		c.Set(pacedKey, b)
		// Go's server looks at the request's own body type when it answers
		// and closes (how much is left, whether to linger): it gets it back.
		defer func() { r.Body = orig }()
		return next(c)
	}
}

const pacedKey = "studio.pacedBody"

// refusedDrain is how long the rest of a refused body is read: a client
// that has sent it all is drained at once and reads its answer (a close
// with unread bytes would reset the connection under it); a trickling one
// holds the connection no longer.
const refusedDrain = time.Second

// closeAfter has the connection closed after a refusal, rather than the
// rest of an unread body read to keep it: Go's server reads up to 256 KiB
// of it, before the answer unless the answer says Connection: close, and
// again when it closes the body, as long as the read deadline lets it.
func closeAfter(c echo.Context) {
	if c.Request().Body == http.NoBody {
		return
	}
	if b, _ := c.Get(pacedKey).(*pacedBody); b != nil && b.done.Load() {
		return // read whole: the connection can serve the next request
	}
	c.Response().Header().Set("Connection", "close")
	_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(refusedDrain))
}

// pacedBody moves the connection's read deadline on as its bytes come:
// BodyGrace from the start, and one second more per MinBodyRate bytes read,
// never past ReadTimeout.
type pacedBody struct {
	io.ReadCloser
	g       *bodyGuard
	rc      *http.ResponseController
	start   time.Time
	read    int64
	done    atomic.Bool
	release func()
}

func (b *pacedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	switch {
	case err == io.EOF:
		b.finish(true)
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.g.cut.Add(1)
		b.finish(false)
		return n, fmt.Errorf("the request body came at %d bytes in %s, slower than the %d KiB/s the studio waits for: send it from a faster connection",
			b.read, time.Since(b.start).Round(time.Second), b.g.rate>>10)
	case err != nil:
		b.finish(false)
	case n > 0 && b.rc != nil:
		_ = b.rc.SetReadDeadline(b.deadline())
	}
	return n, err
}

func (b *pacedBody) deadline() time.Time {
	d := b.start.Add(b.g.grace + time.Duration(b.read*int64(time.Second)/b.g.rate))
	return minTime(d, b.start.Add(ReadTimeout))
}

// finish gives the client's turn back and, when the body was read whole,
// the connection its whole request's deadline. A body cut short keeps the
// deadline that cut it, so the server reads no more of it either.
func (b *pacedBody) finish(whole bool) {
	if b.done.Swap(true) {
		return
	}
	b.release()
	if whole && b.rc != nil {
		_ = b.rc.SetReadDeadline(b.start.Add(ReadTimeout))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
