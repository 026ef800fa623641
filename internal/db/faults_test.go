package db_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
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

func TestLockedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := db.OpenWith(context.Background(), path, db.Options{BusyTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := &session.Runner{DB: d}
	id, err := r.Start(context.Background(), slowScenario(t, 40, 15))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)

	// Another process takes the write lock and keeps it.
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	other.SetMaxOpenConns(1)
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	t.Run("a write says the database is locked and what to do", func(t *testing.T) {
		err := d.CreateSession(ctx, &db.Session{ID: "x", Name: "x", Scenario: json.RawMessage(`{}`)})
		if delegation.ErrorCode(err) != delegation.EUNAVAILABLE || !strings.Contains(err.Error(), "locked by another process") {
			t.Fatalf("err = %v", err)
		}
	})
	r.Wait() // the running session stops: its recorder could not write
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	other.Close()

	t.Run("what was committed before is whole, and the session is interrupted", func(t *testing.T) {
		n := checkPrefix(t, d, id)
		s, _ := d.Session(ctx, id)
		if n == 0 || s.Status != delegation.StatusRunning || s.LastSeq != int64(n) {
			t.Fatalf("%d events, status %s, last_seq %d", n, s.Status, s.LastSeq)
		}
		if k, _ := r.Recover(ctx); k != 1 {
			t.Fatalf("recovered %d", k)
		}
	})
}

func TestFullDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := db.OpenWith(context.Background(), path, db.Options{MaxPages: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := &session.Runner{DB: d}
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
