package db_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// turnsScenario is a main agent of n tool-call turns whose last delegates to
// a fork child of a few turns.
func turnsScenario(tb testing.TB, n int) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Parse(benchdata.TurnsScenario(n, 0, 0))
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// BenchmarkStorage2000Turns reports the database's size against the raw
// size of the messages it holds. Target: ≤ 2.
func BenchmarkStorage2000Turns(b *testing.B) {
	sc := turnsScenario(b, 2000)
	var ratio float64
	for i := 0; i < b.N; i++ {
		path := filepath.Join(b.TempDir(), "studio.db")
		d, err := db.Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		r := &session.Runner{DB: d}
		id, res, err := r.Run(context.Background(), sc)
		if err != nil || res.Status != delegation.StatusDone {
			b.Fatalf("run: %v %+v", err, res)
		}
		tr, err := d.Trace(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		raw := 0
		for _, m := range tr.Messages {
			j, _ := json.Marshal(m)
			raw += len(j)
		}
		if err := d.Checkpoint(context.Background()); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		d.Close()
		ratio = float64(st.Size()) / float64(raw)
		b.ReportMetric(float64(len(tr.Messages)), "messages")
		b.ReportMetric(float64(raw), "raw-message-bytes")
		b.ReportMetric(float64(st.Size()), "db-bytes")
	}
	b.ReportMetric(ratio, "db/raw")
}

// BenchmarkIngest compares events per second through the recorder (events,
// messages, model calls, agents, files) with a plain batched INSERT of the
// same event rows. Target: ≥ 50 % of the plain rate. Each iteration times
// both; the rates are from each side's fastest iteration, since a shared
// machine's noise only ever adds time.
func BenchmarkIngest(b *testing.B) {
	sc := turnsScenario(b, 500)
	// The recorder gets events as the engine emits them (it encodes them
	// itself, and that is timed); the plain INSERT gets the encoded rows.
	var fromEngine, events []delegation.Event
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "src",
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				fromEngine = append(fromEngine, e)
				_ = e.Encode()
				events = append(events, e)
			}
		})}); err != nil {
		b.Fatal(err)
	}
	ours, plain := time.Duration(1<<62), time.Duration(1<<62)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		d, err := db.Open(context.Background(), filepath.Join(dir, "studio.db"))
		if err != nil {
			b.Fatal(err)
		}
		if err := d.CreateSession(context.Background(), &db.Session{ID: "s", Name: "x", Scenario: sc.Raw}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rec := session.NewRecorder(d, "s", nil, nil, nil, nil)
		for _, ev := range fromEngine {
			rec.Emit(ev)
		}
		if err := rec.Close(); err != nil {
			b.Fatal(err)
		}
		ours = min(ours, time.Since(start))
		d.Close()

		p, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "plain.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		if err != nil {
			b.Fatal(err)
		}
		p.SetMaxOpenConns(1)
		if _, err := p.Exec(`CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, agent_id TEXT, at INTEGER, data TEXT, PRIMARY KEY (session_id, seq)) WITHOUT ROWID`); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		for lo := 0; lo < len(events); lo += 512 {
			tx, _ := p.Begin()
			st, _ := tx.Prepare(`INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)`)
			for _, ev := range events[lo:min(lo+512, len(events))] {
				if _, err := st.Exec("s", ev.Seq, string(ev.Type), ev.AgentID, ev.At.UnixNano(), string(ev.Data)); err != nil {
					b.Fatal(err)
				}
			}
			st.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		plain = min(plain, time.Since(start))
		p.Close()
	}
	n := float64(len(events))
	b.ReportMetric(n/ours.Seconds(), "events/s")
	b.ReportMetric(n/plain.Seconds(), "plain-events/s")
	b.ReportMetric(plain.Seconds()/ours.Seconds(), "ours/plain")
}
