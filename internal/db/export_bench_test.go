package db_test

import (
	"context"
	"database/sql"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// BenchmarkExport100k exports a session of 100,000 messages
// (benchdata.Messages, its main agent summarized 13 times) as its trace
// and as OTLP/JSON, and reads the same session's rows with plain SELECTs
// beside them, in turns: each export's CPU time ÷ the rows' (the fastest
// of b.N of each). Target (issue 30): both ≤ 5.
func BenchmarkExport100k(b *testing.B) {
	d, id := exportSession(b, 100_000)
	raw, err := sql.Open("sqlite", "file:"+d.Path()+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	exportTrace := func() error {
		return d.Read(ctx, id, func(r db.Reader) error { return trace.Write(io.Discard, r, false) })
	}
	exportOTLP := func() error {
		return d.Read(ctx, id, func(r db.Reader) error {
			_, err := otlp.WriteJSON(io.Discard, r, otlp.Options{})
			return err
		})
	}
	read := func() error { return readRows(ctx, raw, id) }
	var rows, tr, ot time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows = fastest(b, rows, read)
		tr = fastest(b, tr, exportTrace)
		ot = fastest(b, ot, exportOTLP)
	}
	b.ReportMetric(float64(rows.Microseconds())/1000, "read-ms")
	b.ReportMetric(float64(tr.Microseconds())/1000, "trace-ms")
	b.ReportMetric(float64(ot.Microseconds())/1000, "otlp-ms")
	b.ReportMetric(float64(tr)/float64(rows), "trace/read")
	b.ReportMetric(float64(ot)/float64(rows), "otlp/read")
}

// exportSession runs benchdata.Messages(n) into a new store.
func exportSession(b *testing.B, n int) (*db.DB, string) {
	b.Helper()
	sc, err := scenario.Parse(benchdata.Messages(n))
	if err != nil {
		b.Fatal(err)
	}
	d, err := db.Open(context.Background(), filepath.Join(b.TempDir(), "studio.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	id, res, err := (&session.Runner{DB: d}).Run(context.Background(), sc)
	if err != nil || res.Status != delegation.StatusDone {
		b.Fatalf("run: %v %+v", err, res)
	}
	if err := d.Checkpoint(context.Background()); err != nil {
		b.Fatal(err)
	}
	return d, id
}

// fastest runs fn and returns the lesser of best (0: none yet) and the
// process CPU time fn took.
func fastest(b *testing.B, best time.Duration, fn func() error) time.Duration {
	b.Helper()
	start := cpuTime(b)
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	took := cpuTime(b) - start
	if best == 0 || took < best {
		return took
	}
	return best
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readRows reads every column of every row of a session, table by table,
// in one read transaction: what an export cannot do with less.
func readRows(ctx context.Context, raw *sql.DB, id string) error {
	tx, err := raw.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var sid int64
	if err := tx.QueryRowContext(ctx, `SELECT sid FROM sessions WHERE id = ?`, id).Scan(&sid); err != nil {
		return err
	}
	for _, table := range []string{"sessions", "session_scenarios", "agents", "messages", "model_calls", "log", "log_tail",
		"contents", "files"} {
		if err := readTable(ctx, tx, table, sid); err != nil {
			return err
		}
	}
	return nil
}

// readTable reads every column of a table's rows of a session.
func readTable(ctx context.Context, tx *sql.Tx, table string, sid int64) error {
	rows, err := tx.QueryContext(ctx, `SELECT * FROM `+table+` WHERE sid = ?`, sid)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
	}
	return rows.Err()
}
