package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
)

// fakeEndpoint answers chat completions in SSE with a fixed text.
func fakeEndpoint(t *testing.T, seenKey *string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seenKey = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		w.Header().Set("Content-Type", "text/event-stream")
		chunk, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": "hello from the endpoint"}, "finish_reason": "stop"}}})
		fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", chunk)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAPIKeyIsNeverKept(t *testing.T) {
	const key = "sk-live-this-must-never-be-written-4242"
	t.Setenv("STUDIO_TEST_API_KEY", key)
	var seen string
	endpoint := fakeEndpoint(t, &seen)

	dir := t.TempDir()
	path := filepath.Join(dir, "studio.db")
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv := New(Config{DB: d, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Endpoints: []Endpoint{{Name: "keyed", BaseURL: endpoint.URL + "/v1", KeyEnv: "STUDIO_TEST_API_KEY"}}})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	jar, _ := cookiejar.New(nil)
	s := &studio{t: t, srv: srv, ts: ts, db: d, c: &http.Client{Jar: jar}}

	doc := `{"name": "keyed", "prompt": "say hello", "model": {"endpoint": "keyed", "model": "m"}}`
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(doc))
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)
	if seen != key {
		t.Fatalf("the endpoint got key %q: the key did not reach it", seen)
	}
	_, trace := s.api("GET", "/api/sessions/"+created.ID+"/trace", "", nil)
	_, otlp := s.api("GET", "/api/sessions/"+created.ID+"/otlp", "", nil)
	_, page := s.api("GET", "/sessions/"+created.ID, "", nil)
	if !bytes.Contains(trace, []byte("hello from the endpoint")) {
		t.Fatalf("the session did not run against the endpoint: %s", trace)
	}
	srv.Shutdown(context.Background())
	d.Close()

	places := map[string][]byte{"trace export": trace, "OTLP export": otlp, "session page": page, "logs": logs.Bytes()}
	files, _ := filepath.Glob(path + "*") // the database, its WAL and shared memory
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		places[f] = b
	}
	for where, b := range places {
		if bytes.Contains(b, []byte(key)) || bytes.Contains(b, []byte("this-must-never")) {
			t.Errorf("the API key appears in %s", where)
		}
	}
}

func TestOversizedBodiesAreRefused(t *testing.T) {
	s := newStudio(t, "")
	big := bytes.Repeat([]byte("x"), MaxTraceBody+1)
	res, _ := s.api("POST", "/api/traces", "application/json", big)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", res.StatusCode)
	}
	if list, _ := s.db.Sessions(context.Background(), 0); len(list) != 0 {
		t.Fatal("an oversized body wrote a session")
	}
}

func TestStartAgainstAnEndpoint(t *testing.T) {
	var seen string
	endpoint := fakeEndpoint(t, &seen)
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{DB: d, Endpoints: []Endpoint{{Name: "local", BaseURL: endpoint.URL + "/v1", Model: "m"}}})
	ts := httptest.NewServer(srv.Handler())
	jar, _ := cookiejar.New(nil)
	s := &studio{t: t, srv: srv, ts: ts, db: d, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	t.Cleanup(func() { srv.Shutdown(context.Background()); ts.Close(); d.Close() })

	_, page := s.get("/")
	if page.Find(`[data-testid="endpoint"] option`).Length() != 2 || !strings.Contains(page.Find(`[data-testid="endpoints"]`).Text(), "local: m at "+endpoint.URL) {
		t.Fatal("the form does not offer the configured endpoint")
	}
	res, _ := s.form("/", "/sessions", url.Values{"scenario": {`{"name": "x", "prompt": "say hello", "script": {"main": [{"content": "from the script"}]}}`}, "endpoint": {"local"}})
	id := sessionID(t, res)
	s.waitDone(id)
	tr, err := d.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Messages[len(tr.Messages)-1].Content; got != "hello from the endpoint" {
		t.Fatalf("the last message is %q: the session did not run against the endpoint", got)
	}
	if res, _ := s.form("/", "/sessions", url.Values{"scenario": {`{"name": "x", "prompt": "p", "script": {"main": [{"content": "a"}]}}`}, "endpoint": {"7"}}); res.StatusCode != 400 {
		t.Fatalf("an unknown endpoint: %d", res.StatusCode)
	}
}
