package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/db/pgtest"
	"github.com/delegationstudio/studio/internal/delegation"
)

// startReplicas starts n studios on one PostgreSQL database, as a load
// balancer would have them (skipped without a test server: pgtest).
func startReplicas(t testing.TB, n int) []*studio {
	t.Helper()
	dsn := pgtest.DSN(t)
	out := make([]*studio, n)
	for i := range out {
		out[i] = startStudioOn(t, dsn, Config{})
		out[i].t, _ = t.(*testing.T)
	}
	return out
}

// slowScenario runs long enough for viewers to join and leave while it
// runs: turns that delegate, with delays.
func slowScenario(turns int, delayMS int) string {
	var main, child []string
	for i := range turns {
		main = append(main, fmt.Sprintf(`{"content": "step %d", "delay_ms": %d, "tool_calls": [{"name": "task", "args": {"description": "look at part %d", "subagent_type": "general-purpose"}}]}`, i, delayMS, i))
		child = append(child, fmt.Sprintf(`[{"content": "part done", "delay_ms": %d}]`, delayMS))
	}
	return `{"name": "replicas", "prompt": "go", "script": {"main": [` + strings.Join(main, ",") + `, {"content": "done"}], "general-purpose": [` + strings.Join(child, ",") + `]}}`
}

// start starts a session through the API and returns its id.
func (s *studio) start(t testing.TB, scenario string) string {
	t.Helper()
	res, err := s.c.Post(s.ts.URL+"/api/sessions", "application/json", strings.NewReader(scenario))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("start: %d %s", res.StatusCode, body)
	}
	return created.ID
}

func (s *studio) liveURL(id string, after int64) string {
	return fmt.Sprintf("ws%s/api/sessions/%s/live?after=%d", strings.TrimPrefix(s.ts.URL, "http"), id, after)
}

// watchUntil reads a session's live socket from after, checking that seqs
// follow one by one, until stop says so or session.finished; it returns the
// last seq read and whether the session finished.
func watchUntil(ctx context.Context, url string, after int64, stop func(seq int64) bool) (int64, bool, error) {
	conn, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return after, false, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 24)
	last := after
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return last, false, fmt.Errorf("after seq %d: %w", last, err)
		}
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev struct {
				Seq  int64  `json:"seq"`
				Type string `json:"type"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				return last, false, err
			}
			if ev.Seq == 0 {
				continue
			}
			if ev.Seq != last+1 {
				return last, false, fmt.Errorf("seq %d after %d: a gap or a duplicate", ev.Seq, last)
			}
			last = ev.Seq
			if ev.Type == string(delegation.EventSessionFinished) {
				conn.Close(websocket.StatusNormalClosure, "")
				return last, true, nil
			}
			if stop(last) {
				conn.Close(websocket.StatusNormalClosure, "")
				return last, false, nil
			}
		}
	}
}

// TestReplicasLive: a session run on replica A, watched on replica B, has
// every event exactly once, in order; a viewer that reconnects, to either
// replica, resumes where it left off.
func TestReplicasLive(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel) // after the parallel subtests
	id := a.start(t, slowScenario(12, 60))

	t.Run("a viewer on B sees A's session whole", func(t *testing.T) {
		t.Parallel()
		last, finished, err := watchUntil(ctx, b.liveURL(id, 0), 0, func(int64) bool { return false })
		if err != nil || !finished {
			t.Fatalf("viewer on B: last seq %d, finished %v: %v", last, finished, err)
		}
		if s, err := b.db.Session(ctx, id); err != nil || s.LastSeq != last {
			t.Fatalf("viewer on B got through seq %d; the log has %v (%v)", last, s, err)
		}
	})
	t.Run("a viewer that moves between replicas resumes", func(t *testing.T) {
		t.Parallel()
		var last int64
		hops := 0
		for finished := false; !finished; hops++ {
			to := []*studio{b, a}[hops%2]
			from := last
			var err error
			last, finished, err = watchUntil(ctx, to.liveURL(id, last), last, func(seq int64) bool { return seq >= from+7 })
			if err != nil {
				t.Fatalf("hop %d (to %s): %v", hops, to.ts.URL, err)
			}
		}
		if s, err := a.db.Session(ctx, id); err != nil || s.LastSeq != last {
			t.Fatalf("moving viewer got through seq %d; the log has %v (%v)", last, s, err)
		}
		if hops < 3 {
			t.Fatalf("only %d connections: the session ended before the viewer could move", hops)
		}
	})
}

// TestReplicasLeases: a replica's recovery ends the sessions of a replica
// that died, once their lease ran out, and never one another live replica
// runs.
func TestReplicasLeases(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	ctx := context.Background()
	id := a.start(t, slowScenario(40, 50))
	dead := &db.Session{ID: "dead-replicas-session", Name: "left", Status: delegation.StatusRunning, Scenario: []byte(`{}`),
		Owner: "a-replica-that-died", LeaseUntil: time.Now().Add(-time.Second)}
	if err := b.db.CreateSession(ctx, dead); err != nil {
		t.Fatal(err)
	}
	n, err := b.srv.Recover(ctx)
	if err != nil || n != 1 {
		t.Fatalf("recovered %d (%v), want the dead replica's one", n, err)
	}
	if s, _ := a.db.Session(ctx, dead.ID); s.Status != delegation.StatusInterrupted {
		t.Fatalf("the dead replica's session is %s", s.Status)
	}
	if s, _ := a.db.Session(ctx, id); s.Status != delegation.StatusRunning || !a.srv.Runner().Running(id) {
		t.Fatalf("A's session is %s after B's recovery", s.Status)
	}
	a.srv.Runner().Cancel(id)
	a.waitDone(id)
}

// TestReplicasPageAndStop: behind a load balancer, one browser's requests
// go to either replica. B's page of a session A runs is live and can stop
// it; a form drawn by A is taken by B.
func TestReplicasPageAndStop(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	b.c = a.c // one browser: its cookies go to both (a jar ignores ports)
	id := a.start(t, slowScenario(200, 50))
	_, page := b.get("/sessions/" + id)
	if page.Find(".session[data-running]").Length() != 1 || page.Find("form#stop").Length() != 1 {
		t.Fatal("B's page of A's running session is not live, or cannot stop it")
	}
	_, drawn := a.get("/sessions/" + id)
	token, _ := drawn.Find(`form#stop input[name="_csrf"]`).Attr("value")
	res, err := b.c.PostForm(b.ts.URL+"/sessions/"+id+"/stop", url.Values{"_csrf": {token}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 303 {
		t.Fatalf("stop on B with A's form: %d", res.StatusCode)
	}
	a.waitDone(id)
	if s, _ := b.db.Session(context.Background(), id); s.Status != delegation.StatusInterrupted {
		t.Fatalf("after a stop on B, A's session is %s", s.Status)
	}
}

// TestReplicasForget: a replica keeps the page state of a session another
// runs only while it has viewers of it there.
func TestReplicasForget(t *testing.T) {
	rs := startReplicas(t, 2)
	a, b := rs[0], rs[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := a.start(t, slowScenario(30, 40))
	followed := func() int {
		return b.srv.replicas.Followed()
	}
	// A viewer on B watches a while, then leaves.
	if _, _, err := watchUntil(ctx, b.liveURL(id, 0), 0, func(seq int64) bool { return seq >= 20 && followed() == 1 }); err != nil {
		t.Fatal(err)
	}
	for followed() != 0 {
		if ctx.Err() != nil {
			t.Fatalf("B still keeps the state of %d sessions nobody watches there", followed())
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.srv.Runner().Cancel(id)
	a.waitDone(id)
}
