package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// AppendEvents appends events of one session's log, in one transaction: the
// events, as the trace keeps them, and what they introduced or changed
// (agents, messages, model calls, files, the session's status). Events of
// seq 0 are live only and are skipped.
func (db *DB) AppendEvents(ctx context.Context, sessionID string, events []delegation.Event) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		var n, last int64
		var status string
		err := tx.QueryRowContext(ctx, `SELECT sid, status, last_seq FROM sessions WHERE id = ?`, sessionID).Scan(&n, &status, &last)
		if errors.Is(err, sql.ErrNoRows) {
			return delegation.Errorf(delegation.ENOTFOUND, "no session %q", sessionID)
		}
		if err != nil {
			return err
		}
		// The log only grows at its end, and only while the session runs:
		// a process whose lease lapsed (and whose session another process
		// then ended) must not write after that end.
		if status != delegation.StatusRunning {
			return delegation.Errorf(delegation.ECONFLICT, "session %s has ended (%s); its log takes no more events", sessionID, status)
		}
		for _, ev := range events {
			if ev.Seq == 0 {
				continue
			}
			if ev.Seq != last+1 {
				return delegation.Errorf(delegation.ECONFLICT, "event seq %d does not follow the log's last seq %d", ev.Seq, last)
			}
			last = ev.Seq
		}
		return appendEvents(ctx, tx, n, events)
	})
	if err != nil {
		return fmt.Errorf("append events for session %s: %w", sessionID, err)
	}
	return nil
}

// statements are a batch's prepared statements.
type statements struct {
	event, message, call, finish, putFile, deleteFile *sql.Stmt
}

