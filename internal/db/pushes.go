package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// PushedSeq returns the seq of a session's log through which its finished
// spans have been pushed to endpoint (0: none yet).
func (db *DB) PushedSeq(ctx context.Context, sessionID, endpoint string) (int64, error) {
	var seq int64
	err := db.r.QueryRowContext(ctx, `SELECT p.seq FROM otlp_pushes p JOIN sessions s ON s.sid = p.sid
		WHERE s.id = ? AND p.endpoint = ?`, sessionID, endpoint).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read what was pushed of session %s: %w", sessionID, err)
	}
	return seq, nil
}

// SetPushedSeq records that a session's finished spans through seq have
// been pushed to endpoint. The mark only moves forward.
func (db *DB) SetPushedSeq(ctx context.Context, sessionID, endpoint string, seq int64) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		key, err := sid(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO otlp_pushes (sid, endpoint, seq, at) VALUES (?, ?, ?, ?)
			ON CONFLICT (sid, endpoint) DO UPDATE SET seq = CASE WHEN excluded.seq > otlp_pushes.seq THEN excluded.seq ELSE otlp_pushes.seq END, at = excluded.at`,
			key, endpoint, seq, nanos(db.Now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("record what was pushed of session %s: %w", sessionID, err)
	}
	return nil
}
