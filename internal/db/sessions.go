package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Session is a stored session's summary.
type Session struct {
	ID          string
	Name        string
	Title       string
	Prompt      string
	Status      string
	Error       string
	Tokenizer   string
	Scenario    json.RawMessage
	CreatedAt   time.Time
	FinishedAt  *time.Time
	LastSeq     int64
	Agents      int
	ModelCalls  int
	InputTokens int
}

// CreateSession stores a new, running session before its first event.
func (db *DB) CreateSession(ctx context.Context, s *Session) error {
	if s.CreatedAt.IsZero() {
		s.CreatedAt = db.Now()
	}
	if s.Status == "" {
		s.Status = delegation.StatusRunning
	}
	return db.tx(ctx, func(tx *sql.Tx) error {
		_, err := createSession(ctx, tx, s)
		return err
	})
}

// createSession inserts a session and returns its integer key.
func createSession(ctx context.Context, tx *sql.Tx, s *Session) (int64, error) {
	var finished sql.NullInt64
	if s.FinishedAt != nil {
		finished = sql.NullInt64{Int64: nanos(*s.FinishedAt), Valid: true}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO sessions
		(id, name, title, prompt, status, error, tokenizer, scenario, created_at, finished_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Name, s.Title, s.Prompt, s.Status, s.Error, s.Tokenizer, packJSON(s.Scenario), nanos(s.CreatedAt), finished)
	if err != nil {
		return 0, fmt.Errorf("create session %s: %w", s.ID, err)
	}
	return res.LastInsertId()
}

// sid finds a session's integer key.
func sid(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (int64, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT sid FROM sessions WHERE id = ?`, id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	return n, err
}

const sessionColumns = `id, name, title, prompt, status, error, tokenizer, scenario, created_at, finished_at,
	last_seq, agents, model_calls, input_tokens`

type scanner interface{ Scan(...any) error }

func scanSession(row scanner) (*Session, error) {
	var s Session
	var scen []byte
	var created int64
	var finished sql.NullInt64
	if err := row.Scan(&s.ID, &s.Name, &s.Title, &s.Prompt, &s.Status, &s.Error, &s.Tokenizer, &scen,
		&created, &finished, &s.LastSeq, &s.Agents, &s.ModelCalls, &s.InputTokens); err != nil {
		return nil, err
	}
	doc, err := unpackJSON(scen)
	if err != nil {
		return nil, fmt.Errorf("session %s scenario: %w", s.ID, err)
	}
	s.Scenario = json.RawMessage(doc)
	s.CreatedAt = fromNanos(created)
	if finished.Valid {
		t := fromNanos(finished.Int64)
		s.FinishedAt = &t
	}
	return &s, nil
}

// Session returns a stored session; a missing one is an ENOTFOUND error.
func (db *DB) Session(ctx context.Context, id string) (*Session, error) {
	s, err := scanSession(db.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	return s, nil
}

// Sessions lists sessions, newest first, at most limit (0: all).
func (db *DB) Sessions(ctx context.Context, limit int) ([]Session, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions ORDER BY created_at DESC, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, *s)
	}
	return out, rows.Err()
}

// MarkInterrupted marks every session still running as interrupted: at
// start-up, those are sessions a crash or a kill left behind. Their events
// stay as they were committed.
func (db *DB) MarkInterrupted(ctx context.Context) (int64, error) {
	var n int64
	err := db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET status = 'interrupted', error = ?
			WHERE status = 'running'`, "the studio stopped while this session was running")
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("mark interrupted sessions: %w", err)
	}
	return n, nil
}

// DeleteSession deletes a session and everything it holds.
func (db *DB) DeleteSession(ctx context.Context, id string) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete session %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
		}
		return nil
	})
}
