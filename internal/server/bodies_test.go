package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
)

// servedStudio is a studio served as `studio serve` serves it: its
// http.Server (timeouts) behind its connection cap.
func servedStudio(t *testing.T, cfg Config, maxConns int) *studio {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = d
	srv := New(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	ts.Listener = LimitListener(ln, maxConns, maxConns)
	ts.Config = NewHTTPServer(srv.Handler())
	ts.Start()
	jar, _ := cookiejar.New(nil)
	s := &studio{t: t, srv: srv, ts: ts, db: d,
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		ts.CloseClientConnections()
		srv.Shutdown(context.Background())
		ts.Close()
		d.Close()
	})
	return s
}

// dialFrom opens a TCP connection to the studio from a loopback address
// of the test's choosing (127.0.0.2 is another client than 127.0.0.1).
func dialFrom(t *testing.T, s *studio, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", s.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// startBody sends a request's headers, declaring a body of size bytes, and
// the first bytes of it.
func startBody(t *testing.T, c net.Conn, path string, size int, header string) {
	t.Helper()
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n{", path, size, header); err != nil {
		t.Fatal(err)
	}
}

// homePage is GET / from a client at address from: its status, or 0 when
// the connection was closed without one.
func homePage(t *testing.T, s *studio, from string) int {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(s.ts.URL + "/")
	if err != nil {
		t.Logf("home page from %s: %v", from, err)
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode
}

// Issue 28: 530 sockets from one client, each sending a body a byte at a
// time, held every connection the studio takes, and the home page answered
// 503 to everyone. One client now has 16 bodies read at once; the next are
// refused at once and their connections closed.
func TestSlowBodiesFromOneClientLeaveTheHomePage(t *testing.T) {
	// The grace is long here: this is about how many bodies are held, not
	// how long (TestSlowBodyIsCut).
	s := servedStudio(t, Config{Limits: Limits{BodyGrace: 5 * time.Minute}, Logger: slog.New(slog.DiscardHandler)}, DefaultMaxConnections)
	const sockets = DefaultMaxConnections + 18
	answers := make(chan int, sockets)
	for range sockets {
		c := dialFrom(t, s, "127.0.0.2")
		startBody(t, c, "/api/sessions", 200<<10, "")
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers <- 0
				return
			}
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable && (res.Header.Get("Retry-After") == "" || !res.Close) {
				t.Errorf("a refused body's answer has Retry-After %q and Connection %q: want a delay and close",
					res.Header.Get("Retry-After"), res.Header.Get("Connection"))
			}
			answers <- res.StatusCode
		}()
	}
	// Every socket but the client's 16 is answered 503 at once.
	for range sockets - DefaultMaxClientBodies {
		if code := <-answers; code != http.StatusServiceUnavailable {
			t.Fatalf("a body past the client's 16 was answered %d; want 503 at once", code)
		}
	}
	// The home page is answered, to another client and to this one, while
	// the 16 are still held: at once but for the second or so a refused
	// connection is drained and closed (refusedDrain, and Go's
	// rstAvoidanceDelay), where before the
	// sockets held every connection for ReadTimeout, two minutes.
	for _, from := range []string{"127.0.0.1", "127.0.0.2"} {
		deadline := time.Now().Add(30 * time.Second)
		code := homePage(t, s, from)
		for code != http.StatusOK && time.Now().Before(deadline) {
			code = homePage(t, s, from)
		}
		if code != http.StatusOK {
			t.Fatalf("home page from %s while 127.0.0.2 holds %d slow bodies: %d", from, sockets, code)
		}
	}
	// Most were refused by the body cap; a few may have met the connection
	// cap while refused connections were closing: 503 too.
	m := s.scrape()
	if m["studio_request_bodies_reading"] != DefaultMaxClientBodies || m["studio_request_bodies_refused_total"] < sockets/2 {
		t.Fatalf("reading %v, refused %v; want %d and most of %d", m["studio_request_bodies_reading"], m["studio_request_bodies_refused_total"],
			DefaultMaxClientBodies, sockets-DefaultMaxClientBodies)
	}
	select {
	case code := <-answers:
		t.Fatalf("one of the 16 bodies being read was answered %d before it was sent", code)
	default:
	}
}

// A body that trickles is cut once its grace has passed, with a reason; one
// of the same size sent at once is read.
func TestSlowBodyIsCut(t *testing.T) {
	s := servedStudio(t, Config{Limits: Limits{BodyGrace: 300 * time.Millisecond, MinBodyRate: 1 << 10}}, 0)
	const size = 10000
	c := dialFrom(t, s, "127.0.0.1")
	startBody(t, c, "/api/sessions", size, "")
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 20 ms: 50 bytes a second
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickling body: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "slower than the 1 KiB/s") {
		t.Fatalf("a trickling body: %d %s", res.StatusCode, b)
	}
	if _, err := br.Peek(1); err != io.EOF {
		t.Fatalf("the connection of a cut body is still open (%v)", err)
	}
	if m := s.scrape(); m["studio_request_bodies_cut_total"] != 1 || m["studio_request_bodies_reading"] != 0 {
		t.Fatalf("cut %v, reading %v; want 1 and 0", m["studio_request_bodies_cut_total"], m["studio_request_bodies_reading"])
	}

	// The same size at once: read whole (and refused as the scenario it
	// is not, not as slow).
	body := `{"name": "x"` + strings.Repeat(" ", size-len(`{"name": "x"}`)) + `}`
	res2, got := s.api("POST", "/api/sessions", "application/json", []byte(body))
	if res2.StatusCode != http.StatusBadRequest || strings.Contains(string(got), "slower") {
		t.Fatalf("a body sent at once: %d %s", res2.StatusCode, got)
	}
}

// A request refused before its body is read (no token, a bad form) has its
// connection closed at once: the server does not read the rest of the body
// first, which a slow client made last the whole ReadTimeout.
func TestRefusedBodyClosesTheConnection(t *testing.T) {
	s := servedStudio(t, Config{Token: "correct-horse-battery-staple-42"}, 0)
	for _, tc := range []struct{ path, header string }{
		{"/api/sessions", ""},                  // the API: 401
		{"/sessions", "Accept: text/html\r\n"}, // a page: to the sign-in page
		{"/api/sessions", "Authorization: Bearer wrong-token-wrong-token\r\n"},
	} {
		c := dialFrom(t, s, "127.0.0.1")
		startBody(t, c, tc.path, 200<<10, tc.header) // under the 256 KiB Go would read
		// Well under the grace: the close must come from the refusal.
		_ = c.SetReadDeadline(time.Now().Add(DefaultBodyGrace / 2))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s %q: no answer while the body is unsent: %v", tc.path, tc.header, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusSeeOther {
			t.Fatalf("%s %q: %d", tc.path, tc.header, res.StatusCode)
		}
		if _, err := br.Peek(1); err != io.EOF || !res.Close {
			t.Fatalf("%s %q: the refused request's connection stays open (%v, Connection %q)", tc.path, tc.header, err, res.Header.Get("Connection"))
		}
	}
}
