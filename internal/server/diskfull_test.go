//go:build linux

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/trace"
)

// smallDisk mounts a tmpfs of size bytes in a temporary folder, unmounted
// when the test ends; it skips the test where mounting is impossible.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (%v): this test needs root on Linux", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file on dir until the disk has no room left.
func fill(t *testing.T, dir string) (filler string) {
	t.Helper()
	filler = filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the disk: %v; want ENOSPC", err)
	}
	return filler
}

// until polls cond, which reports what it saw, until it holds or the
// deadline passes.
func until(t *testing.T, what string, deadline time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s; last saw %s", what, deadline, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestDiskFull(t *testing.T) {
	dir := smallDisk(t, 8<<20)
	s := startStudioOn(t, filepath.Join(dir, "studio.db"), Config{})
	s.t = t
	var turns []string
	for i := range 3000 {
		turns = append(turns, fmt.Sprintf(`{"content": "step %d", "delay_ms": 10, "tool_calls": [{"name": "write_file", "args": {"file_path": "/f%d.md", "content": "%s"}}]}`,
			i, i, strings.Repeat("data ", 100)))
	}
	doc := `{"name": "filling", "prompt": "go", "agent": {"max_steps": 4000}, "script": {"main": [` + strings.Join(turns, ",") + `, {"content": "done"}]}}`
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(doc))
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	id := created.ID
	status := func() (string, string) {
		_, body := s.api("GET", "/api/sessions", "", nil)
		var list []SessionLine
		_ = json.Unmarshal(body, &list)
		for _, x := range list {
			if x.ID == id {
				return x.Status, string(body)
			}
		}
		return "", string(body)
	}
	until(t, "the session stores its first calls", 20*time.Second, func() (bool, string) {
		sess, err := s.db.Session(context.Background(), id)
		return err == nil && sess.ModelCalls >= 3, fmt.Sprint(sess, err)
	})
	filler := fill(t, dir)

	t.Run("the session a full disk cut off ends failed at once, saying so", func(t *testing.T) {
		until(t, "the session ends", 20*time.Second, func() (bool, string) {
			st, saw := status()
			return st != "" && st != delegation.StatusRunning, saw
		})
		if st, saw := status(); st != delegation.StatusFailed {
			t.Fatalf("status %q; want failed: %s", st, saw)
		}
		res, body := s.api("GET", "/api/sessions/"+id+"/trace", "", nil)
		var tr trace.Trace
		if res.StatusCode != 200 || json.Unmarshal(body, &tr) != nil {
			t.Fatalf("trace: %d %.300s", res.StatusCode, body)
		}
		if !strings.Contains(tr.Session.Error, "full") {
			t.Errorf("session error %q; want it to say the disk is full", tr.Session.Error)
		}
		last := tr.Events[len(tr.Events)-1]
		var fin delegation.SessionFinished
		if last.Type != delegation.EventSessionFinished || json.Unmarshal(last.Data, &fin) != nil || fin.Code != delegation.EFULL {
			t.Errorf("last event %s %s; want session.finished with code %q", last.Type, last.Data, delegation.EFULL)
		}
		pageSaysDiskFull(t, s, id, tr.Session.Error)
		// Nothing committed is lost: the log runs 1, 2, 3… to its end.
		for i, ev := range tr.Events {
			if ev.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, ev.Seq)
			}
		}
		if ok, err := s.db.IntegrityCheck(context.Background()); ok != "ok" || err != nil {
			t.Errorf("integrity_check %q, %v", ok, err)
		}
	})

	t.Run("healthz says the disk is full while it is, and ok once space returns", func(t *testing.T) {
		res, body := s.api("GET", "/healthz", "", nil)
		var h map[string]string
		_ = json.Unmarshal(body, &h)
		if res.StatusCode != http.StatusServiceUnavailable || h["reason"] != delegation.EFULL ||
			h["database"] != i18n.Get(i18n.English).T("error.disk_full") {
			t.Fatalf("healthz on a full disk: %d %s", res.StatusCode, body)
		}
		req, _ := http.NewRequest("GET", s.ts.URL+"/healthz", nil)
		req.Header.Set("Accept-Language", "zh-CN")
		if res, err := s.c.Do(req); err == nil {
			_ = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if h["database"] != i18n.Get(i18n.Chinese).T("error.disk_full") {
				t.Errorf("healthz in Chinese: %v", h)
			}
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		until(t, "healthz answers 200 once space returns", 20*time.Second, func() (bool, string) {
			res, body := s.api("GET", "/healthz", "", nil)
			return res.StatusCode == http.StatusOK, string(body)
		})
	})
}

// pageSaysDiskFull: a session a full disk ended says why on its page in
// the viewer's language, from its code, not in its stored English error.
func pageSaysDiskFull(t *testing.T, s *studio, id, stored string) {
	t.Helper()
	for _, lang := range []string{"", "zh-CN"} {
		want := i18n.Get(i18n.English).T("error.disk_full")
		if lang != "" {
			want = i18n.Get("zh").T("error.disk_full")
		}
		_, doc := s.getLang("/sessions/"+id, lang)
		why := doc.Find(`[data-testid="session-error"] [data-code]`)
		badge := doc.Find(`[data-testid="status"]`).AttrOr("title", "")
		if why.AttrOr("data-code", "") != delegation.EFULL || why.Text() != want || badge != want ||
			strings.Contains(doc.Find(`[data-testid="session-error"]`).Text(), stored) {
			t.Errorf("page (%q) says %q, badge %q; want %q", lang, doc.Find(`[data-testid="session-error"]`).Text(), badge, want)
		}
	}
}
