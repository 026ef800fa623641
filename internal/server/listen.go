package server

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Timeouts of the HTTP server. A request must send its headers within
// ReadHeaderTimeout and its body within ReadTimeout (a 64 MiB trace at
// about 0.5 MB/s); an answer must be written within WriteTimeout; a kept-
// alive connection idles at most IdleTimeout. The live websockets lift the
// read and write deadlines: they run as long as the session is watched,
// with pings and a deadline per message of their own.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 2 * time.Minute
	WriteTimeout      = 2 * time.Minute
	IdleTimeout       = 2 * time.Minute
	// DefaultMaxConnections is how many connections are open at once, and
	// DefaultMaxClientConnections how many of them one client address
	// holds: a quarter, so that one client's sockets (kept alive, or
	// trickling their headers) leave the rest room for the home page.
	DefaultMaxConnections       = 512
	DefaultMaxClientConnections = 128
)

// NewHTTPServer is the http.Server the studio serves h with.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// LimitListener accepts at most max connections at once, and at most
// perClient from one client address (the connection's peer: behind a
// reverse proxy, every client is the proxy's address, so there perClient
// is raised to max and the proxy limits its clients). One past a limit is
// answered at once — 503 past max, 429 past perClient, with Retry-After —
// and closed, rather than left waiting in the kernel's queue where a
// client cannot tell a busy studio from a dead one.
func LimitListener(ln net.Listener, max, perClient int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConnections
	}
	if perClient <= 0 {
		perClient = DefaultMaxClientConnections
	}
	return &limitListener{Listener: ln, max: int64(max), perClient: perClient, clients: map[string]int{}}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64

	perClient int
	mu        sync.Mutex
	clients   map[string]int // open connections by peer address
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			go refuseConn(c, http.StatusServiceUnavailable, fmt.Sprintf(
				"The studio has too many connections open (the most is %d): try again in a few seconds.\n", l.max))
			continue
		}
		client := peerOf(c)
		if !l.take(client) {
			l.open.Add(-1)
			go refuseConn(c, http.StatusTooManyRequests, fmt.Sprintf(
				"This address has %d connections open to the studio already, the most one client holds: close some, or try again in a few seconds.\n", l.perClient))
			continue
		}
		return &countedConn{Conn: c, l: l, client: client}, nil
	}
}

func (l *limitListener) take(client string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client] >= l.perClient {
		return false
	}
	l.clients[client]++
	return true
}

func (l *limitListener) give(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients[client]--; l.clients[client] <= 0 {
		delete(l.clients, client)
	}
}

// peerOf is a connection's client address, as clientOf reads a request's.
func peerOf(c net.Conn) string { return hostOf(c.RemoteAddr().String()) }

// refuseConn answers a connection past the limit and closes it.
func refuseConn(c net.Conn, status int, body string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nRetry-After: 5\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
}

type countedConn struct {
	net.Conn
	l      *limitListener
	client string
	once   sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.give(c.client)
	})
	return c.Conn.Close()
}
