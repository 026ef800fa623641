package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
)

// readOnlyDir is a folder holding a database with one imported session,
// then mounted read-only (a bind mount: chmod does not stop root); it
// gives the database's path and the session's id. Without mount (not
// root), it skips.
func readOnlyDir(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "studio.db")
	id := importExample(t, path)
	return mountReadOnly(t, path), id
}

// mountReadOnly bind-mounts the folder of the database at path read-only
// elsewhere and gives the database's path there; without mount, it skips.
func mountReadOnly(t *testing.T, path string) string {
	t.Helper()
	dst := t.TempDir()
	if out, err := exec.Command("mount", "--bind", filepath.Dir(path), dst).CombinedOutput(); err != nil {
		t.Skipf("no bind mount here (%v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dst).Run() })
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", dst).CombinedOutput(); err != nil {
		t.Skipf("no read-only remount here (%v: %s)", err, out)
	}
	return filepath.Join(dst, filepath.Base(path))
}

// importExample stores the example's trace in a new database at path and
// gives the session's id.
func importExample(t *testing.T, path string) string {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace.json")
	out, err := exec.Command(studioBinary(t), "run", example, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trace, out, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(studioBinary(t), "import", trace, "--db", path).Output()
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestServeReadOnlyMount(t *testing.T) {
	path, id := readOnlyDir(t)
	srv := serve(t, path)
	checkReadOnlyServer(t, srv, id, "mount")
}

func TestServeReadOnlyFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	id := importExample(t, path)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, path, "--read-only")
	checkReadOnlyServer(t, srv, id, "asked")
	srv.stop(t)
	// No lock taken, nothing written: the file is as it was (SQLite's
	// -shm beside it is its readers' shared memory, not a write).
	if _, err := os.Stat(db.LockPath(path)); err == nil {
		t.Errorf("a read-only serve made the lock file %s", db.LockPath(path))
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("a read-only serve changed the database file")
	}
}

// checkReadOnlyServer checks a read-only server: its pages say so with
// their buttons off, changes answer read_only, exports and /healthz work.
func checkReadOnlyServer(t *testing.T, srv *served, id, reason string) {
	t.Helper()
	for _, page := range []string{"/", "/sessions/" + id, "/lessons", "/teams", "/compare"} {
		status, body := get(t, srv.url+page)
		if status != http.StatusOK || !strings.Contains(body, `data-testid="read-only" data-reason="`+reason+`"`) {
			t.Errorf("GET %s = %d; want 200 with the read-only banner (%s)", page, status, reason)
		}
		if page == "/" && !strings.Contains(body, `data-testid="start-here-run" disabled`) {
			t.Errorf("the home page's run button is not disabled")
		}
	}
	for _, w := range []struct{ path, body string }{
		{"/api/sessions", `{"name":"x","prompt":"go","script":{"main":[{"content":"done"}]}}`},
		{"/api/traces", `{}`},
		{"/v1/traces", `{}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp, err := http.Post(srv.url+w.path, "application/json", strings.NewReader(w.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"code":"read_only"`) {
			t.Errorf("POST %s = %d %s; want 503 with the code read_only", w.path, resp.StatusCode, b)
		}
	}
	if status, body := get(t, srv.url+"/api/sessions/"+id+"/trace"); status != http.StatusOK || !strings.Contains(body, id) {
		t.Errorf("the trace export = %d; want 200 with the session", status)
	}
	if status, _ := get(t, srv.url+"/api/sessions/"+id+"/otlp"); status != http.StatusOK {
		t.Errorf("the OTLP export = %d; want 200", status)
	}
	status, body := get(t, srv.url+"/healthz")
	var h struct {
		ReadOnlyReason string `json:"read_only_reason"`
		ReadOnly       bool   `json:"read_only"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || status != http.StatusOK || !h.ReadOnly || h.ReadOnlyReason != reason {
		t.Errorf("/healthz = %d %s; want 200 with read_only true, reason %s", status, body, reason)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
