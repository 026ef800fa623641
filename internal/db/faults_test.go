package db_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// checkPrefix asserts a session's stored log is whole up to where it
// stopped: seq 1, 2, 3… with nothing half-written.
func checkPrefix(t *testing.T, d *db.DB, id string) int {
	t.Helper()
	if ok, err := d.IntegrityCheck(context.Background()); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
	events, err := d.EventsAfter(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	if _, err := d.Trace(context.Background(), id); err != nil {
		t.Fatalf("what was stored does not export: %v", err)
	}
	return len(events)
}

func slowScenario(t *testing.T, turns int, delay int) *scenario.Scenario {
	var list []string
	for i := 0; i < turns; i++ {
		list = append(list, fmt.Sprintf(`{"content": "step %d with some words to store", "delay_ms": %d, "tool_calls": [{"name": "write_file", "args": {"file_path": "/f%d.md", "content": "%s"}}]}`, i, delay, i, strings.Repeat("data ", 200)))
	}
	doc := `{"name": "slow", "prompt": "go", "agent": {"max_steps": 1000}, "script": {"main": [` + strings.Join(list, ",") + `, {"content": "done"}]}}`
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// holdWriteLock takes the database's write lock from another connection, as
// a second process (a `studio import`) or a sqlite3 shell would, and
// writes; release commits and gives the lock back.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	// A commit that lands while the studio's transaction waits makes what
	// a deferred transaction read stale: it could then only fail.
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS other_writer (x); INSERT INTO other_writer VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
			conn.Close()
			other.Close()
		})
	}
	t.Cleanup(release)
	return release
}

func TestLockedDatabase(t *testing.T) {
	ctx := context.Background()

	t.Run("a write waits out another process's short hold, and the session records whole", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "studio.db")
		d, err := db.Open(ctx, path) // the studio's own 10 s busy timeout
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		m := newGatedModel()
		r := &session.Runner{DB: d, ModelFor: m.forScenario}
		id, err := r.Start(ctx, heldScenario(t))
		if err != nil {
			t.Fatal(err)
		}
		<-m.blocked
		waitRow(t, d, id, func(s *db.Session) bool { return s.ModelCalls == 2 })
		release := holdWriteLock(t, path)
		close(m.release)
		// The second call's events are out: the recorder is writing them
		// and meets the lock. Give it back well within the busy timeout.
		<-m.third
		release()
		r.Wait()
		s, _ := d.Session(ctx, id)
		if s.Status != delegation.StatusDone {
			t.Fatalf("status %s (%s); want done: a short lock must not stop the recording", s.Status, s.Error)
		}
		checkPrefix(t, d, id)
	})

	t.Run("past the busy timeout a write says the database is locked and what to do", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "studio.db")
		d, err := db.OpenWith(ctx, path, db.Options{BusyTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		holdWriteLock(t, path)
		err = d.CreateSession(ctx, &db.Session{ID: "x", Name: "x", Scenario: json.RawMessage(`{}`)})
		if delegation.ErrorCode(err) != delegation.EUNAVAILABLE || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("a session whose store failed ends as failed, saying why, once the store takes writes again", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "studio.db")
		d, err := db.OpenWith(ctx, path, db.Options{BusyTimeout: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		m := newGatedModel()
		logs := newLogWatch("recording stopped")
		r := &session.Runner{DB: d, ModelFor: m.forScenario, Logger: slog.New(logs)}
		id, err := r.Start(ctx, heldScenario(t))
		if err != nil {
			t.Fatal(err)
		}
		<-m.blocked
		before := waitRow(t, d, id, func(s *db.Session) bool { return s.ModelCalls == 2 })
		release := holdWriteLock(t, path)
		close(m.release)
		<-logs.seen // the recorder gave up: the lock outlasted its busy timeout and retries
		if s, _ := d.Session(ctx, id); s.Status != delegation.StatusRunning {
			t.Fatalf("status %s while the lock is held; want still running", s.Status)
		}
		release()
		r.Wait()
		s, _ := d.Session(ctx, id)
		if s.Status != delegation.StatusFailed || !strings.Contains(s.Error, "locked by another process") {
			t.Fatalf("status %s (%q); want failed, saying the database was locked", s.Status, s.Error)
		}
		if n := checkPrefix(t, d, id); int64(n) <= before.LastSeq {
			t.Fatalf("%d events; want the closing events after the %d committed before", n, before.LastSeq)
		}
		tr, _ := d.Trace(ctx, id)
		if a := tr.Agents[0]; a.Status != delegation.StatusFailed {
			t.Fatalf("main is %s; want failed", a.Status)
		}
	})
}

func heldScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(`{"name": "held", "prompt": "go", "script": {"main": [{"content": "unused: the test plays the model"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// logWatch is a slog handler that closes seen at the first record whose
// message is msg.
type logWatch struct {
	msg  string
	once *sync.Once
	seen chan struct{}
}

func newLogWatch(msg string) logWatch {
	return logWatch{msg: msg, once: &sync.Once{}, seen: make(chan struct{})}
}

func (w logWatch) Enabled(context.Context, slog.Level) bool { return true }
func (w logWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg {
		w.once.Do(func() { close(w.seen) })
	}
	return nil
}
func (w logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w logWatch) WithGroup(string) slog.Handler      { return w }

func TestFullDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := db.OpenWith(context.Background(), path, db.Options{MaxPages: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// One event a transaction, so that what fits before the file is full
	// does not depend on how the recorder's batches fell.
	r := &session.Runner{DB: d, MaxBatch: 1, StoreRetry: time.Millisecond}
	id, res, err := r.Run(context.Background(), slowScenario(t, 300, 0))
	if err == nil || !strings.Contains(err.Error(), "is full") {
		t.Fatalf("run: %v (%+v)", err, res)
	}
	n := checkPrefix(t, d, id)
	if n == 0 {
		t.Fatal("nothing was kept before the disk filled")
	}
	t.Logf("%d events kept before the database filled: %v", n, err)
}
