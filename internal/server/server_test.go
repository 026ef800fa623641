package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
)

type studio struct {
	t   *testing.T
	srv *Server
	ts  *httptest.Server
	c   *http.Client
	db  *db.DB
}

func newStudio(t *testing.T, token string) *studio {
	t.Helper()
	s := startStudio(t, token)
	s.t = t
	return s
}

// startStudio starts a studio for any test or fuzz target; its request
// helpers need the *testing.T that newStudio sets.
func startStudio(t testing.TB, token string) *studio {
	t.Helper()
	return startStudioWith(t, Config{Token: token})
}

// startStudioWith is startStudio with a config of the caller's (DB is set).
func startStudioWith(t testing.TB, cfg Config) *studio {
	t.Helper()
	return startStudioOn(t, filepath.Join(t.TempDir(), "studio.db"), cfg)
}

// startStudioOn is startStudioWith on the store --db would name: a file,
// or a PostgreSQL database that other studios share.
func startStudioOn(t testing.TB, dbPath string, cfg Config) *studio {
	t.Helper()
	d, err := db.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = d
	srv := New(cfg)
	ts := httptest.NewServer(srv.Handler())
	jar, _ := cookiejar.New(nil)
	st := &studio{srv: srv, ts: ts, db: d,
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		ts.Close()
		d.Close()
	})
	return st
}

