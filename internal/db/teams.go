package db

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Team is a stored team: a scenario document (formats.md §1) the team
// editor keeps, with its name and title copied out for the list.
type Team struct {
	ID        string
	Name      string
	Title     string
	Scenario  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// newTeamID returns a random team id.
func newTeamID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateTeam stores a new team; it sets the team's id when it has none, and
// its times.
func (db *DB) CreateTeam(ctx context.Context, t *Team) error {
	if t.ID == "" {
		t.ID = newTeamID()
	}
	now := db.Now()
	t.CreatedAt, t.UpdatedAt = now, now
	return db.tx(ctx, func(tx *sql.Tx) error { return createTeam(ctx, tx, t) })
}

func createTeam(ctx context.Context, tx *sql.Tx, t *Team) error {
	if !json.Valid(t.Scenario) {
		return fmt.Errorf("create team %s: its scenario is not valid JSON", t.ID)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO teams (id, name, title, scenario, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`,
		t.ID, t.Name, t.Title, string(t.Scenario), nanos(t.CreatedAt), nanos(t.UpdatedAt))
	if err != nil {
		return fmt.Errorf("create team %s: %w", t.ID, err)
	}
	return nil
}

// UpdateTeam replaces a stored team's name, title and document, and sets its
// UpdatedAt; a missing team is an ENOTFOUND error.
func (db *DB) UpdateTeam(ctx context.Context, t *Team) error {
	t.UpdatedAt = db.Now()
	return db.tx(ctx, func(tx *sql.Tx) error { return updateTeam(ctx, tx, t) })
}

func updateTeam(ctx context.Context, tx *sql.Tx, t *Team) error {
	if !json.Valid(t.Scenario) {
		return fmt.Errorf("update team %s: its scenario is not valid JSON", t.ID)
	}
	res, err := tx.ExecContext(ctx, `UPDATE teams SET name = ?, title = ?, scenario = ?, updated_at = ? WHERE id = ?`,
		t.Name, t.Title, string(t.Scenario), nanos(t.UpdatedAt), t.ID)
	if err != nil {
		return fmt.Errorf("update team %s: %w", t.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return delegation.Errorf(delegation.ENOTFOUND, "no team %q", t.ID)
	}
	// created_at is the row's: read it back so the caller's copy is whole.
	var created int64
	if err := tx.QueryRowContext(ctx, `SELECT created_at FROM teams WHERE id = ?`, t.ID).Scan(&created); err != nil {
		return fmt.Errorf("update team %s: %w", t.ID, err)
	}
	t.CreatedAt = fromNanos(created)
	return nil
}

const teamColumns = `id, name, title, scenario, created_at, updated_at`

func scanTeam(row scanner) (*Team, error) {
	var t Team
	var doc string
	var created, updated int64
	if err := row.Scan(&t.ID, &t.Name, &t.Title, &doc, &created, &updated); err != nil {
		return nil, err
	}
	t.Scenario = json.RawMessage(doc)
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &t, nil
}

// Team returns a stored team; a missing one is an ENOTFOUND error.
func (db *DB) Team(ctx context.Context, id string) (*Team, error) {
	t, err := scanTeam(db.r.QueryRowContext(ctx, `SELECT `+teamColumns+` FROM teams WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no team %q", id)
	}
	if err != nil {
		return nil, fmt.Errorf("read team %s: %w", id, err)
	}
	return t, nil
}

// Teams lists every team, newest first.
func (db *DB) Teams(ctx context.Context) ([]Team, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+teamColumns+` FROM teams ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	defer rows.Close()
	var out []Team
	for rows.Next() {
		t, err := scanTeam(rows)
		if err != nil {
			return nil, fmt.Errorf("list teams: %w", err)
		}
		out = append(out, *t)
	}
	return out, rows.Err()
}

// DeleteTeam deletes a team; a missing one is an ENOTFOUND error. Sessions
// run from it keep their own copy of the scenario.
func (db *DB) DeleteTeam(ctx context.Context, id string) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM teams WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("delete team %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return delegation.Errorf(delegation.ENOTFOUND, "no team %q", id)
		}
		return nil
	})
}
