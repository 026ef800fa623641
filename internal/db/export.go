package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Trace exports a stored session as the trace of formats.md §2, read in one
// transaction so it is consistent while the session runs.
func (db *DB) Trace(ctx context.Context, id string) (*trace.Trace, error) {
	t, _, err := db.readTraceTx(ctx, id, true)
	return t, err
}

// ViewTrace reads a session for its pages: the whole trace but for the
// events no view reads — those a message or model call row already says
// (message.added, model.started, model.finished) and tool.started and
// tool.finished — so a long session's page does not re-read its whole log.
// It also returns the session's last seq, which the trimmed events do not
// show, for a live page to resume from.
func (db *DB) ViewTrace(ctx context.Context, id string) (*trace.Trace, int64, error) {
	return db.readTraceTx(ctx, id, false)
}

func (db *DB) readTraceTx(ctx context.Context, id string, fullLog bool) (*trace.Trace, int64, error) {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("export session %s: %w", id, err)
	}
	defer tx.Rollback()
	t, lastSeq, err := readTrace(ctx, tx, id, fullLog)
	if err != nil {
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("export session %s: %w", id, err)
	}
	return t, lastSeq, nil
}

func readTrace(ctx context.Context, tx *sql.Tx, id string, fullLog bool) (*trace.Trace, int64, error) {
	s, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if err == sql.ErrNoRows {
		return nil, 0, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err != nil {
		return nil, 0, err
	}
	key, err := sid(ctx, tx, id)
	if err != nil {
		return nil, 0, err
	}
	t := &trace.Trace{Format: trace.Format, Version: trace.Version, Scenario: s.Scenario,
		Session: trace.Session{ID: s.ID, Name: s.Name, Title: s.Title, Prompt: s.Prompt, Status: s.Status,
			Error: s.Error, CreatedAt: s.CreatedAt, FinishedAt: s.FinishedAt, Tokenizer: s.Tokenizer},
		Agents: []trace.Agent{}, Messages: []trace.Message{}, ModelCalls: []trace.ModelCall{},
		Events: []delegation.Event{}, Files: map[string]string{}}
	if len(t.Scenario) == 0 {
		t.Scenario = json.RawMessage("{}")
	}

	agentIdx := map[string]int{}
	rows, err := tx.QueryContext(ctx, `SELECT id, name, parent_id, mode, task_call_id, status, error, invocation,
		system_prompt, system_tokens, tools, steps FROM agents WHERE sid = ? ORDER BY seq`, key)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var a trace.Agent
		var parent, mode, task sql.NullString
		var tools string
		if err := rows.Scan(&a.ID, &a.Name, &parent, &mode, &task, &a.Status, &a.Error, &a.Invocation,
			&a.SystemPrompt, &a.SystemTokens, &tools, &a.Steps); err != nil {
			rows.Close()
			return nil, 0, err
		}
		a.ParentID, a.Mode, a.TaskCallID = strPtr(parent), strPtr(mode), strPtr(task)
		if err := json.Unmarshal([]byte(tools), &a.Tools); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("agent %s tools: %w", a.ID, err)
		}
		agentIdx[a.ID] = len(t.Agents)
		t.Agents = append(t.Agents, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}

	rows, err = tx.QueryContext(ctx, `SELECT id, agent_id, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning
		FROM messages WHERE sid = ? ORDER BY seq`, key)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var m trace.Message
		var calls, callID sql.NullString
		if err := rows.Scan(&m.ID, &m.AgentID, &m.Role, &m.Content, &calls, &callID, &m.IsError, &m.Tokens, &m.Kind, &m.Reasoning); err != nil {
			rows.Close()
			return nil, 0, err
		}
		m.ToolCalls = []trace.ToolCall{}
		if calls.Valid {
			if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
				rows.Close()
				return nil, 0, fmt.Errorf("message %s tool calls: %w", m.ID, err)
			}
		}
		m.ToolCallID = strPtr(callID)
		t.Messages = append(t.Messages, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}

	rows, err = tx.QueryContext(ctx, `SELECT id, agent_id, idx, purpose, context, system_tokens, tool_tokens,
		message_tokens, inherited_tokens, input_tokens, output_message_id, duration_ms, error, usage, at
		FROM model_calls WHERE sid = ? ORDER BY seq`, key)
	if err != nil {
		return nil, 0, err
	}
	for rows.Next() {
		var c trace.ModelCall
		var ctxJSON string
		var out, usage sql.NullString
		var at int64
		if err := rows.Scan(&c.ID, &c.AgentID, &c.Index, &c.Purpose, &ctxJSON, &c.SystemTokens, &c.ToolTokens,
			&c.MessageTokens, &c.InheritedTokens, &c.InputTokens, &out, &c.DurationMS, &c.Error, &usage, &at); err != nil {
			rows.Close()
			return nil, 0, err
		}
		if c.Context, err = unpackRanges(ctxJSON); err != nil {
			rows.Close()
			return nil, 0, fmt.Errorf("model call %s context: %w", c.ID, err)
		}
		if usage.Valid {
			c.Usage = &delegation.Usage{}
			_ = json.Unmarshal([]byte(usage.String), c.Usage)
		}
		c.OutputMessageID, c.StartedAt = strPtr(out), fromNanos(at)
		// A call's system prompt and tools are its agent's, stored once.
		if i, ok := agentIdx[c.AgentID]; ok {
			c.SystemPrompt, c.Tools = t.Agents[i].SystemPrompt, t.Agents[i].Tools
		}
		t.ModelCalls = append(t.ModelCalls, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}

	if fullLog {
		t.Events, err = readLog(ctx, tx, key, 0, 0)
	} else {
		t.Events, err = readViewEvents(ctx, tx, key)
	}
	if err != nil {
		return nil, 0, err
	}
	if t.Events == nil {
		t.Events = []delegation.Event{}
	}
	// Where the session came from is said once, in session.started.
	if len(t.Events) > 0 && t.Events[0].Type == delegation.EventSessionStarted {
		var d struct {
			Origin *delegation.Origin `json:"origin"`
		}
		if json.Unmarshal(t.Events[0].Data, &d) == nil {
			t.Session.Origin = d.Origin
		}
	}

	rows, err = tx.QueryContext(ctx, `SELECT path, content FROM files WHERE sid = ? ORDER BY path`, key)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var p, c string
		if err := rows.Scan(&p, &c); err != nil {
			return nil, 0, err
		}
		t.Files[p] = c
	}
	return t, s.LastSeq, rows.Err()
}
