package db

import (
	"cmp"
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
	// Origin is where the session came from: delegation.OriginEngine,
	// OriginOTLP or OriginProxy (its session.started says more).
	Origin string
	// Owner is the process running the session, and LeaseUntil when its
	// hold lapses unless renewed (see RenewLeases and Recover).
	Owner      string
	LeaseUntil time.Time
}

// Lapsed reports whether the session is marked running but its lease ran
// out by now: the process that ran it is gone (killed, crashed) or was
// suspended so long it stopped renewing it. Recover ends such sessions.
func (s *Session) Lapsed(now time.Time) bool {
	return s.Status == delegation.StatusRunning && s.LeaseUntil.Before(now)
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
	var lease int64
	if !s.LeaseUntil.IsZero() {
		lease = nanos(s.LeaseUntil)
	}
	var key int64
	err := tx.QueryRowContext(ctx, `INSERT INTO sessions
		(id, name, title, prompt, status, error, tokenizer, created_at, finished_at, origin, owner, lease_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING sid`,
		s.ID, s.Name, s.Title, s.Prompt, s.Status, s.Error, s.Tokenizer, nanos(s.CreatedAt), finished,
		cmp.Or(s.Origin, delegation.OriginEngine), s.Owner, lease).Scan(&key)
	if err != nil {
		return 0, fmt.Errorf("create session %s: %w", s.ID, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO session_scenarios (sid, scenario) VALUES (?, ?)`, key, packJSON(s.Scenario)); err != nil {
		return 0, fmt.Errorf("create session %s: %w", s.ID, err)
	}
	return key, nil
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

// sessionColumns are a session's row; its scenario is in a table of its
// own (readScenario). summaryColumns are what a list shows: not the prompt
// either, which can be long.
const (
	sessionColumns = `id, name, title, prompt, status, error, tokenizer, created_at, finished_at,
	last_seq, agents, model_calls, input_tokens, origin, owner, lease_until`
	summaryColumns = `id, name, title, '', status, error, tokenizer, created_at, finished_at,
	last_seq, agents, model_calls, input_tokens, origin, owner, lease_until`
)

type scanner interface{ Scan(...any) error }

func scanSession(row scanner) (*Session, error) {
	var s Session
	var created int64
	var finished sql.NullInt64
	var lease int64
	if err := row.Scan(&s.ID, &s.Name, &s.Title, &s.Prompt, &s.Status, &s.Error, &s.Tokenizer,
		&created, &finished, &s.LastSeq, &s.Agents, &s.ModelCalls, &s.InputTokens, &s.Origin, &s.Owner, &lease); err != nil {
		return nil, err
	}
	if lease != 0 {
		s.LeaseUntil = fromNanos(lease)
	}
	s.CreatedAt = fromNanos(created)
	if finished.Valid {
		t := fromNanos(finished.Int64)
		s.FinishedAt = &t
	}
	return &s, nil
}

// Session returns a stored session with its scenario; a missing one is an
// ENOTFOUND error.
func (db *DB) Session(ctx context.Context, id string) (*Session, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	defer tx.Rollback()
	var key int64
	s, err := scanSession(prefixScanner{tx.QueryRowContext(ctx, `SELECT sid, `+sessionColumns+` FROM sessions WHERE id = ?`, id), &key})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err == nil {
		s.Scenario, err = readScenario(ctx, tx, key, id)
	}
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	return s, nil
}

// Sessions lists sessions, newest first, at most limit (0: all): their
// summary columns only, not their prompts and scenarios.
func (db *DB) Sessions(ctx context.Context, limit int) ([]Session, error) {
	return db.SessionsWhere(ctx, SessionFilter{Limit: limit})
}

// SessionFilter picks the sessions a list shows: those of a status and of an
// origin (each "" for any), at most Limit of them (0: all).
type SessionFilter struct {
	Status, Origin string
	Limit          int
}

// SessionsWhere is Sessions of those q picks, newest first.
func (db *DB) SessionsWhere(ctx context.Context, q SessionFilter) ([]Session, error) {
	var n any = q.Limit
	if q.Limit <= 0 {
		n = dyn{lite: int64(-1), pg: nil} // no limit, as each spells it
	}
	rows, err := db.r.QueryContext(ctx, `SELECT `+summaryColumns+` FROM sessions
		WHERE (CAST(? AS TEXT) = '' OR status = ?) AND (CAST(? AS TEXT) = '' OR origin = ?) ORDER BY created_at DESC, id LIMIT ?`,
		q.Status, q.Status, q.Origin, q.Origin, n)
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

// RenewLeases extends, to until, the lease of every running session owner
// holds. The runner calls it while it runs sessions, well within the lease.
func (db *DB) RenewLeases(ctx context.Context, owner string, until time.Time) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET lease_until = ? WHERE owner = ? AND status = 'running'`,
			nanos(until), owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("renew session leases: %w", err)
	}
	return nil
}

// ReasonStopped is why a session a stopping studio held ended.
const ReasonStopped = "the studio stopped while this session was running"

// ReasonLapsed is why a recovered session ended: its lease lapsed.
const ReasonLapsed = "the process running this session stopped renewing its lease (it was killed, crashed or suspended), so another process ended it"

// Recover ends, as interrupted, every session still marked running whose
// lease has run out: sessions a crash or a kill left behind, and never one
// that a live process (another studio, a `studio run --db`) still holds.
// Each gets the closing events a live session would have (FinishOpen); it
// returns their ids.
func (db *DB) Recover(ctx context.Context) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM sessions WHERE status = 'running' AND lease_until < ? ORDER BY sid`,
		nanos(db.Now()))
	if err != nil {
		return nil, fmt.Errorf("recover sessions: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("recover sessions: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recover sessions: %w", err)
	}
	var ended []string
	for _, id := range ids {
		ok, err := db.finish(ctx, id, delegation.StatusInterrupted, "", ReasonLapsed, true)
		if err != nil {
			return ended, fmt.Errorf("recover session %s: %w", id, err)
		}
		if ok {
			ended = append(ended, id)
		}
	}
	return ended, nil
}

// FinishOpen ends a session that is still marked running, as a live one
// ends: agent.finished (failed, with the reason) for each agent still
// running, children first, then session.finished with status, code (why,
// as a delegation error code; may be empty) and reason, appended to its
// log after its last stored event. It reports whether the session was
// still running. The runner calls it when the store failed under a
// session; a full disk does not stop it (see reserve).
func (db *DB) FinishOpen(ctx context.Context, id, status, code, reason string) (bool, error) {
	ok, err := db.finish(ctx, id, status, code, reason, false)
	if err != nil {
		return false, fmt.Errorf("finish session %s: %w", id, err)
	}
	return ok, nil
}

// finish is FinishOpen; onlyExpired makes it leave a session whose lease
// was renewed since it was found. When the disk is full it gives the
// store's reserve back to the disk and tries once more: what ends a
// session is the write the reserve is kept for.
func (db *DB) finish(ctx context.Context, id, status, code, reason string, onlyExpired bool) (bool, error) {
	ended, err := db.tryFinish(ctx, id, status, code, reason, onlyExpired)
	if isFull(err) && db.reserve.release() {
		ended, err = db.tryFinish(ctx, id, status, code, reason, onlyExpired)
	}
	return ended, err
}

func (db *DB) tryFinish(ctx context.Context, id, status, code, reason string, onlyExpired bool) (bool, error) {
	ended := false
	err := db.tx(ctx, func(tx *sql.Tx) error {
		now := db.Now()
		var key, last, lease int64
		var st string
		err := tx.QueryRowContext(ctx, `SELECT sid, status, last_seq, lease_until FROM sessions WHERE id = ?`+db.dialect().forUpdate(), id).
			Scan(&key, &st, &last, &lease)
		if errors.Is(err, sql.ErrNoRows) {
			return delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
		}
		if err != nil {
			return err
		}
		if st != delegation.StatusRunning || (onlyExpired && lease >= nanos(now)) {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT a.id, (SELECT COUNT(*) FROM model_calls c
			WHERE c.sid = a.sid AND c.agent_id = a.id AND c.purpose <> ?)
			FROM agents a WHERE a.sid = ? AND a.status = 'running' ORDER BY a.seq DESC`, coded(purposeCodes, "summary"), key)
		if err != nil {
			return err
		}
		stoppedBy := ""
		if onlyExpired {
			stoppedBy = delegation.StopLapsed // recovery: its lease lapsed
		}
		var events []delegation.Event
		for rows.Next() {
			var agent string
			var steps int
			if err := rows.Scan(&agent, &steps); err != nil {
				rows.Close()
				return err
			}
			last++
			events = append(events, delegation.Event{Seq: last, Type: delegation.EventAgentFinished, AgentID: agent, At: now,
				Payload: delegation.AgentFinished{Status: delegation.StatusFailed, Error: reason, StoppedBy: stoppedBy, Steps: steps}})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		last++
		events = append(events, delegation.Event{Seq: last, Type: delegation.EventSessionFinished, At: now,
			Payload: delegation.SessionFinished{Status: status, Error: reason, Code: code, StoppedBy: stoppedBy}})
		ended = true
		h, err := db.readHead(ctx, tx, id)
		if err != nil {
			return err
		}
		return appendEvents(ctx, tx, h, events) // the live append
	})
	return ended, err
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
