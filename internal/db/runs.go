package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Run kinds: a lesson's variants, a scenario in both modes, a team's run.
const (
	RunLesson = "lesson"
	RunModes  = "modes"
	RunTeam   = "team"
)

// Run is sessions started together and kept as such: a lesson's variants
// (Lesson, Mode), a scenario run in both modes (Lesson or Source, the
// session it came from), a team's run (TeamID).
type Run struct {
	ID, Kind, Lesson, Mode, TeamID, Source string
	CreatedAt                              time.Time
	Sessions                               []RunSession
}

// RunSession is one session of a run, with what a list shows of it.
type RunSession struct {
	Variant, SessionID string
	Name, Status       string
	Agents, ModelCalls int
	InputTokens        int
}

// Running reports whether any of the run's sessions still runs.
func (r *Run) Running() bool {
	for _, s := range r.Sessions {
		if s.Status == delegation.StatusRunning {
			return true
		}
	}
	return false
}

// Session returns the run's session of a variant.
func (r *Run) Session(variant string) (RunSession, bool) {
	for _, s := range r.Sessions {
		if s.Variant == variant {
			return s, true
		}
	}
	return RunSession{}, false
}

// CreateRun stores a run of sessions already stored; it sets the run's id
// and time.
func (db *DB) CreateRun(ctx context.Context, r *Run) error {
	if r.ID == "" {
		r.ID = newTeamID()
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = db.Now()
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO runs (id, kind, lesson, mode, team_id, source, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, r.ID, r.Kind, r.Lesson, r.Mode, r.TeamID, r.Source, nanos(r.CreatedAt)); err != nil {
			return err
		}
		for i, s := range r.Sessions {
			if _, err := tx.ExecContext(ctx, `INSERT INTO run_sessions (run_id, position, variant, session_id) VALUES (?, ?, ?, ?)`,
				r.ID, i, s.Variant, s.SessionID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store run of %d sessions: %w", len(r.Sessions), err)
	}
	return nil
}

// RunFilter chooses runs: of a kind, a lesson, a team, or with a session;
// newest first, at most Limit (0: 20).
type RunFilter struct {
	Kind, Lesson, TeamID, SessionID string
	Limit                           int
}

// Runs lists the runs a filter chooses, newest first, each with its
// sessions in order.
func (db *DB) Runs(ctx context.Context, f RunFilter) ([]Run, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{{"kind", f.Kind}, {"lesson", f.Lesson}, {"team_id", f.TeamID}} {
		if c.v != "" {
			where = append(where, "r."+c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if f.SessionID != "" {
		where = append(where, "r.id IN (SELECT run_id FROM run_sessions WHERE session_id = ?)")
		args = append(args, f.SessionID)
	}
	q := `SELECT r.id, r.kind, r.lesson, r.mode, r.team_id, r.source, r.created_at FROM runs r`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Limit <= 0 {
		f.Limit = 20
	}
	q += " ORDER BY r.created_at DESC, r.id LIMIT ?"
	args = append(args, f.Limit)
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var out []Run
	for rows.Next() {
		var r Run
		var at int64
		if err := rows.Scan(&r.ID, &r.Kind, &r.Lesson, &r.Mode, &r.TeamID, &r.Source, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list runs: %w", err)
		}
		r.CreatedAt = fromNanos(at)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	for i := range out {
		if out[i].Sessions, err = db.runSessions(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Run returns a stored run; a missing one is an ENOTFOUND error.
func (db *DB) Run(ctx context.Context, id string) (*Run, error) {
	var r Run
	var at int64
	err := db.r.QueryRowContext(ctx, `SELECT id, kind, lesson, mode, team_id, source, created_at FROM runs WHERE id = ?`, id).
		Scan(&r.ID, &r.Kind, &r.Lesson, &r.Mode, &r.TeamID, &r.Source, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no run %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", id, err)
	}
	r.CreatedAt = fromNanos(at)
	if r.Sessions, err = db.runSessions(ctx, id); err != nil {
		return nil, err
	}
	return &r, nil
}

func (db *DB) runSessions(ctx context.Context, runID string) ([]RunSession, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT rs.variant, rs.session_id, s.name, s.status, s.agents, s.model_calls, s.input_tokens
		FROM run_sessions rs JOIN sessions s ON s.id = rs.session_id WHERE rs.run_id = ? ORDER BY rs.position`, runID)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []RunSession
	for rows.Next() {
		var s RunSession
		if err := rows.Scan(&s.Variant, &s.SessionID, &s.Name, &s.Status, &s.Agents, &s.ModelCalls, &s.InputTokens); err != nil {
			return nil, fmt.Errorf("read run %s: %w", runID, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// CreateTeamFrom stores a new team made from a lesson ("lesson:NAME") or a
// session ("session:ID"), and remembers which, in one transaction.
func (db *DB) CreateTeamFrom(ctx context.Context, t *Team, source string) error {
	if t.ID == "" {
		t.ID = newTeamID()
	}
	now := db.Now()
	t.CreatedAt, t.UpdatedAt = now, now
	return db.tx(ctx, func(tx *sql.Tx) error {
		if err := createTeam(ctx, tx, t); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE teams SET source = ? WHERE id = ?`, source, t.ID)
		return err
	})
}

// TeamSource is what a team was cloned from ("lesson:NAME", "session:ID"),
// or "" for a team made here.
func (db *DB) TeamSource(ctx context.Context, id string) (string, error) {
	var src string
	err := db.r.QueryRowContext(ctx, `SELECT source FROM teams WHERE id = ?`, id).Scan(&src)
	if errors.Is(err, sql.ErrNoRows) {
		return "", delegation.Errorf(delegation.ENOTFOUND, "no team %q", id)
	}
	if err != nil {
		return "", fmt.Errorf("read team %s: %w", id, err)
	}
	return src, nil
}

// TeamNames are the names every team has, for a new one to take another.
func (db *DB) TeamNames(ctx context.Context) (map[string]bool, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT name FROM teams`)
	if err != nil {
		return nil, fmt.Errorf("list team names: %w", err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list team names: %w", err)
		}
		out[n] = true
	}
	return out, rows.Err()
}