func prepare(ctx context.Context, tx *sql.Tx) (*statements, error) {
	var s statements
	var err error
	if s.event, err = tx.PrepareContext(ctx, `INSERT INTO events (sid, seq, type, agent_id, at, data) VALUES (?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, err
	}
	if s.message, err = tx.PrepareContext(ctx, `INSERT INTO messages
		(sid, agent_id, idx, seq, at, id, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, err
	}
	if s.call, err = tx.PrepareContext(ctx, `INSERT INTO model_calls
		(sid, id, seq, at, agent_id, idx, purpose, context, system_tokens, tool_tokens, message_tokens,
		 inherited_tokens, input_tokens, cached_prefix_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return nil, err
	}
	if s.finish, err = tx.PrepareContext(ctx, `UPDATE model_calls SET finished_seq = ?, finished_at = ?, output_message_id = ?,
		duration_ms = ?, error = ?, usage = ?, cost = ? WHERE sid = ? AND id = ?`); err != nil {
		return nil, err
	}
	if s.putFile, err = tx.PrepareContext(ctx, `INSERT INTO files (sid, path, content) VALUES (?, ?, ?)
		ON CONFLICT (sid, path) DO UPDATE SET content = excluded.content`); err != nil {
		return nil, err
	}
	if s.deleteFile, err = tx.PrepareContext(ctx, `DELETE FROM files WHERE sid = ? AND path = ?`); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *statements) close() {
	for _, st := range []*sql.Stmt{s.event, s.message, s.call, s.finish, s.putFile, s.deleteFile} {
		st.Close()
	}
}

// derived reports whether an event is read back from a message or model
// call row rather than stored in the events table.
func derived(t delegation.EventType) bool {
	return t == delegation.EventMessageAdded || t == delegation.EventModelStarted || t == delegation.EventModelFinished
}

func appendEvents(ctx context.Context, tx *sql.Tx, sid int64, events []delegation.Event) error {
	sts, err := prepare(ctx, tx)
	if err != nil {
		return err
	}
	defer sts.close()
	var lastSeq int64
	var agents, calls, tokens int
	for _, ev := range events {
		if ev.Seq == 0 {
			continue
		}
		st, err := trace.StepOf(ev)
		if err != nil {
			return err
		}
		stored, err := st.Stored()
		if err != nil {
			return err
		}
		lastSeq = ev.Seq
		if !derived(ev.Type) {
			if _, err := sts.event.ExecContext(ctx, sid, ev.Seq, string(ev.Type), nullString(&ev.AgentID), nanos(ev.At), string(stored.Data)); err != nil {
				return fmt.Errorf("event %d: %w", ev.Seq, err)
			}
		}
		switch {
		case st.Message != nil:
			if err := insertMessage(ctx, sts.message, sid, ev.Seq, ev.At, st.Index, st.Message); err != nil {
				return err
			}
		case st.Call != nil:
			if err := insertCall(ctx, sts.call, sid, ev.Seq, ev.At, st.Call); err != nil {
				return err
			}
			calls++
			tokens += st.Call.InputTokens
		case st.Finished != nil:
			f := st.Finished
			if err := finishCall(ctx, sts.finish, sid, f.ModelCallID, ev.Seq, ev.At, f.OutputMessageID, f.DurationMS, f.Error, f.Usage, f.Cost); err != nil {
				return err
			}
		case st.AgentStarted != nil:
			d := st.AgentStarted
			tools, _ := json.Marshal(d.Tools)
			if _, err := tx.ExecContext(ctx, `INSERT INTO agents (sid, id, seq, name, parent_id, mode, task_call_id,
				status, invocation, system_prompt, system_tokens, tools, model, price) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)`,
				sid, d.Agent.ID, ev.Seq, d.Agent.Name, nullString(&d.Agent.ParentID), nullString((*string)(&d.Agent.Mode)),
				nullString(&d.Agent.TaskCallID), d.Agent.Invocation, d.SystemPrompt, d.SystemTokens, string(tools),
				d.Model, jsonOrNull(d.Price)); err != nil {
				return fmt.Errorf("agent %s: %w", d.Agent.ID, err)
			}
			agents++
		case st.AgentFinished != nil:
			d := st.AgentFinished
			if _, err := tx.ExecContext(ctx, `UPDATE agents SET status = ?, error = ?, steps = ? WHERE sid = ? AND id = ?`,
				d.Status, d.Error, d.Steps, sid, ev.AgentID); err != nil {
				return err
			}
		case st.SessionStarted != nil:
			d := st.SessionStarted
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET prompt = ?, tokenizer = ? WHERE sid = ?`, d.Prompt, d.Tokenizer, sid); err != nil {
				return err
			}
		case st.SessionFinished != nil:
			d := st.SessionFinished
			if _, err := tx.ExecContext(ctx, `UPDATE sessions SET status = ?, error = ?, finished_at = ? WHERE sid = ?`,
				d.Status, d.Error, nanos(ev.At), sid); err != nil {
				return err
			}
		}
		if changes, whole := st.MainFiles(); whole || len(changes) > 0 {
			if whole {
				if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE sid = ?`, sid); err != nil {
					return err
				}
			}
			if err := applyFileChanges(ctx, sts, sid, changes); err != nil {
				return err
			}
		}
	}
	if lastSeq == 0 {
		return nil
	}
	_, err = tx.ExecContext(ctx, `UPDATE sessions SET last_seq = ?, agents = agents + ?, model_calls = model_calls + ?,
		input_tokens = input_tokens + ? WHERE sid = ?`, lastSeq, agents, calls, tokens, sid)
	return err
}

func insertCall(ctx context.Context, stmt *sql.Stmt, sid, seq int64, at time.Time, c *trace.ModelCall) error {
	if _, err := stmt.ExecContext(ctx, sid, c.ID, seq, nanos(at), c.AgentID, c.Index, c.Purpose, packRanges(c.Context),
		c.SystemTokens, c.ToolTokens, c.MessageTokens, c.InheritedTokens, c.InputTokens, c.CachedPrefixTokens); err != nil {
		return fmt.Errorf("model call %s: %w", c.ID, err)
	}
	return nil
}

func insertMessage(ctx context.Context, stmt *sql.Stmt, sid, seq int64, at time.Time, idx int, m *trace.Message) error {
	var calls sql.NullString
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return err
		}
		calls = sql.NullString{String: string(b), Valid: true}
	}
	if _, err := stmt.ExecContext(ctx, sid, m.AgentID, idx, seq, nanos(at), m.ID, m.Role, m.Content, calls,
		nullString(m.ToolCallID), m.IsError, m.Tokens, m.Kind, m.Reasoning); err != nil {
		return fmt.Errorf("message %s: %w", m.ID, err)
	}
	return nil
}

func finishCall(ctx context.Context, stmt *sql.Stmt, sid int64, callID string, seq int64, at time.Time, outputID string, durationMS int64, errText string, usage *delegation.Usage, cost *delegation.Cost) error {
	res, err := stmt.ExecContext(ctx, seq, nanos(at), nullString(&outputID), durationMS, errText, jsonOrNull(usage), jsonOrNull(cost), sid, callID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("model.finished for unknown model call %q", callID)
	}
	return nil
}

// jsonOrNull is v as JSON, or NULL when v is a nil pointer.
func jsonOrNull[T any](v *T) sql.NullString {
	if v == nil {
		return sql.NullString{}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

// callJSON decodes a model call row's JSON columns, usage and cost.
func callJSON(c *trace.ModelCall, usage, cost sql.NullString) error {
	if usage.Valid {
		c.Usage = &delegation.Usage{}
		if err := json.Unmarshal([]byte(usage.String), c.Usage); err != nil {
			return fmt.Errorf("model call %s usage: %w", c.ID, err)
		}
	}
	if cost.Valid {
		c.Cost = &delegation.Cost{}
		if err := json.Unmarshal([]byte(cost.String), c.Cost); err != nil {
			return fmt.Errorf("model call %s cost: %w", c.ID, err)
		}
	}
	return nil
}

func replaceFiles(ctx context.Context, tx *sql.Tx, sid int64, files map[string]string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM files WHERE sid = ?`, sid); err != nil {
		return err
	}
	for _, p := range trace.SortedPaths(files) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO files (sid, path, content) VALUES (?, ?, ?)`, sid, p, files[p]); err != nil {
			return err
		}
	}
	return nil
}

func applyFileChanges(ctx context.Context, st *statements, sid int64, changes []delegation.FileChange) error {
	for _, c := range changes {
		var err error
		if c.Deleted {
			_, err = st.deleteFile.ExecContext(ctx, sid, c.Path)
		} else {
			_, err = st.putFile.ExecContext(ctx, sid, c.Path, c.Content)
		}
		if err != nil {
			return fmt.Errorf("file %s: %w", c.Path, err)
		}
	}
	return nil
}

// EventsAfter returns a session's events with seq > after, in order, at most
// limit (0: all), as the trace keeps them.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]delegation.Event, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	n, err := sid(ctx, tx, sessionID)
	if err != nil {
		return nil, err
	}
	events, err := readLog(ctx, tx, n, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	return events, nil
}

// readLog reads a session's log after a seq, at most limit events (0:
// all): the events table merged with the events read back from message and
// model-call rows (Reader.Events).
func readLog(ctx context.Context, tx *sql.Tx, sid, after int64, limit int) ([]delegation.Event, error) {
	r := &reader{ctx: ctx, tx: tx, sid: sid}
	var out []delegation.Event
	for sp, err := range r.log(after, false) {
		if err != nil {
			return nil, err
		}
		out = append(out, sp.Event)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// readViewEvents reads the stored events a page uses: all but tool.started
// and tool.finished, and none of those read back from rows.
func readViewEvents(ctx context.Context, tx *sql.Tx, sid int64) ([]delegation.Event, error) {
	rows, err := tx.QueryContext(ctx, `SELECT seq, type, agent_id, at, data FROM events
		WHERE sid = ? AND type NOT IN ('tool.started', 'tool.finished') ORDER BY seq`, sid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []delegation.Event
	for rows.Next() {
		var ev delegation.Event
		var typ, data string
		var agent sql.NullString
		var at int64
		if err := rows.Scan(&ev.Seq, &typ, &agent, &at, &data); err != nil {
			return nil, err
		}
		ev.Type, ev.AgentID, ev.At, ev.Data = delegation.EventType(typ), agent.String, fromNanos(at), json.RawMessage(data)
		out = append(out, ev)
	}
	return out, rows.Err()
}
