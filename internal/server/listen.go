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
	// DefaultMaxConnections is how many connections are open at once.
	DefaultMaxConnections = 512
)

// NewHTTPServer is the http.Server the studio serves h with.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// LimitListener accepts at most max connections at once. One past the
// limit is answered at once with 503 and Retry-After, and closed, rather
// than left waiting in the kernel's queue where a client cannot tell a
// busy studio from a dead one.
func LimitListener(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		max = DefaultMaxConnections
	}
	return &limitListener{Listener: ln, max: int64(max)}
}

type limitListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			go refuseConn(c, l.max)
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// refuseConn answers a connection past the limit and closes it.
func refuseConn(c net.Conn, max int64) {
	defer c.Close()
	body := fmt.Sprintf("The studio has too many connections open (the most is %d): try again in a few seconds.\n", max)
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Connection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
