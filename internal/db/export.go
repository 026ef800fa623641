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
// transaction so it is consistent while the session runs. It holds the
// whole session in memory: exports stream from Read instead (trace.Write).
func (db *DB) Trace(ctx context.Context, id string) (*trace.Trace, error) {
	var t *trace.Trace
	err := db.Read(ctx, id, func(r Reader) error {
		var err error
		t, err = readTrace(r)
		return err
	})
	if err != nil {
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return nil, err
		}
		return nil, fmt.Errorf("export session %s: %w", id, err)
	}
	return t, nil
}

// readTrace reads a whole session as its trace.
func readTrace(r Reader) (*trace.Trace, error) {
	h := r.Head()
	t := &trace.Trace{Format: trace.Format, Version: trace.Version, Session: h.Session, Scenario: h.Scenario,
		Files: map[string]string{}}
	if len(t.Scenario) == 0 {
		t.Scenario = json.RawMessage("{}")
	}
	var err error
	if t.Agents, err = collect(r.Agents()); err != nil {
		return nil, err
	}
	if t.Messages, err = collect(r.Messages()); err != nil {
		return nil, err
	}
	if t.ModelCalls, err = collect(r.ModelCalls()); err != nil {
		return nil, err
	}
	if t.Events, err = collect(r.Events()); err != nil {
		return nil, err
	}
	for f, err := range r.Files() {
		if err != nil {
			return nil, err
		}
		t.Files[f.Path] = f.Content
	}
	return t, nil
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

// EventsAfter returns a session's events with seq > after, in order, at most
// limit (0: all), as the trace keeps them.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]delegation.Event, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	r, err := openReader(ctx, tx, sessionID, db.dialect())
	if err != nil {
		return nil, err
	}
	var out []delegation.Event
	for st, err := range r.log(after, false) {
		if err != nil {
			return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
		}
		out = append(out, st.Event)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
