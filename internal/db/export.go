package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Trace exports a stored session as the trace of formats.md §2, read in one
// transaction so it is consistent while the session runs.
func (db *DB) Trace(ctx context.Context, id string) (*trace.Trace, error) {
	t, _, err := db.readTraceTx(ctx, id, true)
	return t, err
}

// ViewTrace reads a session for its pages: the whole trace but for the
// events no view reads — those a message or model call row already says
// (message.added, model.started, model.finished) and tool.started and
// tool.finished — so a long session's page does not re-read its whole log.
// It also returns the session's last seq, which the trimmed events do not
// show, for a live page to resume from.
func (db *DB) ViewTrace(ctx context.Context, id string) (*trace.Trace, int64, error) {
	return db.readTraceTx(ctx, id, false)
}

func (db *DB) readTraceTx(ctx context.Context, id string, fullLog bool) (*trace.Trace, int64, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("export session %s: %w", id, err)
	}
	defer tx.Rollback()
	t, lastSeq, err := readTrace(ctx, tx, id, fullLog)
	if err != nil {
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("export session %s: %w", id, err)
	}
	return t, lastSeq, nil
}

func readTrace(ctx context.Context, tx *sql.Tx, id string, fullLog bool) (*trace.Trace, int64, error) {
	r, err := openReader(ctx, tx, id)
	if err != nil {
		return nil, 0, err
	}
	h := r.Head()
	t := &trace.Trace{Format: trace.Format, Version: trace.Version, Session: h.Session, Scenario: h.Scenario,
		Files: map[string]string{}}
	if len(t.Scenario) == 0 {
		t.Scenario = json.RawMessage("{}")
	}
	if t.Agents, err = collect(r.Agents()); err != nil {
		return nil, 0, err
	}
	if t.Messages, err = collect(r.Messages()); err != nil {
		return nil, 0, err
	}
	if t.ModelCalls, err = collect(r.ModelCalls()); err != nil {
		return nil, 0, err
	}
	if fullLog {
		t.Events, err = collect(r.Events())
	} else {
		t.Events, err = readViewEvents(ctx, tx, r.sid)
	}
	if err != nil {
		return nil, 0, err
	}
	if t.Events == nil {
		t.Events = []delegation.Event{}
	}
	for f, err := range r.Files() {
		if err != nil {
			return nil, 0, err
		}
		t.Files[f.Path] = f.Content
	}
	return t, h.LastSeq, nil
}

// collect reads a whole part into memory; never nil.
func collect[T any](s iter.Seq2[T, error]) ([]T, error) {
	out := []T{}
	for v, err := range s {
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
