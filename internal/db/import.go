package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Import stores a trace checked by trace.Parse as a new session with id,
// in one transaction: all of it or nothing. A session that was running when
// it was exported is stored as interrupted: nothing runs it here.
func (db *DB) Import(ctx context.Context, id string, t *trace.Trace, pos *trace.Positions) error {
	status := t.Session.Status
	if status == delegation.StatusRunning {
		status = delegation.StatusInterrupted
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		s := &Session{ID: id, Name: t.Session.Name, Title: t.Session.Title, Prompt: t.Session.Prompt, Status: status,
			Error: t.Session.Error, Tokenizer: t.Session.Tokenizer, Scenario: t.Scenario,
			CreatedAt: t.Session.CreatedAt, FinishedAt: t.Session.FinishedAt}
		key, err := createSession(ctx, tx, s)
		if err != nil {
			return err
		}
		st, err := prepare(ctx, tx)
		if err != nil {
			return err
		}
		defer st.close()
		var tokens int
		for _, a := range t.Agents {
			tools, _ := json.Marshal(a.Tools)
			if _, err := tx.ExecContext(ctx, `INSERT INTO agents (sid, id, seq, name, parent_id, mode, task_call_id,
				status, error, invocation, system_prompt, system_tokens, tools, steps, model, price) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				key, a.ID, pos.AgentSeq[a.ID], a.Name, nullString(a.ParentID), nullString(a.Mode), nullString(a.TaskCallID),
				a.Status, a.Error, a.Invocation, a.SystemPrompt, a.SystemTokens, string(tools), a.Steps, a.Model, jsonOrNull(a.Price)); err != nil {
				return fmt.Errorf("agent %s: %w", a.ID, err)
			}
		}
		for i := range t.Messages {
			m := &t.Messages[i]
			at := pos.Message[m.ID]
			if err := insertMessage(ctx, st.message, key, at.Seq, at.At, pos.MessageIndex[m.ID], m); err != nil {
				return err
			}
		}
		for i := range t.ModelCalls {
			c := &t.ModelCalls[i]
			start := pos.Call[c.ID]
			if err := insertCall(ctx, st.call, key, start.Seq, start.At, c); err != nil {
				return err
			}
			if fin, ok := pos.CallFinished[c.ID]; ok {
				out := ""
				if c.OutputMessageID != nil {
					out = *c.OutputMessageID
				}
				if err := finishCall(ctx, st.finish, key, c.ID, fin.Seq, fin.At, out, c.DurationMS, c.Error, c.Usage, c.Cost); err != nil {
					return err
				}
			}
			tokens += c.InputTokens
		}
		var last int64
		for _, ev := range t.Events {
			last = ev.Seq
			if derived(ev.Type) {
				continue
			}
			if _, err := st.event.ExecContext(ctx, key, ev.Seq, string(ev.Type), nullString(&ev.AgentID), nanos(ev.At), string(ev.Data)); err != nil {
				return fmt.Errorf("event %d: %w", ev.Seq, err)
			}
		}
		if err := replaceFiles(ctx, tx, key, t.Files); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET last_seq = ?, agents = ?, model_calls = ?, input_tokens = ? WHERE sid = ?`,
			last, len(t.Agents), len(t.ModelCalls), tokens, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("import session: %w", err)
	}
	return nil
}
