package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
)

// readOnlyStudio is a studio serving, read-only, a file holding one
// finished session, whose id it gives.
func readOnlyStudio(t *testing.T) (*studio, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studio.db")
	w := startStudioOn(t, path, Config{})
	w.t = t
	res, body := w.api("POST", "/api/sessions", "application/json",
		[]byte(`{"name":"ro","prompt":"go","script":{"main":[{"content":"done"}]}}`))
	var out struct{ ID string }
	if err := json.Unmarshal(body, &out); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start a session: %d %s", res.StatusCode, body)
	}
	id := out.ID
	w.waitDone(id)
	d, err := db.OpenReadOnly(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{DB: d, ReadOnly: db.ReadOnlyMount})
	ts := httptest.NewServer(srv.Handler())
	jar, _ := cookiejar.New(nil)
	s := &studio{t: t, srv: srv, ts: ts, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() { srv.Shutdown(context.Background()); ts.Close(); d.Close() })
	return s, id
}

func TestReadOnlyPages(t *testing.T) {
	s, id := readOnlyStudio(t)
	for _, page := range []string{"/", "/sessions/" + id, "/lessons", "/lessons/order-number", "/teams", "/teams/new", "/compare?a=" + id + "&b=" + id} {
		res, doc := s.get(page)
		banner := doc.Find(`[data-testid="read-only"]`)
		if res.StatusCode != http.StatusOK || banner.Length() != 1 || !strings.Contains(banner.Text(), "read-only file system") {
			t.Errorf("GET %s = %d, banner %q; want 200 saying the file system is read-only", page, res.StatusCode, banner.Text())
		}
	}
	_, doc := s.get("/")
	for _, sel := range []string{`[data-testid="start-here-run"]`, `[data-testid="scenario-form"] button`, `[data-testid="import-form"] button`} {
		b := doc.Find(sel)
		title, _ := b.Attr("title")
		if _, off := b.Attr("disabled"); !off || !strings.Contains(title, "read-only") {
			t.Errorf("%s: disabled %v, title %q; want disabled, saying why", sel, off, title)
		}
	}
	_, doc = s.get("/teams/new")
	if _, off := doc.Find(`[data-testid="save"]`).Attr("disabled"); !off {
		t.Errorf("the team form's save is not disabled")
	}
	if _, off := doc.Find(`[data-testid="preview-button"]`).Attr("disabled"); off {
		t.Errorf("the team form's preview, which writes nothing, is disabled")
	}
}

func TestReadOnlyRefusesChanges(t *testing.T) {
	s, id := readOnlyStudio(t)
	for _, w := range []struct{ path, body, want string }{
		{"/api/sessions", `{"name":"x","prompt":"go","script":{"main":[{"content":"done"}]}}`, `"code":"read_only"`},
		{"/api/traces", `{}`, `"code":"read_only"`},
		{"/v1/traces", `{}`, `"code":"read_only"`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, `"code":"read_only"`},
	} {
		res, body := s.api("POST", w.path, "application/json", []byte(w.body))
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), w.want) || res.Header.Get("Retry-After") != "" {
			t.Errorf("POST %s = %d (Retry-After %q) %s; want 503 %s, no retry", w.path, res.StatusCode, res.Header.Get("Retry-After"), body, w.want)
		}
	}
	if res, _ := s.form("/", "/sessions", url.Values{"scenario": {`{"name":"x","prompt":"go"}`}}); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the start form = %d; want 503", res.StatusCode)
	}
	if res, _ := s.form("/", "/sessions/"+id+"/stop", url.Values{}); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stop = %d; want 503", res.StatusCode)
	}
	team := url.Values{"name": {"t"}, "title": {"T"}, "prompt": {"go"}}
	team.Set("action", "preview")
	if res, _ := s.form("/teams/new", "/teams", team); res.StatusCode != http.StatusOK {
		t.Errorf("the team form's preview = %d; want 200", res.StatusCode)
	}
	team.Set("action", "save")
	if res, doc := s.form("/teams/new", "/teams", team); res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(doc.Text(), "read-only") {
		t.Errorf("the team form's save = %d; want 503 saying the database is read-only", res.StatusCode)
	}
	for _, p := range []string{"/api/sessions/" + id + "/trace", "/api/sessions/" + id + "/otlp", "/api/sessions"} {
		if res, body := s.api("GET", p, "", nil); res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %.200s; want 200", p, res.StatusCode, body)
		}
	}
	res, body := s.api("GET", "/healthz", "", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"read_only":true`) || !strings.Contains(string(body), `"read_only_reason":"mount"`) {
		t.Errorf("/healthz = %d %s; want ok, read_only true, reason mount", res.StatusCode, body)
	}
}
