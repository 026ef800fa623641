package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Import stores a trace checked by trace.Parse as a new session with id,
// in one transaction: all of it or nothing. Its log is appended as a live
// session's is (appendSteps), each event with what it introduced; then what
// the trace says that its log does not is written: the main agent's files
// at the end (its files section) and, for a log that never ended, the
// session's and its agents' statuses. A session that was running when it
// was exported is stored as interrupted: nothing runs it here.
func (db *DB) Import(ctx context.Context, id string, t *trace.Trace) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		s := &Session{ID: id, Name: t.Session.Name, Title: t.Session.Title, Prompt: t.Session.Prompt,
			Status: delegation.StatusRunning, Tokenizer: t.Session.Tokenizer, Scenario: t.Scenario, CreatedAt: t.Session.CreatedAt}
		if _, err := createSession(ctx, tx, s); err != nil {
			return err
		}
		h, err := db.readHead(ctx, tx, id)
		if err != nil {
			return err
		}
		a, err := newAppender(ctx, tx, h)
		if err != nil {
			return err
		}
		defer a.close()
		for st, err := range trace.SourceOf(t).Log() {
			if err != nil {
				return err
			}
			if err := a.add(st); err != nil {
				return err
			}
		}
		if err := a.done(); err != nil {
			return err
		}
		return importEnd(ctx, tx, a, t)
	})
	if err != nil {
		return fmt.Errorf("import session: %w", err)
	}
	return nil
}

// importEnd writes what a trace says beside its log: the main agent's files
// at the end, and the statuses of a log that did not end.
func importEnd(ctx context.Context, tx *sql.Tx, a *appender, t *trace.Trace) error {
	// The files the log left, against the trace's.
	left := map[string]int64{}
	rows, err := tx.QueryContext(ctx, `SELECT path, content FROM files WHERE sid = ? AND agent_id = ?`, a.h.sid, trace.MainAgent)
	if err != nil {
		return err
	}
	for rows.Next() {
		var p string
		var n int64
		if err := rows.Scan(&p, &n); err != nil {
			rows.Close()
			return err
		}
		left[p] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range trace.SortedPaths(t.Files) {
		want := t.Files[p]
		if n, ok := left[p]; ok {
			delete(left, p)
			if got, err := fullContent(ctx, tx, a.h.sid, n); err != nil {
				return err
			} else if got == want {
				continue
			}
		}
		n, err := a.files.put(trace.MainAgent, p, want, "", nil)
		if err != nil {
			return err
		}
		if err := a.files.set(trace.MainAgent, p, n); err != nil {
			return err
		}
	}
	for p := range left {
		if err := a.files.remove(trace.MainAgent, p); err != nil {
			return err
		}
	}
	// A log that never ended (a crash before its end was recorded) has
	// the statuses the trace gives.
	status := t.Session.Status
	if status == delegation.StatusRunning {
		status = delegation.StatusInterrupted
	}
	var finished any
	if t.Session.FinishedAt != nil {
		finished = nanos(*t.Session.FinishedAt)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET status = ?, error = ?, finished_at = coalesce(finished_at, ?)
		WHERE sid = ? AND status = 'running'`, status, t.Session.Error, finished, a.h.sid); err != nil {
		return err
	}
	for _, ag := range t.Agents {
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET status = ?, error = ?, steps = ? WHERE sid = ? AND id = ?
			AND (status <> ? OR error <> ? OR steps <> ?)`, ag.Status, ag.Error, ag.Steps, a.h.sid, ag.ID, ag.Status, ag.Error, ag.Steps); err != nil {
			return err
		}
	}
	return nil
}
