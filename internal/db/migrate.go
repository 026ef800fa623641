package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
)

// goSteps are the parts of migrations SQL cannot do, run after the
// migration's SQL, in its transaction.
var goSteps = map[int]func(context.Context, *sql.Tx) error{
	8:  migrateLog,
	11: func(ctx context.Context, tx *sql.Tx) error { return migrateOrigins(ctx, tx, dialect{}) },
}

// pgGoSteps are PostgreSQL's (migrations_pg/).
var pgGoSteps = map[int]func(context.Context, *sql.Tx) error{
	4: func(ctx context.Context, tx *sql.Tx) error { return migrateOrigins(ctx, tx, dialect{pg: true}) },
}

// migrateOrigins fills the origin column the migration added (0011_origin,
// PostgreSQL's 0004_origin) for the sessions stored before, from what each
// one's session.started says; a session without one is our engine's, the
// column's default.
func migrateOrigins(ctx context.Context, tx *sql.Tx, d dialect) error {
	var ids []string
	for id, err := range rowsOf(ctx, tx, func(rows *sql.Rows) (string, error) {
		var id string
		err := rows.Scan(&id)
		return id, err
	}, `SELECT id FROM sessions ORDER BY sid`) {
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		r, err := openReader(ctx, tx, id, d)
		if err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		if kind := r.origin().OriginKind(); kind != delegation.OriginEngine {
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET origin = ? WHERE id = ?`, kind, id); err != nil {
				return fmt.Errorf("session %s: %w", id, err)
			}
		}
	}
	return nil
}

// migrateLog moves the logs of sessions stored before migration 8 into
// blocks: the events table's rows, and the message.added, model.started and
// model.finished their message and call rows stood for, merged by seq. Their
// data stays as the trace writes it. Then the old tables go.
func migrateLog(ctx context.Context, tx *sql.Tx) error {
	type session struct {
		sid, created int64
	}
	var sessions []session
	for s, err := range rowsOf(ctx, tx, func(rows *sql.Rows) (session, error) {
		var s session
		err := rows.Scan(&s.sid, &s.created)
		return s, err
	}, `SELECT sid, created_at FROM sessions ORDER BY sid`) {
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	for _, s := range sessions {
		agents := map[string]int{}
		for a, err := range rowsOf(ctx, tx, func(rows *sql.Rows) (struct {
			id string
			n  int
		}, error) {
			var a struct {
				id string
				n  int
			}
			err := rows.Scan(&a.id, &a.n)
			return a, err
		}, `SELECT id, n FROM agents WHERE sid = ?`, s.sid) {
			if err != nil {
				return err
			}
			agents[a.id] = a.n
		}
		w, err := openLogWriter(ctx, tx, s.sid)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `
			SELECT seq, type, agent_id, at, NULL, data FROM events_v6 WHERE sid = ?1
			UNION ALL SELECT seq, 'message.added', agent_id, at, idx,
				CASE WHEN id = agent_id || '.' || idx THEN NULL ELSE id END FROM messages_v6 WHERE sid = ?1
			UNION ALL SELECT seq, 'model.started', agent_id, at, idx,
				CASE WHEN id = agent_id || '.c' || idx THEN NULL ELSE id END FROM model_calls_v6 WHERE sid = ?1
			UNION ALL SELECT finished_seq, 'model.finished', agent_id, finished_at, idx,
				CASE WHEN id = agent_id || '.c' || idx THEN NULL ELSE id END FROM model_calls_v6 WHERE sid = ?1 AND finished_seq IS NOT NULL
			ORDER BY 1`, s.sid)
		if err != nil {
			return fmt.Errorf("migrate the log of session %d: %w", s.sid, err)
		}
		for rows.Next() {
			var seq, at int64
			var typ string
			var agent sql.NullString
			var ref sql.NullInt64
			var data sql.NullString
			if err := rows.Scan(&seq, &typ, &agent, &at, &ref, &data); err != nil {
				rows.Close()
				return err
			}
			e := entry{agent: agent.String, agentN: -1, at: at - s.created, ref: ref.Int64, hasRef: ref.Valid,
				data: []byte(data.String), hasData: data.Valid}
			if n, ok := agents[e.agent]; ok && agent.Valid {
				e.agentN = n
			}
			if c, ok := typeCodes[eventType(typ)]; ok {
				e.code = c
			} else {
				e.name = typ
			}
			if err := w.add(seq, &e); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("migrate the log of session %d: %w", s.sid, err)
		}
		if err := w.flush(); err != nil {
			return err
		}
	}
	for _, t := range []string{"events_v6", "messages_v6", "model_calls_v6"} {
		if _, err := tx.ExecContext(ctx, `DROP TABLE `+t); err != nil {
			return err
		}
	}
	return nil
}