func (s *studio) get(path string) (*http.Response, *goquery.Document) {
	s.t.Helper()
	res, err := s.c.Get(s.ts.URL + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	doc, err := goquery.NewDocumentFromReader(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return res, doc
}

// form posts a form with the CSRF token of the page it came from.
func (s *studio) form(page, action string, values url.Values) (*http.Response, *goquery.Document) {
	s.t.Helper()
	_, doc := s.get(page)
	token, _ := doc.Find(`input[name="_csrf"]`).First().Attr("value")
	if token == "" {
		s.t.Fatalf("no CSRF token on %s", page)
	}
	values.Set("_csrf", token)
	res, err := s.c.PostForm(s.ts.URL+action, values)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := goquery.NewDocumentFromReader(res.Body)
	return res, out
}

func (s *studio) api(method, path, contentType string, body []byte) (*http.Response, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.ts.URL+path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := s.c.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// waitDone waits until a session is no longer running.
func (s *studio) waitDone(id string) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		sess, err := s.db.Session(context.Background(), id)
		if err == nil && sess.Status != delegation.StatusRunning && !s.srv.Runner().Running(id) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("session %s did not finish", id)
}

func sessionID(t *testing.T, res *http.Response) string {
	t.Helper()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	loc := res.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, "/sessions/")
	if !ok {
		t.Fatalf("redirect to %q", loc)
	}
	return id
}

func TestSessionsPage(t *testing.T) {
	s := newStudio(t, "")
	res, doc := s.get("/")
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if n := doc.Find(`[data-testid="lessons"] li`).Length(); n < 3 {
		t.Fatalf("%d lessons listed", n)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("CSP = %q", csp)
	}
}

func TestStartALessonAndSeeIt(t *testing.T) {
	s := newStudio(t, "")
	res, _ := s.form("/", "/sessions", url.Values{"lesson": {"order-number"}})
	id := sessionID(t, res)
	s.waitDone(id)

	res, doc := s.get("/sessions/" + id)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	t.Run("the tree has the main agent and both children", func(t *testing.T) {
		for _, node := range []string{"node-main", "node-a1", "node-a2"} {
			if doc.Find(`[data-testid="`+node+`"]`).Length() != 1 {
				t.Errorf("no %s", node)
			}
		}
	})
	t.Run("the first delegation is shown side by side", func(t *testing.T) {
		parent := doc.Find(`[data-testid="parent-pane"]`)
		if parent.Find(".mark-call").Length() != 1 || parent.Find(".mark-receipt").Length() != 1 {
			t.Fatalf("parent pane marks: %d calls, %d receipts", parent.Find(".mark-call").Length(), parent.Find(".mark-receipt").Length())
		}
		child := doc.Find(`[data-testid="child-pane"]`)
		if child.Find(`[data-testid="isolated-note"]`).Length() != 1 || !strings.Contains(child.Text(), "Report the order number above.") {
			t.Fatalf("child pane: %s", child.Text())
		}
		if got := strings.TrimSpace(doc.Find(`[data-testid="receipt"]`).Text()); got != "I cannot see any order number." {
			t.Fatalf("receipt = %q", got)
		}
	})
	t.Run("the fork's pane marks what it inherited", func(t *testing.T) {
		_, doc := s.get("/sessions/" + id + "?agent=a2")
		child := doc.Find(`[data-testid="child-pane"]`)
		inh := child.Find(`[data-testid="inherited"]`)
		src, _ := inh.Attr("data-src")
		if child.Find(`[data-testid="fork-note"]`).Length() != 1 || !strings.Contains(inh.Find("summary").Text(), "Inherited from the parent: 7 messages") ||
			src != "/sessions/"+id+"/inherited?pane=child%3Aa2" || inh.Find("li").Length() != 0 {
			t.Fatalf("the fork's pane: fork note %d, inherited %q loading from %q with %d messages drawn; want its count, loaded when opened",
				child.Find(`[data-testid="fork-note"]`).Length(), inh.Find("summary").Text(), src, inh.Find("li").Length())
		}
		// Opened, it loads them: the parent's conversation, its prompt first.
		res, items := s.get(src)
		if res.StatusCode != 200 || items.Find("li").Length() != 7 || !strings.Contains(items.Find("li").First().Text(), "order number") {
			t.Fatalf("GET %s = %d: %q", src, res.StatusCode, items.Text())
		}
		if res, _ := s.get("/sessions/" + id + "/inherited?pane=child:a9"); res.StatusCode != 404 {
			t.Errorf("the inherited messages of a pane there is none of: %d; want 404", res.StatusCode)
		}
		if got := strings.TrimSpace(doc.Find(`[data-testid="receipt"]`).Text()); got != "A-7731" {
			t.Fatalf("receipt = %q", got)
		}
	})
	t.Run("the scrubber shows every agent at a step", func(t *testing.T) {
		_, doc := s.get("/sessions/" + id + "?step=1")
		rows := doc.Find(`[data-testid="scrub-table"] tbody tr`)
		if rows.Length() != 3 || !strings.Contains(rows.Eq(1).Text(), "not started yet") {
			t.Fatalf("scrub rows: %s", rows.Text())
		}
		res, _ := s.get("/sessions/" + id + "/scrub?step=3")
		if res.StatusCode != 200 {
			t.Fatalf("scrub fragment: %d", res.StatusCode)
		}
	})
	t.Run("a message page shows the whole message", func(t *testing.T) {
		res, doc := s.get("/sessions/" + id + "/messages/main.0")
		if res.StatusCode != 200 || !strings.Contains(doc.Find(`[data-testid="full"]`).Text(), "A-7731") {
			t.Fatalf("status %d: %s", res.StatusCode, doc.Text())
		}
	})
	t.Run("the timeline lists every model call", func(t *testing.T) {
		// The parent's five turns (three steps, the two task calls, its
		// answer) and one turn of each reporter.
		if n := doc.Find(`#timeline .bar-model`).Length(); n != 7 {
			t.Fatalf("%d model calls' bars, want 7", n)
		}
		// A lane per agent, each bar a link to its call.
		if n := doc.Find(`#timeline li.lane`).Length(); n != 3 {
			t.Fatalf("%d lanes, want main and its two children", n)
		}
		doc.Find(`#timeline a.bar-model`).Each(func(_ int, a *goquery.Selection) {
			if href, _ := a.Attr("href"); !strings.HasPrefix(href, "/sessions/") || !strings.Contains(href, "/calls/") {
				t.Errorf("a bar links to %q, not its call", href)
			}
		})
	})
}

func TestBadScenarioKeepsWhatWasTyped(t *testing.T) {
	s := newStudio(t, "")
	typed := `{"name": "x", "prompt": "y", "subagents": [{"name": "a", "description": "d", "mode": "shared"}], "script": {"main": [{"content": "ok"}]}}`
	res, doc := s.form("/", "/sessions", url.Values{"scenario": {typed}})
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got := doc.Find(`textarea[name="scenario"]`).Text(); got != typed {
		t.Fatalf("textarea = %q", got)
	}
	errs := doc.Find(`[data-testid="errors"]`).Text()
	if !strings.Contains(errs, "subagents[0].mode") || !strings.Contains(errs, "SubAgent 'a' has invalid mode 'shared'; expected 'isolated' or 'fork'") {
		t.Fatalf("errors = %q", errs)
	}
	if list, _ := s.db.Sessions(context.Background(), 0); len(list) != 0 {
		t.Fatal("a bad scenario started a session")
	}
}

func TestCSRF(t *testing.T) {
	s := newStudio(t, "")
	res, err := s.c.PostForm(s.ts.URL+"/sessions", url.Values{"lesson": {"order-number"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a form without its CSRF token got %d, want 403", res.StatusCode)
	}
}

func TestAPI(t *testing.T) {
	s := newStudio(t, "")
	doc := []byte(`{"name": "api", "prompt": "p", "script": {"main": [{"content": "done"}]}}`)
	res, body := s.api("POST", "/api/sessions", "application/json", doc)
	var created struct{ ID, URL string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil || created.URL != "/sessions/"+created.ID {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)

	t.Run("a bad scenario gets every error", func(t *testing.T) {
		res, body := s.api("POST", "/api/sessions", "application/json", []byte(`{"name": "x"}`))
		var e apiError
		if res.StatusCode != 400 || json.Unmarshal(body, &e) != nil || len(e.Errors) == 0 || e.Errors[0].Field == "" {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
	})
	t.Run("a body that is not JSON is refused", func(t *testing.T) {
		if res, _ := s.api("POST", "/api/sessions", "text/plain", doc); res.StatusCode != http.StatusUnsupportedMediaType {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
	t.Run("sessions, trace and OTLP", func(t *testing.T) {
		res, body := s.api("GET", "/api/sessions", "", nil)
		if res.StatusCode != 200 || !strings.Contains(string(body), created.ID) {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		res, trace := s.api("GET", "/api/sessions/"+created.ID+"/trace", "", nil)
		if res.StatusCode != 200 || !strings.HasPrefix(string(trace), `{"format":"delegation-studio.trace"`) {
			t.Fatalf("trace %d", res.StatusCode)
		}
		res, pretty := s.api("GET", "/api/sessions/"+created.ID+"/trace?pretty=1", "", nil)
		var a, b any
		if res.StatusCode != 200 || !strings.HasPrefix(string(pretty), "{\n  \"format\": \"delegation-studio.trace\"") ||
			json.Unmarshal(trace, &a) != nil || json.Unmarshal(pretty, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Fatalf("pretty trace %d", res.StatusCode)
		}
		res, body = s.api("GET", "/api/sessions/"+created.ID+"/otlp", "", nil)
		if res.StatusCode != 200 || !strings.Contains(string(body), `"resourceSpans"`) {
			t.Fatalf("otlp %d", res.StatusCode)
		}
		res, body = s.api("POST", "/api/traces", "application/json", trace)
		if res.StatusCode != 201 || !strings.Contains(string(body), `"id"`) {
			t.Fatalf("import %d: %s", res.StatusCode, body)
		}
	})
	t.Run("a bad import writes nothing", func(t *testing.T) {
		before, _ := s.db.Sessions(context.Background(), 0)
		res, body := s.api("POST", "/api/traces", "application/json", []byte(`{"format": "delegation-studio.trace", "version": 1`))
		after, _ := s.db.Sessions(context.Background(), 0)
		if res.StatusCode != 400 || len(after) != len(before) || !strings.Contains(string(body), "not valid JSON") {
			t.Fatalf("status %d, %d → %d sessions: %s", res.StatusCode, len(before), len(after), body)
		}
	})
	t.Run("an unknown session is a JSON 404 for the API and a page for a person", func(t *testing.T) {
		res, body := s.api("GET", "/api/sessions/nope/trace", "", nil)
		if res.StatusCode != 404 || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("api %d: %s", res.StatusCode, body)
		}
		res, doc := s.get("/sessions/nope")
		if res.StatusCode != 404 || !strings.Contains(doc.Find(`[data-testid="error"]`).Text(), `no session "nope"`) {
			t.Fatalf("page %d", res.StatusCode)
		}
	})
	t.Run("the schemas are published", func(t *testing.T) {
		if res, _ := s.api("GET", "/schema/trace.schema.json", "", nil); res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
	})
}

func TestToken(t *testing.T) {
	s := newStudio(t, "sesame")
	t.Run("pages send a person to sign in", func(t *testing.T) {
		res, _ := s.get("/")
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/sign-in" {
			t.Fatalf("status %d to %s", res.StatusCode, res.Header.Get("Location"))
		}
	})
	t.Run("the API needs the bearer token", func(t *testing.T) {
		if res, _ := s.api("GET", "/api/sessions", "", nil); res.StatusCode != 401 {
			t.Fatalf("status %d", res.StatusCode)
		}
		req, _ := http.NewRequest("GET", s.ts.URL+"/api/sessions", nil)
		req.Header.Set("Authorization", "Bearer sesame")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("with the token: %v %v", err, res.StatusCode)
		}
		res.Body.Close()
	})
	t.Run("a wrong token does not sign in, the right one does", func(t *testing.T) {
		res, _ := s.form("/sign-in", "/sign-in", url.Values{"token": {"open"}})
		if res.StatusCode != 401 {
			t.Fatalf("wrong token: %d", res.StatusCode)
		}
		res, _ = s.form("/sign-in", "/sign-in", url.Values{"token": {"sesame"}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("right token: %d", res.StatusCode)
		}
		if res, _ := s.get("/"); res.StatusCode != 200 {
			t.Fatalf("after signing in: %d", res.StatusCode)
		}
	})
}

func TestCheckAddr(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:7788", "", true}, {"localhost:7788", "", true}, {"[::1]:7788", "", true},
		{"0.0.0.0:7788", "", false}, {":7788", "", false}, {"192.168.1.5:7788", "", false},
		{"0.0.0.0:7788", "a3f9c2d17e4b8a60f1c5", true}, {"nonsense", "", false},
		{"0.0.0.0:7788", "t", false}, {"127.0.0.1:7788", "       ", false}, {"0.0.0.0:7788", strings.Repeat("ab", 20), false},
	} {
		if err := CheckAddr(c.addr, c.token); (err == nil) != c.ok {
			t.Errorf("CheckAddr(%q, %q) = %v", c.addr, c.token, err)
		}
	}
}

func TestModelTextIsEscaped(t *testing.T) {
	s := newStudio(t, "")
	payload := `<script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	doc, _ := json.Marshal(map[string]any{"name": "xss", "prompt": payload,
		"script": map[string]any{"main": []any{map[string]any{"content": payload}}}})
	res, body := s.api("POST", "/api/sessions", "application/json", doc)
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)
	r, err := s.c.Get(s.ts.URL + "/sessions/" + created.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if bytes.Contains(page, []byte("<script>window.pwned")) || bytes.Contains(page, []byte("<img src=x")) {
		t.Fatal("the payload is in the page unescaped")
	}
	if !bytes.Contains(page, []byte("&lt;script&gt;window.pwned=1&lt;/script&gt;")) {
		t.Fatal("the payload is not shown as text")
	}
}

// startSlow starts a session of n turns of 60 ms each (an "ls"), then an
// answer, through the API, and returns its id: one to watch while it runs.
func (s *studio) startSlow(t *testing.T, n int) string {
	t.Helper()
	var turns []string
	for range n {
		turns = append(turns, `{"content": "step", "delay_ms": 60, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}`)
	}
	doc := `{"name": "slow", "prompt": "go", "script": {"main": [` + strings.Join(turns, ",") + `, {"content": "done"}]}}`
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(doc))
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	return created.ID
}

func TestLive(t *testing.T) {
	s := newStudio(t, "")
	id := s.startSlow(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(s.ts.URL, "http") + "/api/sessions/" + id + "/live?after=0"
	conn, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	var seqs []int64
	sawPatch := false
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read after %v: %v", seqs, err)
		}
		finished := false
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev wireEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq == 0 {
				continue
			}
			seqs = append(seqs, ev.Seq)
			if len(ev.Patches) > 0 {
				sawPatch = true
			}
			if ev.Type == string(delegation.EventMessageAdded) && ev.Message == nil {
				t.Fatalf("message.added without its message: %s", line)
			}
			finished = finished || ev.Type == string(delegation.EventSessionFinished)
		}
		if finished {
			break
		}
	}
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("seqs = %v: a gap or a duplicate", seqs)
		}
	}
	if !sawPatch {
		t.Fatal("no event carried patches for the page")
	}
	t.Run("a reconnect resumes after its last seq", func(t *testing.T) {
		c2, _, err := websocket.Dial(ctx, strings.Replace(wsURL, "after=0", "after=5", 1), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.CloseNow()
		_, data, err := c2.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ev wireEvent
		first, _, _ := bytes.Cut(data, []byte("\n"))
		_ = json.Unmarshal(first, &ev)
		if ev.Seq != 6 {
			t.Fatalf("first event after 5 is %d", ev.Seq)
		}
	})
}

func TestLongSessionsAreWindowed(t *testing.T) {
	s := newStudio(t, "")
	var turns []string
	for i := 0; i < 420; i++ {
		turns = append(turns, `{"content": "t", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}`)
	}
	doc := `{"name": "long", "prompt": "go", "agent": {"max_steps": 500}, "script": {"main": [` + strings.Join(turns, ",") + `, {"content": "done"}]}}`
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(doc))
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)
	_, page := s.get("/sessions/" + created.ID)
	rng := page.Find(`#timeline [data-wf-range]`)
	if !strings.Contains(rng.Text(), "The last 400 steps, 22–421 of 421") || rng.Find("a").Length() != 1 {
		t.Fatalf("timeline range: %q", rng.Text())
	}
	if n := page.Find(`#timeline .bar-model`).Length(); n != 400 {
		t.Fatalf("%d model calls' bars shown, want 400", n)
	}
	_, all := s.get("/sessions/" + created.ID + "?timeline=all")
	if n := all.Find(`#timeline .bar-model`).Length(); n != 421 {
		t.Fatalf("%d bars with timeline=all, want 421", n)
	}
	// main's own calls: the first and the last, around a gap.
	if n, gap := page.Find(`[data-calls="main"] > li[data-k]`).Length(), page.Find(`[data-calls="main"] > li.gap`).Text(); n != 15 || !strings.Contains(gap, "406 more calls") {
		t.Fatalf("main's calls list: %d rows, gap %q", n, gap)
	}
	res, call := s.get("/sessions/" + created.ID + "/calls/main.c420")
	if res.StatusCode != 200 || call.Find(`li.msg`).Length() != 842 {
		t.Fatalf("call page: %d, %d messages", res.StatusCode, call.Find(`li.msg`).Length())
	}
}

func TestBothModes(t *testing.T) {
	s := newStudio(t, "")
	res, _ := s.form("/", "/compare", url.Values{"lesson": {"one-delegation"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d", res.StatusCode)
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	a, b := loc.Query().Get("a"), loc.Query().Get("b")
	s.waitDone(a)
	s.waitDone(b)
	_, doc := s.get(loc.String())
	row := doc.Find(`[data-testid="costs"] tr[data-agent="general-purpose"]`)
	cells := row.Find("td")
	firstNumber := regexp.MustCompile(`-?\d[\d,]*`)
	n := func(i int) int {
		v, _ := strconv.Atoi(strings.ReplaceAll(firstNumber.FindString(cells.Eq(i).Text()), ",", ""))
		return v
	}
	isoMode, forkMode := strings.TrimSpace(cells.Eq(1).Text()), strings.TrimSpace(cells.Eq(2).Text())
	if isoMode != "isolated" || forkMode != "fork" {
		t.Fatalf("modes %q and %q", isoMode, forkMode)
	}
	isoEntry, forkEntry, isoShare, forkShare := n(3), n(4), n(6), n(7)
	if isoShare != 0 || forkShare == 0 || forkEntry <= isoEntry {
		t.Fatalf("entry: isolated %d (%d inherited), fork %d (%d inherited)", isoEntry, isoShare, forkEntry, forkShare)
	}
	cached := func(side string) int {
		v, _ := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(row.Find(`[data-testid="entry-cached-`+side+`"]`).Text()), ",", ""))
		return v
	}
	if cached("a") != 0 || cached("b") == 0 {
		t.Fatalf("cached at entry: isolated %d, fork %d: the fork's first call shares its parent's prefix", cached("a"), cached("b"))
	}
	for _, f := range []string{"cached", "uncached", "entry-cached"} {
		if doc.Find(`[data-figure="`+f+`"]`).Length() != 1 {
			t.Fatalf("no %s figure among %s", f, doc.Find(`[data-testid="figures"] tbody`).Text())
		}
	}
	if d := doc.Find(`[data-figure="entry-cached"] [data-testid="delta"]`).Text(); !strings.HasPrefix(d, "+") {
		t.Fatalf("cached at entry, B − A: %q", d)
	}
	if d := strings.TrimSpace(row.Find("td").Eq(5).Text()); d != "+"+strconv.Itoa(forkEntry-isoEntry) && !strings.HasPrefix(d, "+") {
		t.Fatalf("entry delta %q", d)
	}
	if doc.Find(`[data-figure="tokens"] [data-testid="pct"]`).Text() == "0 %" {
		t.Fatal("the input tokens of both modes are the same: no delta shown")
	}
	runs, err := s.db.Runs(context.Background(), db.RunFilter{Kind: db.RunModes})
	if err != nil || len(runs) != 1 || runs[0].Lesson != "one-delegation" || len(runs[0].Sessions) != 2 {
		t.Fatalf("the both-modes run is not kept: %+v, %v", runs, err)
	}
}

// lessonRunIDs waits for every session of the run a lesson's run button
// led to, and returns them.
func (s *studio) lessonRunIDs(res *http.Response) (*url.URL, []string) {
	s.t.Helper()
	if res.StatusCode != http.StatusSeeOther {
		s.t.Fatalf("run: %d", res.StatusCode)
	}
	loc, _ := url.Parse(res.Header.Get("Location"))
	run, err := s.db.Run(context.Background(), loc.Query().Get("run"))
	if err != nil {
		s.t.Fatalf("the redirect %s names no run: %v", loc, err)
	}
	var ids []string
	for _, rs := range run.Sessions {
		s.waitDone(rs.SessionID)
		ids = append(ids, rs.SessionID)
	}
	return loc, ids
}

func TestLessonPage(t *testing.T) {
	s := newStudio(t, "")
	res, doc := s.get("/lessons")
	if res.StatusCode != 200 || doc.Find(`[data-testid="lesson-list"] li`).Length() < 15 {
		t.Fatalf("lessons page: %d, %d lessons", res.StatusCode, doc.Find(`[data-testid="lesson-list"] li`).Length())
	}
	if _, doc := s.get("/lessons/entry-cost"); doc.Find(`[data-testid="not-run"]`).Length() != 1 {
		t.Fatal("a lesson never run does not say so")
	}
	res, _ = s.form("/lessons/entry-cost", "/lessons/entry-cost/run", url.Values{})
	_, ids := s.lessonRunIDs(res)
	if len(ids) != 3 {
		t.Fatalf("runs = %v, want the three variants", ids)
	}
	// The lesson keeps its run: its page, opened again, shows it.
	_, doc = s.get("/lessons/entry-cost")
	table := doc.Find(`[data-testid="table-computed"] tbody tr`)
	if table.Length() != 3 {
		t.Fatalf("computed rows: %d", table.Length())
	}
	if doc.Find(`[data-testid="table-article"] tbody tr`).Length() != 3 {
		t.Fatal("no article figures beside the computed table")
	}
	if doc.Find(`[data-testid="checks"] li.fail`).Length() != 0 || doc.Find(`[data-testid="checks"] li.ok`).Length() == 0 {
		t.Fatalf("checks: %s", doc.Find(`[data-testid="checks"]`).Text())
	}
	if doc.Find(`[data-testid="chart"] polyline`).Length() != 2 {
		t.Fatal("no entry cost chart with both modes")
	}
	if n := doc.Find(`[data-testid="table-versus"] tbody tr`).Length(); n == 0 {
		t.Fatal("no row-by-row comparison of the article's figures and ours")
	}
	// Ours counted as the article counts, beside the article's figure, with
	// the reason where they are still more than 15 % apart.
	counted := doc.Find(`[data-testid="table-versus"] [data-testid="versus-counted"] .versus-figure`)
	if counted.Length() < 6 || doc.Find(`[data-testid="versus-counted"] .versus-figure.off`).Length() != doc.Find(`[data-testid="versus-counted"] .versus-gap`).Length() {
		t.Fatalf("counted figures: %d, off %d, with a reason %d", counted.Length(),
			doc.Find(`[data-testid="versus-counted"] .versus-figure.off`).Length(), doc.Find(`[data-testid="versus-counted"] .versus-gap`).Length())
	}
	if doc.Find(`[data-testid="run-lesson-deepagents"]`).Length() != 1 {
		t.Fatal("no way to run the lesson as deepagents does")
	}
	// A second run is the one shown; the first is listed among the earlier.
	res, _ = s.form("/lessons/entry-cost", "/lessons/entry-cost/run", url.Values{})
	loc, _ := s.lessonRunIDs(res)
	_, doc = s.get("/lessons/entry-cost")
	if got, _ := doc.Find(`[data-testid="lesson-run"]`).Attr("data-run"); got != loc.Query().Get("run") {
		t.Fatalf("the page shows run %q, want the latest %q", got, loc.Query().Get("run"))
	}
	if doc.Find(`[data-testid="earlier-runs"] li`).Length() != 1 || doc.Find(`[data-testid="table-computed"]`).Length() != 1 {
		t.Fatalf("earlier runs: %d", doc.Find(`[data-testid="earlier-runs"] li`).Length())
	}
	// The home page's Run runs the whole lesson, and it shows here too.
	res, _ = s.form("/", "/lessons/entry-cost/run", url.Values{})
	if _, ids := s.lessonRunIDs(res); len(ids) != 3 {
		t.Fatalf("the home Run started %d sessions, want every variant", len(ids))
	}
	if _, doc = s.get("/lessons/entry-cost"); doc.Find(`[data-testid="earlier-runs"] li`).Length() != 2 {
		t.Fatal("the home run is not the lesson's latest")
	}
}

// TestCacheAndCostLesson runs the three-way fan-out lesson in the studio:
// its table and its bar chart, drawn from the stored runs.
func TestCacheAndCostLesson(t *testing.T) {
	s := newStudio(t, "")
	res, _ := s.form("/lessons/cache-and-cost", "/lessons/cache-and-cost/run", url.Values{})
	loc, ids := s.lessonRunIDs(res)
	_, doc := s.get(loc.String())
	links := doc.Find(`[data-testid="compare-variants"] a`)
	if links.Length() != 2 || links.Eq(1).AttrOr("href", "") != "/compare?a="+ids[0]+"&b="+ids[2] || !strings.Contains(links.Eq(1).Text(), "isolated with fork-own-tools") {
		t.Fatalf("a three-variant run offers the comparisons %q", links.Text())
	}
	if n := doc.Find(`[data-testid="table-computed"] tbody tr`).Length(); n != 3 {
		t.Fatalf("computed rows: %d", n)
	}
	if doc.Find(`[data-testid="checks"] li.fail`).Length() != 0 {
		t.Fatalf("checks: %s", doc.Find(`[data-testid="checks"]`).Text())
	}
	chart := doc.Find(`[data-testid="bar-chart"]`)
	if chart.Find("svg").Length() != 2 || chart.Find("rect.part").Length() != 3*2+3*3 {
		t.Fatalf("bar chart: %d panels, %d parts", chart.Find("svg").Length(), chart.Find("rect.part").Length())
	}
	// The bars are to scale: the fork's entry bar is the longest of its panel.
	widths := map[string]int{}
	chart.Find("svg").First().Find("rect.part").Each(func(i int, r *goquery.Selection) {
		w, _ := strconv.Atoi(r.AttrOr("width", "0"))
		widths[strconv.Itoa(i/2)] += w
	})
	if !(widths["0"] < widths["2"] && widths["2"] < widths["1"]) {
		t.Fatalf("entry bars (isolated, fork, own tools): %v", widths)
	}
	if !strings.Contains(chart.Text(), "$") {
		t.Fatal("the cost panel writes no dollars")
	}
	if doc.Find(`[data-testid="chart"] polyline`).Length() != 0 {
		t.Fatal("the entry-cost line chart was drawn for a table that is not the entry cost's")
	}
}

// TestLessonAsDeepagents runs a lesson with compat "deepagents": every
// variant's scenario says so, and where deepagents fails the run the page
// says the runs differ from ours rather than hiding them.
func TestLessonAsDeepagents(t *testing.T) {
	s := newStudio(t, "")
	res, _ := s.form("/lessons/failure-isolation", "/lessons/failure-isolation/run", url.Values{"mode": {"deepagents"}})
	loc, ids := s.lessonRunIDs(res)
	for _, id := range ids {
		res, _ := s.c.Get(s.ts.URL + "/api/sessions/" + id + "/trace")
		var tr struct {
			Session  struct{ Status string } `json:"session"`
			Scenario struct {
				Agent struct{ Compat string } `json:"agent"`
			} `json:"scenario"`
		}
		if err := json.NewDecoder(res.Body).Decode(&tr); err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if tr.Scenario.Agent.Compat != "deepagents" || tr.Session.Status != "failed" {
			t.Fatalf("session %s: compat %q, status %s: want every variant run as deepagents, and failed", id, tr.Scenario.Agent.Compat, tr.Session.Status)
		}
	}
	_, doc := s.get(loc.String())
	if doc.Find(`[data-testid="mode-deepagents"]`).Length() != 1 || !strings.Contains(doc.Find(`[data-testid="errors"]`).Text(), "deepagents") {
		t.Fatalf("page: %s", doc.Find("main").Text())
	}
	if res, _ := s.form("/lessons/failure-isolation", "/lessons/failure-isolation/run", url.Values{"mode": {"langgraph"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("an unknown mode: %d", res.StatusCode)
	}

}

// TestReceiptEvictionShown: a child's receipt over 80,000 characters goes
// to a file (delegation.md §12); its delegation's economics say so: the
// receipt's tokens and its pointer's, and what the parent's later calls did
// not read.
func TestReceiptEvictionShown(t *testing.T) {
	s := newStudio(t, "")
	report, _ := json.Marshal(strings.Repeat("Finding: the cache was cold.\n", 3000))
	id := s.start(t, `{"name": "big", "prompt": "p",
 "subagents": [{"name": "r", "description": "d"}],
 "script": {"main": [{"tool_calls": [{"name": "task", "args": {"description": "all", "subagent_type": "r"}}]}, {"content": "done"}],
  "r": [[{"content": `+string(report)+`}]]}}`)
	s.waitDone(id)
	_, doc := s.get("/sessions/" + id + "?agent=a1")
	got := strings.Join(strings.Fields(doc.Find(`[data-testid="receipt-evicted"]`).Text()), " ")
	pointer := strings.TrimSuffix(strings.TrimSpace(doc.Find(`[data-testid="evicted"]`).Closest(".msg").Find(".tokens").First().Text()), " tok")
	if !strings.Contains(got, "the receipt went to a file (") || !strings.Contains(got, " became a pointer of "+pointer+" tokens); 1 model call of the parent read the pointer in its place, ") {
		t.Fatalf("the receipt's eviction in the economics: %q (pointer %q)", got, pointer)
	}
}

// TestEvictionShown: a prompt over 200,000 characters goes to a file
// (delegation.md §12); main's pane marks it as a cut is marked, with the
// tokens before and after and a link to the file, which holds the prompt;
// the fork's delegation counts the pointer it read in the text's place.
func TestEvictionShown(t *testing.T) {
	s := newStudio(t, "")
	prompt, _ := json.Marshal(strings.Repeat("a line of the log\n", 12000))
	id := s.start(t, `{"name": "big", "prompt": `+string(prompt)+`,
 "subagents": [{"name": "fk", "description": "d", "mode": "fork"}],
 "script": {"main": [{"tool_calls": [{"name": "task", "args": {"description": "look", "subagent_type": "fk"}}]}, {"content": "done"}],
  "fk": [[{"content": "seen"}]]}}`)
	s.waitDone(id)
	_, doc := s.get("/sessions/" + id)
	mark := doc.Find(`#msg-main\.0 [data-testid="evicted"]`)
	text := strings.Join(strings.Fields(mark.Text()), " ")
	tokens := strings.TrimSpace(doc.Find(`#msg-main\.0 .tokens`).First().Text())
	if !strings.Contains(text, "216,000 characters (72,000 tokens) were too big for the model") ||
		!strings.Contains(text, "instead ("+strings.TrimSuffix(tokens, " tok")+" tokens)") {
		t.Fatalf("the eviction's mark: %q", text)
	}
	href, _ := mark.Find(`[data-testid="evicted-file"]`).Attr("href")
	if !strings.Contains(href, "file?path=%2Fconversation_history%2F") {
		t.Fatalf("the file's link: %q", href)
	}
	res, file := s.get(href)
	if res.StatusCode != 200 || !strings.Contains(file.Text(), "a line of the log\na line of the log") {
		t.Fatalf("the file: %d", res.StatusCode)
	}
	_, doc = s.get("/sessions/" + id + "?agent=a1")
	got := strings.Join(strings.Fields(doc.Find(`[data-testid="evictions"]`).Text()), " ")
	pointer, _ := strconv.Atoi(strings.TrimSuffix(tokens, " tok"))
	if want := "1 model call read a pointer in place of the text, " + view.Thousands(72000-pointer) + " tokens not read"; !strings.Contains(got, want) {
		t.Fatalf("the fork's economics: %q", got)
	}
}
