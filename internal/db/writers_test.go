package db_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/db/pgtest"
	"github.com/delegationstudio/studio/internal/delegation"
)

// TestWritersTakeTurns: two processes' stores on one database (two
// replicas on PostgreSQL; a server and `studio run --db` on a SQLite file)
// writing one session at once take turns: of two appends of the same next
// seq one is refused, and of two recoveries of a lapsed session one ends
// it; the log has each seq once.
func TestWritersTakeTurns(t *testing.T) {
	ctx := context.Background()
	for name, dsn := range map[string]func(t testing.TB) string{
		"sqlite":   func(t testing.TB) string { return filepath.Join(t.TempDir(), "studio.db") },
		"postgres": pgtest.DSN,
	} {
		t.Run(name, func(t *testing.T) {
			path := dsn(t)
			var stores [2]*db.DB
			for i := range stores {
				d, err := db.Open(ctx, path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
				stores[i] = d
			}
			at := time.Now().UTC()
			id := "shared"
			if err := stores[0].CreateSession(ctx, &db.Session{ID: id, Name: "n", CreatedAt: at, Owner: "gone", LeaseUntil: at.Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
			if err := stores[0].AppendEvents(ctx, id, []delegation.Event{
				{Seq: 1, Type: delegation.EventSessionStarted, At: at, Payload: delegation.SessionStarted{SessionID: id, Name: "n"}},
				{Seq: 2, Type: delegation.EventAgentStarted, AgentID: "main", At: at, Payload: delegation.AgentStarted{Agent: delegation.AgentInfo{ID: "main", Name: "main"}}},
			}); err != nil {
				t.Fatal(err)
			}
			both := func(fn func(d *db.DB) error) [2]error {
				var errs [2]error
				var wg sync.WaitGroup
				for i, d := range stores {
					wg.Go(func() { errs[i] = fn(d) })
				}
				wg.Wait()
				return errs
			}
			errs := both(func(d *db.DB) error {
				return d.AppendEvents(ctx, id, []delegation.Event{{Seq: 3, Type: delegation.EventDelegationRefused, AgentID: "main", At: at,
					Payload: delegation.DelegationRefused{ToolCallID: "c", Reason: "nested"}}})
			})
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Fatalf("two appends of seq 3 at once: %v, %v; want one stored and one refused", errs[0], errs[1])
			}
			for _, err := range errs {
				if err != nil && delegation.ErrorCode(err) != delegation.ECONFLICT {
					t.Fatalf("the refused append: %v, want ECONFLICT", err)
				}
			}
			var ended [2][]string
			errs = both(func(d *db.DB) error {
				i := 0
				if d == stores[1] {
					i = 1
				}
				var err error
				ended[i], err = d.Recover(ctx)
				return err
			})
			if errs[0] != nil || errs[1] != nil || len(ended[0])+len(ended[1]) != 1 {
				t.Fatalf("two recoveries at once ended %v and %v (%v, %v); want the session ended once", ended[0], ended[1], errs[0], errs[1])
			}
			tr, err := stores[1].Trace(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for i, ev := range tr.Events {
				if ev.Seq != int64(i+1) {
					t.Fatalf("event %d has seq %d: the log has a gap or a seq twice", i, ev.Seq)
				}
			}
			if last := tr.Events[len(tr.Events)-1]; last.Type != delegation.EventSessionFinished || len(tr.Events) != 5 {
				t.Fatalf("the log ends with %s after %d events; want agent.finished, session.finished once, 5 events", last.Type, len(tr.Events))
			}
		})
	}
}
