package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/db"
)

// studioWith starts a studio with a config of the test's own (DB is set).
func studioWith(t *testing.T, cfg Config) *studio {
	t.Helper()
	s := startStudioWith(t, cfg)
	s.t = t
	return s
}

// raw sends a request with the headers given, without the studio's cookies.
func (s *studio) raw(method, path string, header map[string]string, body string) (*http.Response, string) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.ts.URL+path, strings.NewReader(body))
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

func (s *studio) sessionCount() int {
	s.t.Helper()
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil {
		s.t.Fatal(err)
	}
	return len(list)
}

// Finding 1 of issue 21: the default studio never checked the Host header,
// so a page on a name rebound to 127.0.0.1 was same-origin with it.
func TestDNSRebindingIsRefused(t *testing.T) {
	s := studioWith(t, Config{Addr: "127.0.0.1:7788", AllowedHosts: []string{"studio.example.lan"}})
	port := s.ts.Listener.Addr().(*net.TCPAddr).Port
	attacker := fmt.Sprintf("attacker.example:%d", port)
	scenario := `{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}}`

	t.Run("a request for another name gets 421 and does nothing", func(t *testing.T) {
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/", ""}, {"GET", "/api/sessions", ""}, {"POST", "/api/sessions", scenario}, {"GET", "/static/app.js", ""},
		} {
			res, body := s.raw(c.method, c.path, map[string]string{"Host": attacker, "Origin": "http://" + attacker,
				"Content-Type": "application/json"}, c.body)
			if res.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body, "--allowed-host attacker.example") {
				t.Fatalf("%s %s: %d %s", c.method, c.path, res.StatusCode, body)
			}
		}
		if n := s.sessionCount(); n != 0 {
			t.Fatalf("%d sessions were started", n)
		}
	})
	t.Run("the websocket too", func(t *testing.T) {
		res, _ := s.raw("GET", "/api/sessions/x/live", map[string]string{"Host": attacker, "Origin": "http://" + attacker,
			"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, "")
		if res.StatusCode != http.StatusMisdirectedRequest {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
	t.Run("loopback names, the listen address and allowed names are answered", func(t *testing.T) {
		for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), fmt.Sprintf("[::1]:%d", port),
			"LOCALHOST.", "studio.example.lan:8080", "127.0.0.1:7788"} {
			if res, body := s.raw("GET", "/api/sessions", map[string]string{"Host": host}, ""); res.StatusCode != 200 {
				t.Errorf("Host %s: %d %s", host, res.StatusCode, body)
			}
		}
		if s.srv.hosts.allows("") {
			t.Error("an empty Host is allowed")
		}
		for _, host := range []string{"192.168.1.5:7788", "127.0.0.1.attacker.example", "localhost.attacker.example"} {
			if res, _ := s.raw("GET", "/api/sessions", map[string]string{"Host": host}, ""); res.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("Host %q: %d, want 421", host, res.StatusCode)
			}
		}
	})
	t.Run("a state change from a page of another origin gets 403", func(t *testing.T) {
		own := fmt.Sprintf("127.0.0.1:%d", port)
		for _, h := range []map[string]string{
			{"Origin": "http://127.0.0.1:9999"},   // another port of the same host
			{"Origin": "null"},                    // a sandboxed frame, a file
			{"Origin": "http://attacker.example"}, // another site
			{"Sec-Fetch-Site": "same-site"},       // the browser says so
			{"Origin": "http://" + own, "Sec-Fetch-Site": "cross-site"},
		} {
			h["Host"], h["Content-Type"] = own, "application/json"
			if res, body := s.raw("POST", "/api/sessions", h, scenario); res.StatusCode != http.StatusForbidden {
				t.Errorf("%v: %d %s", h, res.StatusCode, body)
			}
		}
		if n := s.sessionCount(); n != 0 {
			t.Fatalf("%d sessions were started", n)
		}
		// Its own pages, another of its names on its port, and scripts pass.
		for _, h := range []map[string]string{{"Origin": "http://" + own}, {"Origin": fmt.Sprintf("http://localhost:%d", port)}, {}} {
			h["Host"], h["Content-Type"] = own, "application/json"
			if res, body := s.raw("POST", "/api/sessions", h, scenario); res.StatusCode != http.StatusCreated {
				t.Errorf("%v: %d %s", h, res.StatusCode, body)
			}
		}
	})
	t.Run("listening on every address, an IP address is its own origin", func(t *testing.T) {
		p := newHostPolicy("0.0.0.0:7788", nil)
		if !p.allows("192.168.1.5:7788") || !p.allows("[fe80::1]:7788") || p.allows("studio.lan:7788") {
			t.Fatal("policy for 0.0.0.0 wrong")
		}
	})
}

// Finding 9 of issue 21: the CSRF token was taken from the query string,
// and its cookie was bound to nothing: a page on another port of the host
// could plant one and post a form with it.
func TestCSRFTokenIsBoundAndPosted(t *testing.T) {
	s := newStudio(t, "")
	scenario := `{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}}`
	post := func(query string, cookie string, form url.Values) int {
		req, _ := http.NewRequest("POST", s.ts.URL+"/sessions"+query, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	t.Run("a planted cookie and its value as the token", func(t *testing.T) {
		if got := post("", csrfCookie+"=AAAAAAAAAAAAAAAAAAAAAA", url.Values{"_csrf": {"AAAAAAAAAAAAAAAAAAAAAA"}, "scenario": {scenario}}); got != http.StatusForbidden {
			t.Fatalf("status %d, want 403", got)
		}
	})
	t.Run("the right token in the query string", func(t *testing.T) {
		_, doc := s.get("/")
		token, _ := doc.Find(`input[name="_csrf"]`).First().Attr("value")
		u, _ := url.Parse(s.ts.URL)
		var cookie string
		for _, c := range s.c.Jar.Cookies(u) {
			if c.Name == csrfCookie {
				cookie = c.Name + "=" + c.Value
			}
		}
		if got := post("?_csrf="+url.QueryEscape(token), cookie, url.Values{"scenario": {scenario}}); got != http.StatusForbidden {
			t.Fatalf("status %d, want 403", got)
		}
		if got := post("", cookie, url.Values{"_csrf": {token}, "scenario": {scenario}}); got != http.StatusSeeOther {
			t.Fatalf("in the body: status %d, want 303", got)
		}
	})
	t.Run("a form field that is not UTF-8 says so", func(t *testing.T) {
		res, doc := s.form("/", "/sessions", url.Values{"scenario": {"{\"name\": \"caf\xe9\"}"}})
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(doc.Text(), `field "scenario" is not valid UTF-8`) {
			t.Fatalf("status %d: %s", res.StatusCode, doc.Find("main").Text())
		}
	})
	t.Run("a form of too many fields says so", func(t *testing.T) {
		v := url.Values{}
		for i := range 12000 {
			v.Set(fmt.Sprintf("f%d", i), "x")
		}
		res, doc := s.form("/", "/sessions", v)
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(doc.Text(), "too many fields") || strings.Contains(doc.Text(), "expired") {
			t.Fatalf("status %d: %s", res.StatusCode, doc.Find("main").Text())
		}
	})
}

// Finding 9 of issue 21: short tokens were accepted, guesses were not
// limited (1,453/s), and the sign-in cookie held the token itself.
func TestAccessToken(t *testing.T) {
	const token = "0b8c2f5e9a7d4c1b6e3f"
	s := studioWith(t, Config{Token: token})
	t.Run("the sign-in cookie is a signed session, not the token", func(t *testing.T) {
		res, _ := s.form("/sign-in", "/sign-in", url.Values{"token": {token}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: %d", res.StatusCode)
		}
		u, _ := url.Parse(s.ts.URL)
		var session string
		for _, c := range s.c.Jar.Cookies(u) {
			if strings.Contains(c.Value, token) {
				t.Fatalf("cookie %s holds the token", c.Name)
			}
			if c.Name == sessionCookie {
				session = c.Value
			}
		}
		if session == "" {
			t.Fatal("no sign-in cookie")
		}
		if res, _ := s.get("/"); res.StatusCode != 200 {
			t.Fatalf("signed in: %d", res.StatusCode)
		}
		// A cookie changed by one character, or signed for another token, is refused.
		forged := session[:len(session)-1] + string("AB"[(strings.IndexByte("AB", session[len(session)-1])+1)&1])
		if s.srv.auth.validSession(forged) || newAuth("another-token-of-twenty", time.Now).validSession(session) {
			t.Fatal("a forged sign-in cookie was taken")
		}
		if res, _ := s.raw("GET", "/api/sessions", map[string]string{"Cookie": sessionCookie + "=" + forged}, ""); res.StatusCode != 401 {
			t.Fatalf("forged cookie: %d", res.StatusCode)
		}
	})
	// Issue 28: the limit was checked before the token, so behind a
	// reverse proxy (one address for every client) ten wrong tokens
	// locked out every client with the right one.
	t.Run("wrong tokens are limited; the right one always passes from the same address", func(t *testing.T) {
		bearer := func(tok string) *http.Response {
			res, _ := s.raw("GET", "/api/sessions", map[string]string{"Authorization": "Bearer " + tok}, "")
			return res
		}
		for i := range clientFailBurst {
			if res := bearer(fmt.Sprintf("guess-%d", i)); res.StatusCode != 401 {
				t.Fatalf("guess %d: %d", i, res.StatusCode)
			}
		}
		res := bearer("one-guess-too-many")
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d, Retry-After %q", res.StatusCode, res.Header.Get("Retry-After"))
		}
		if res, _ := s.raw("POST", "/v1/chat/completions", map[string]string{studioTokenHeader: "a-wrong-one",
			"Content-Type": "application/json"}, "{}"); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a wrong X-Studio-Token while blocked: %d", res.StatusCode)
		}
		if res, _ := s.form("/sign-in", "/sign-in", url.Values{"token": {"sign-in guess"}}); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a wrong sign-in while blocked: %d", res.StatusCode)
		}
		// The same address, the right token: through, however many
		// wrong ones came before, and they keep coming.
		for range 3 {
			if res := bearer(token); res.StatusCode != http.StatusOK {
				t.Fatalf("the right bearer token after wrong ones: %d", res.StatusCode)
			}
			if res, _ := s.raw("POST", "/v1/chat/completions", map[string]string{studioTokenHeader: token,
				"Content-Type": "application/json"}, "{}"); res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusUnauthorized {
				t.Fatalf("the right X-Studio-Token after wrong ones: %d", res.StatusCode)
			}
			if res := bearer("still-guessing"); res.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("a wrong token: %d", res.StatusCode)
			}
		}
		if res, _ := s.form("/sign-in", "/sign-in", url.Values{"token": {token}}); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("signing in with the right token after wrong ones: %d", res.StatusCode)
		}
	})
	t.Run("weak tokens are refused", func(t *testing.T) {
		for _, weak := range []string{"t", " ", "                    ", "aaaaaaaaaaaaaaaaaaaaaaaa", "abcdabcdabcdabcdabcd",
			"1234567890123456", " 0b8c2f5e9a7d4c1b6e3f"} {
			if err := CheckToken(weak); err == nil {
				t.Errorf("%q was accepted", weak)
			}
		}
		for _, good := range []string{token, "correct horse battery staple", "Zq8#mW2!vL5@xR9$"} {
			if err := CheckToken(good); err != nil {
				t.Errorf("%q: %v", good, err)
			}
		}
	})
}

