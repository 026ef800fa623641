package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/delegationstudio/studio/internal/db/pgtest"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/retryafter"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestLoad runs sessions with delays concurrently, watched by websocket
// viewers that join at random moments, on loopback, bounded in count and
// time, beside other people's agents: programs calling their model through
// the recording endpoint, streaming, and OpenTelemetry exporters sending
// their traces. Every viewer must get every event of its session exactly
// once, in order; every agent's every answer whole, and each recorded in
// its session; every trace's every model call stored. make test runs it
// small; make load runs it at 50 sessions, 200 viewers, 50 agents, 20
// exporters, 60 s (STUDIO_LOAD_SESSIONS, STUDIO_LOAD_VIEWERS,
// STUDIO_LOAD_AGENTS, STUDIO_LOAD_EXPORTERS, STUDIO_LOAD_SECONDS).
func TestLoad(t *testing.T) {
	cfg := Config{Upstream: loadUpstream(t)}
	s := startStudioWith(t, cfg)
	s.t = t
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); loadAgents(t, []*studio{s}) }()
	go func() { defer wg.Done(); loadExporters(t, []*studio{s}) }()
	load(t, []*studio{s})
	wg.Wait()
}

// TestLoadReplicas is TestLoad on two studios sharing one PostgreSQL
// database: sessions spread over both, and so do their viewers, each of
// which watches its session on either replica, and the agents and
// exporters, each on one (make load runs it at the same size as TestLoad).
func TestLoadReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	cfg := Config{Upstream: loadUpstream(t)}
	studios := []*studio{startStudioOn(t, dsn, cfg), startStudioOn(t, dsn, cfg)}
	for _, s := range studios {
		s.t = t
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); loadAgents(t, studios) }()
	go func() { defer wg.Done(); loadExporters(t, studios) }()
	load(t, studios)
	wg.Wait()
}

// load runs TestLoad's sessions on the studios given, the i-th session on
// studio i mod n, each viewer on a studio picked at random.
func load(t *testing.T, studios []*studio) {
	sessions := envInt("STUDIO_LOAD_SESSIONS", 8)
	viewersPer := max(1, envInt("STUDIO_LOAD_VIEWERS", 24)/sessions)
	seconds := envInt("STUDIO_LOAD_SECONDS", 4)

	var turns []string
	for i := 0; i < 12; i++ {
		turns = append(turns, fmt.Sprintf(`{"content": "step %d", "delay_ms": %d, "tool_calls": [{"name": "task", "args": {"description": "look at part %d", "subagent_type": "general-purpose"}}]}`, i, 40+i*10, i))
	}
	var child []string
	for i := 0; i < 12; i++ {
		child = append(child, `[{"content": "part done", "delay_ms": 60}]`)
	}
	scenario := `{"name": "load", "prompt": "go", "script": {"main": [` + strings.Join(turns, ",") + `, {"content": "done"}], "general-purpose": [` + strings.Join(child, ",") + `]}}`

	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds+60)*time.Second)
	defer cancel()
	var started, viewed, events, backedOff atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for w := 0; w < sessions; w++ {
		wg.Add(1)
		s := studios[w%len(studios)]
		go func() {
			defer wg.Done()
			// Each worker starts one session at least, however long it is
			// told to wait.
			for mine := 0; (time.Now().Before(deadline) || mine == 0) && ctx.Err() == nil; mine++ {
				res, body := s.api("POST", "/api/sessions", "application/json", []byte(scenario))
				if pushedBack(res) {
					// A busy studio says when to come back; its clients
					// do, and so does this one.
					backedOff.Add(1)
					if !backOff(ctx, res.Header) {
						return
					}
					mine--
					continue
				}
				var created struct{ ID string }
				if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
					errs <- fmt.Errorf("start: %d %s", res.StatusCode, body)
					return
				}
				started.Add(1)
				var vg sync.WaitGroup
				for v := 0; v < viewersPer; v++ {
					vg.Add(1)
					go func() {
						defer vg.Done()
						time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
						on := studios[rand.IntN(len(studios))]
						n, err := watch(ctx, "ws"+strings.TrimPrefix(on.ts.URL, "http")+"/api/sessions/"+created.ID+"/live?after=0", &backedOff)
						if err != nil {
							errs <- fmt.Errorf("session %s: %w", created.ID, err)
							return
						}
						sess, err := s.db.Session(ctx, created.ID)
						if err != nil || sess.LastSeq != n {
							errs <- fmt.Errorf("session %s: a viewer got %d events, the log has %d", created.ID, n, sess.LastSeq)
							return
						}
						viewed.Add(1)
						events.Add(n)
					}()
				}
				vg.Wait()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d sessions on %d studios, %d viewers each saw every event of their session exactly once (%d events in all); %d requests were told to come back later, and did",
		started.Load(), len(studios), viewed.Load(), events.Load(), backedOff.Load())
	if started.Load() < int64(sessions) || viewed.Load() < started.Load()*int64(viewersPer) {
		t.Fatalf("started %d sessions, %d views", started.Load(), viewed.Load())
	}
}

// pushedBack reports a refusal for now: 503 or 429, which say when to come
// back (Retry-After).
func pushedBack(res *http.Response) bool {
	return res != nil && (res.StatusCode == http.StatusServiceUnavailable || res.StatusCode == http.StatusTooManyRequests)
}

// backOff waits what the refusal's Retry-After says (a second when it says
// nothing readable; at most 30), or until ctx ends: false then.
func backOff(ctx context.Context, h http.Header) bool {
	d, ok := retryafter.Parse(h, time.Now(), 30*time.Second)
	if !ok {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// watch reads a session's live socket until session.finished and checks the
// seqs run 1, 2, 3… with no gap and no duplicate; it returns the last. A
// viewer refused for now (too many viewers) comes back when told to, and
// is counted in backedOff.
func watch(ctx context.Context, url string, backedOff *atomic.Int64) (int64, error) {
	conn, res, err := websocket.Dial(ctx, url, nil)
	for err != nil && pushedBack(res) {
		backedOff.Add(1)
		if !backOff(ctx, res.Header) {
			return 0, err
		}
		conn, res, err = websocket.Dial(ctx, url, nil)
	}
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 24)
	var last int64
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return last, fmt.Errorf("after seq %d: %w", last, err)
		}
		// A message holds one event, or a burst of them, one a line.
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev struct {
				Seq  int64  `json:"seq"`
				Type string `json:"type"`
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				return last, err
			}
			if ev.Seq == 0 {
				continue
			}
			if ev.Seq != last+1 {
				return last, fmt.Errorf("seq %d after %d: a gap or a duplicate", ev.Seq, last)
			}
			last = ev.Seq
			if ev.Type == string(delegation.EventSessionFinished) {
				return last, nil
			}
		}
	}
}
