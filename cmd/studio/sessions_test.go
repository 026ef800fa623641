package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/server"
)

// TestSessionsJSON: `studio sessions --json` lists a store's sessions as
// GET /api/sessions does, field for field, with each one's origin; --status,
// --origin and --limit pick as the API's query does, and a bad filter is a
// usage error that names what it may be.
func TestSessionsJSON(t *testing.T) {
	bin := studioBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "studio.db")
	studio := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--db", path)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("studio %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	// One our engine ran, the same imported from its OTLP export, and one
	// the recording endpoint left failed.
	studio("run", "lesson:lost-update--delta")
	engine := strings.Fields(string(studio("sessions")))[8] // the first id after the header's eight words
	spans := filepath.Join(dir, "spans.json")
	if err := os.WriteFile(spans, studio("export", engine, "--format", "otlp"), 0o644); err != nil {
		t.Fatal(err)
	}
	imported := strings.TrimSpace(string(studio("import", spans)))
	d := openDB(t, path)
	ctx := context.Background()
	if err := d.CreateSession(ctx, &db.Session{ID: "recorded", Name: "an agent", CreatedAt: d.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := d.AppendEvents(ctx, "recorded", []delegation.Event{
		{Seq: 1, Type: delegation.EventSessionStarted, At: d.Now(), Payload: delegation.SessionStarted{SessionID: "recorded", Name: "an agent",
			Origin: &delegation.Origin{Kind: delegation.OriginProxy, Upstream: "http://127.0.0.1:1/v1"}}},
		{Seq: 2, Type: delegation.EventSessionFinished, At: d.Now(), Payload: delegation.SessionFinished{Status: delegation.StatusFailed, Error: "upstream 500"}},
	}); err != nil {
		t.Fatal(err)
	}
	d.Close()

	lines := func(args ...string) []server.SessionLine {
		t.Helper()
		var out []server.SessionLine
		if err := json.Unmarshal(studio(append([]string{"sessions", "--json"}, args...)...), &out); err != nil {
			t.Fatalf("sessions --json %v: %v", args, err)
		}
		return out
	}
	ids := func(ls []server.SessionLine) string {
		var s []string
		for _, l := range ls {
			s = append(s, l.ID+":"+l.Status+":"+l.Origin)
		}
		return strings.Join(s, " ")
	}
	all := lines()
	if got, want := ids(all), "recorded:failed:proxy "+imported+":done:otlp "+engine+":done:engine"; got != want {
		t.Fatalf("sessions --json: %s\nwant %s", got, want)
	}
	if all[2].Agents < 2 || all[2].ModelCalls == 0 || all[2].InputTokens == 0 || all[2].URL != "/sessions/"+engine || all[2].Name == "" {
		t.Fatalf("the engine's session lists as %+v", all[2])
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--origin", "otlp"}, imported + ":done:otlp"},
		{[]string{"--status", "failed"}, "recorded:failed:proxy"},
		{[]string{"--status", "done", "--limit", "1"}, imported + ":done:otlp"},
		{[]string{"--origin", "engine", "--status", "running"}, ""},
	} {
		if got := ids(lines(c.args...)); got != c.want {
			t.Errorf("sessions --json %v: %s, want %s", c.args, got, c.want)
		}
	}
	out, err := exec.Command(bin, "sessions", "--origin", "langgraph", "--status", "ok", "--db", path).CombinedOutput()
	if code := exitCode(err); code != exitUsage || !strings.Contains(string(out), `origin "langgraph" is none of engine, otlp, proxy`) ||
		!strings.Contains(string(out), `status "ok" is none of running, done, failed, interrupted`) {
		t.Fatalf("a bad filter: exit %d\n%s", code, out)
	}
	if text := string(studio("sessions", "--origin", "otlp")); !strings.Contains(text, "ORIGIN") || !strings.Contains(lineOf(text, imported), " otlp ") {
		t.Fatalf("sessions --origin otlp prints\n%s", text)
	}

	sameAsTheAPI(t, path, lines)

}

// sameAsTheAPI: a server on the file gives, at GET /api/sessions, the
// lines `studio sessions --json` gives, filtered alike, and refuses a bad
// filter saying what it may be.
func sameAsTheAPI(t *testing.T, path string, lines func(args ...string) []server.SessionLine) {
	t.Helper()
	s := serve(t, path)
	for _, q := range []string{"", "?origin=otlp", "?status=failed&limit=1"} {
		res, err := http.Get(s.url + "/api/sessions" + q)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var api []server.SessionLine
		if err := json.Unmarshal(body, &api); err != nil {
			t.Fatalf("GET /api/sessions%s: %d %s", q, res.StatusCode, body)
		}
		var args []string
		for k, v := range map[string][]string(mustQuery(t, q)) {
			args = append(args, "--"+k, v[0])
		}
		if cli := lines(args...); !reflect.DeepEqual(api, cli) {
			t.Errorf("GET /api/sessions%s gives\n%+v\nstudio sessions --json %v gives\n%+v", q, api, args, cli)
		}
	}
	res, err := http.Get(s.url + "/api/sessions?origin=langgraph")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `origin \"langgraph\" is none of engine, otlp, proxy`) {
		t.Fatalf("GET /api/sessions?origin=langgraph: %d %s", res.StatusCode, body)
	}
}

// mustQuery reads a URL's query ("?a=b&c=d", or "").
func mustQuery(t *testing.T, q string) url.Values {
	t.Helper()
	v, err := url.ParseQuery(strings.TrimPrefix(q, "?"))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