// Finding 3 of issue 21: bodies were limited only to 65 MiB, whatever the
// endpoint took.
func TestBodiesAreSizedToTheirEndpoint(t *testing.T) {
	s := newStudio(t, "")
	big := strings.Repeat(" ", MaxScenarioBody+1)
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(big))
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "a scenario or a team may have 4 MiB") {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	res, body = s.api("POST", "/sign-in", "application/x-www-form-urlencoded", []byte("token="+strings.Repeat("x", MaxFormBody)))
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("sign-in: status %d: %s", res.StatusCode, body)
	}
}

// Finding 8 of issue 21: no cap on connections, viewers or running
// sessions, and no clear answer when busy.
func TestPushback(t *testing.T) {
	t.Run("live viewers: per session 429, in all 503, with Retry-After", func(t *testing.T) {
		s := studioWith(t, Config{Limits: Limits{MaxViewers: 3, MaxSessionViewers: 2}})
		slow := `{"name": "slow", "prompt": "p", "script": {"main": [{"content": "a", "delay_ms": 60000}]}}`
		_, b1 := s.api("POST", "/api/sessions", "application/json", []byte(slow))
		_, b2 := s.api("POST", "/api/sessions", "application/json", []byte(slow))
		id1, id2 := jsonID(t, b1), jsonID(t, b2)
		ws := "ws" + strings.TrimPrefix(s.ts.URL, "http") + "/api/sessions/"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		dial := func(id string) (*websocket.Conn, *http.Response, error) {
			return websocket.Dial(ctx, ws+id+"/live", nil)
		}
		for range 2 {
			c, _, err := dial(id1)
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
		}
		_, res, err := dial(id1)
		if err == nil || res == nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("a third viewer of one session: %v %+v", err, res)
		}
		c, _, err := dial(id2)
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseNow()
		if _, res, err := dial(id2); err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("a fourth viewer in all: %v %+v", err, res)
		}
	})
	t.Run("running sessions: 503 with Retry-After", func(t *testing.T) {
		s := studioWith(t, Config{Limits: Limits{MaxRunning: 1}})
		slow := `{"name": "slow", "prompt": "p", "script": {"main": [{"content": "a", "delay_ms": 60000}]}}`
		if res, body := s.api("POST", "/api/sessions", "application/json", []byte(slow)); res.StatusCode != 201 {
			t.Fatalf("first: %d %s", res.StatusCode, body)
		}
		res, body := s.api("POST", "/api/sessions", "application/json", []byte(slow))
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "the most this studio runs at once") {
			t.Fatalf("second: %d %s", res.StatusCode, body)
		}
	})
	t.Run("connections: past the cap, 503 at once", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var served atomic.Int64
		srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
		go srv.Serve(LimitListener(ln, 2, 2))
		defer srv.Close()
		var held []net.Conn
		for range 2 {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			held = append(held, c)
		}
		// The two held connections send nothing; the third is refused.
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
			t.Fatalf("third connection: %v %+v", err, res)
		}
		// One held connection closes: the next is served.
		held[0].Close()
		deadline := time.Now().Add(10 * time.Second)
		for served.Load() == 0 && time.Now().Before(deadline) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
		if served.Load() == 0 {
			t.Fatal("no request was served after a connection closed")
		}
	})
	t.Run("connections: one client past its own cap gets 429, another client is served", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := NewHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "home") }))
		go srv.Serve(LimitListener(ln, 10, 3))
		defer srv.Close()
		dial := func(from string) net.Conn {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			c, err := d.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			return c
		}
		// 127.0.0.1 holds three connections that send nothing (headers
		// trickling, or kept alive): its fourth is refused at once.
		for range 3 {
			dial("127.0.0.1")
		}
		res, err := http.ReadResponse(bufio.NewReader(dial("127.0.0.1")), nil)
		if err != nil || res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("a client's fourth connection: %v %+v", err, res)
		}
		// Another client gets the home page.
		c := dial("127.0.0.2")
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		res, err = http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("another client beside a client at its cap: %v %+v", err, res)
		}
	})
	t.Run("the server has read, write and idle timeouts", func(t *testing.T) {
		srv := NewHTTPServer(http.NotFoundHandler())
		if srv.ReadHeaderTimeout == 0 || srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 {
			t.Fatalf("timeouts %v %v %v %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
		}
	})
}

