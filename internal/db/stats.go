package db

import (
	"context"
	"fmt"
)

// SessionCounts counts the stored sessions by status, for /metrics. It reads
// the sessions table only, so it stays cheap however long the sessions are.
func (db *DB) SessionCounts(ctx context.Context) (map[string]int, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT status, count(*) FROM sessions GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count sessions: %w", err)
		}
		out[status] = n
	}
	return out, rows.Err()
}

// Ping checks that the database answers a query and that its disk has room
// to write (an EFULL error when it has none), for /healthz.
func (db *DB) Ping(ctx context.Context) error {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM sessions LIMIT 1) AS one`).Scan(&n); err != nil {
		return fmt.Errorf("the database %s does not answer: %w", db.path, err)
	}
	return db.checkSpace()
}
