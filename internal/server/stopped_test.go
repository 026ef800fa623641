package server

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// slowSession is a scenario whose child thinks for a minute on its second
// turn: it runs until it is stopped.
const slowSession = `{"name": "slow", "prompt": "go",
 "subagents": [{"name": "helper", "description": "Helps."}],
 "script": {
  "main": [{"tool_calls": [{"name": "task", "args": {"description": "Think slowly.", "subagent_type": "helper"}}]}, {"content": "done"}],
  "helper": [[{"content": "first", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "never", "delay_ms": 60000}]]}}`

// TestStoppedSessionSaysWhy: a session stopped in the studio, and one
// stopped because the studio is stopping (what serve does on SIGTERM), say
// why on their page, in the viewer's language, from the code their log
// carries, never as a Go error ("context canceled").
func TestStoppedSessionSaysWhy(t *testing.T) {
	s := newStudio(t, "")
	start := func() string {
		res, body := s.api("POST", "/api/sessions", "application/json", []byte(slowSession))
		var created struct{ ID string }
		if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		s.waitCalls(created.ID, 3) // the child is thinking: its second call runs
		return created.ID
	}
	byUser := start()
	if res, _ := s.form("/sessions/"+byUser, "/sessions/"+byUser+"/stop", url.Values{}); res.StatusCode >= 400 {
		t.Fatalf("stop: %d", res.StatusCode)
	}
	s.waitDone(byUser)
	byShutdown := start()
	s.srv.Runner().Shutdown(context.Background())
	s.waitDone(byShutdown)
	// Once the studio is stopping, a start is refused for now, not for good.
	if res, body := s.api("POST", "/api/sessions", "application/json", []byte(slowSession)); res.StatusCode != 503 ||
		res.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"code":"stopping"`) {
		t.Errorf("a start while stopping: %d, Retry-After %q: %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}

	for _, c := range []struct{ id, by, lang, want string }{
		{byUser, delegation.StopUser, "", "someone stopped it in the studio"},
		{byUser, delegation.StopUser, "zh-CN", "有人在工作室中停止了它"},
		{byShutdown, delegation.StopShutdown, "", "the studio was stopping"},
		{byShutdown, delegation.StopShutdown, "zh-CN", "工作室正在停止"},
	} {
		_, doc := s.getLang("/sessions/"+c.id, c.lang)
		why := doc.Find(`[data-testid="session-error"] [data-stopped-by]`)
		page, _ := doc.Html()
		if v, _ := why.Attr("data-stopped-by"); v != c.by || !strings.Contains(why.Text(), c.want) ||
			!strings.Contains(doc.Find(`[data-testid="status"]`).AttrOr("title", ""), c.want) {
			t.Errorf("session stopped by %s (%q): says %q (%s), badge %q", c.by, c.lang, why.Text(), v,
				doc.Find(`[data-testid="status"]`).AttrOr("title", ""))
		}
		if strings.Contains(page, "context canceled") {
			t.Errorf("session stopped by %s: the page shows a Go error", c.by)
		}
		// The call the stop cut says why in the reader's words, from the
		// code its model.finished carries, not the stored English text.
		cut := doc.Find(`.bar-model.error`)
		if cut.Length() != 1 || !strings.Contains(cut.AttrOr("aria-label", ""), c.want) ||
			(c.lang != "" && strings.Contains(cut.AttrOr("aria-label", ""), "the session was stopped")) {
			t.Errorf("session stopped by %s (%q): %d cut bars, saying %q", c.by, c.lang, cut.Length(), cut.AttrOr("aria-label", ""))
		}
	}
	for id, by := range map[string]string{byUser: delegation.StopUser, byShutdown: delegation.StopShutdown} {
		tr, err := s.db.Trace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var cut []string
		for _, c := range tr.ModelCalls {
			if c.StoppedBy != "" {
				cut = append(cut, c.ID+":"+c.StoppedBy)
			}
		}
		if len(cut) != 1 || !strings.HasSuffix(cut[0], ":"+by) {
			t.Errorf("session stopped by %s: calls cut %v, want one, cut by %s", by, cut, by)
		}
	}
}

// waitCalls waits until a session's log has started n model calls.
func (s *studio) waitCalls(id string, n int) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if tr, err := s.db.Trace(context.Background(), id); err == nil && len(tr.ModelCalls) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("session %s did not start %d model calls", id, n)
}