func jsonID(t *testing.T, body []byte) string {
	t.Helper()
	i := strings.Index(string(body), `"id":"`)
	if i < 0 {
		t.Fatalf("no id in %s", body)
	}
	rest := string(body[i+6:])
	return rest[:strings.IndexByte(rest, '"')]
}

// Finding 9 of issue 21: a damaged database showed "Internal error".
func TestDamagedDatabaseSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	{
		s := studioAt(t, path)
		for range 3 {
			s.api("POST", "/api/sessions", "application/json", []byte(`{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}}`))
		}
		s.srv.Shutdown(context.Background())
		s.ts.Close()
		s.db.Close()
	}
	// Opened, then damaged: garbage over every page but the first, which
	// holds the schema; the tables no longer read.
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", int(st.Size()-4096)/4)), 4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s := studioOn(t, d)
	res, body := s.api("GET", "/api/sessions", "", nil)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "is damaged") || res.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
}

// studioAt starts a studio on the database file at path.
func studioAt(t *testing.T, path string) *studio {
	t.Helper()
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return studioOn(t, d)
}

func studioOn(t *testing.T, d *db.DB) *studio {
	srv := New(Config{DB: d})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Shutdown(context.Background()); ts.Close(); d.Close() })
	return &studio{t: t, srv: srv, ts: ts, db: d, c: http.DefaultClient}
}

// The team editor names the studio's endpoints; a team that gives a URL of
// its own cannot run here, and says so at the field.
func TestTeamsNameEndpoints(t *testing.T) {
	var seen string
	endpoint := fakeEndpoint(t, &seen)
	s := studioWith(t, Config{Endpoints: []Endpoint{{Name: "local", BaseURL: endpoint.URL + "/v1", Model: "m"}}})
	importTeam := func(doc string) string {
		res, _ := s.form("/teams", "/teams/import", url.Values{"team": {doc}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("import: %d", res.StatusCode)
		}
		return res.Header.Get("Location")
	}
	loc := importTeam(`{"name": "named", "prompt": "go", "model": {"endpoint": "local"},
		"subagents": [{"name": "s", "description": "d", "endpoint": "elsewhere"}]}`)
	_, page := s.get(loc)
	if got := page.Find(`select[name="model.endpoint"] option[selected]`).AttrOr("value", ""); got != "local" {
		t.Fatalf("model.endpoint shows %q", got)
	}
	if got := page.Find(`select[name="subagents[0].endpoint"] option[selected]`).Text(); got != "elsewhere (not an endpoint of this studio)" {
		t.Fatalf("the subagent's endpoint shows %q", got)
	}
	res, doc := s.form(loc, loc+"/run", url.Values{})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(doc.Find(`[data-field="subagents[0].endpoint"]`).Text(), `no endpoint "elsewhere"`) {
		t.Fatalf("run: %d %s", res.StatusCode, doc.Find("main").Text())
	}
	loc = importTeam(`{"name": "by-url", "prompt": "go", "model": {"provider": "openai", "model": "m", "base_url": "http://attacker.example/v1"}}`)
	res, doc = s.form(loc, loc+"/run", url.Values{})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(doc.Find(`[data-field="model.base_url"]`).Text(), "only to the endpoints it was started with (local)") {
		t.Fatalf("run: %d %s", res.StatusCode, doc.Find("main").Text())
	}
	loc = importTeam(`{"name": "ok", "prompt": "say hello", "model": {"endpoint": "local"}}`)
	res, _ = s.form(loc, loc+"/run", url.Values{})
	s.waitDone(sessionID(t, res))
	if seen != "" {
		t.Fatalf("the endpoint got a key %q it was not given", seen)
	}
}
