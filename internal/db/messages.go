package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/delegationstudio/studio/internal/trace"
)

// A message is one row of its agent's list, written at its message.added,
// which is read back from it. Everything about how a message is stored is
// in this file.

const insertMessageSQL = `INSERT INTO messages
	(sid, agent_id, idx, id, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning, evicted)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func insertMessage(ctx context.Context, stmt *sql.Stmt, sid int64, idx int, m *trace.Message) error {
	var calls sql.NullString
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return err
		}
		calls = sql.NullString{String: string(b), Valid: true}
	}
	var evicted sql.NullString
	if m.Evicted != nil {
		b, err := json.Marshal(m.Evicted)
		if err != nil {
			return err
		}
		evicted = sql.NullString{String: string(b), Valid: true}
	}
	if _, err := stmt.ExecContext(ctx, sid, m.AgentID, idx, unlessDerived(m.ID, messageID(m.AgentID, idx)), coded(roleCodes, m.Role), m.Content, calls,
		nullString(m.ToolCallID), m.IsError, m.Tokens, m.Kind, m.Reasoning, evicted); err != nil {
		return fmt.Errorf("message %s: %w", m.ID, err)
	}
	return nil
}

// messageColumns are a message row's columns as scanMessage reads them.
const messageColumns = `m.agent_id, m.idx, m.id, m.role, m.content, m.tool_calls, m.tool_call_id, m.is_error, m.tokens, m.kind, m.reasoning, m.evicted`

// Message is a stored message with its place in its agent's list.
type Message struct {
	trace.Message
	Index int
}

func scanMessage(row scanner) (Message, error) {
	var m Message
	var id, calls, callID, evicted sql.NullString
	if err := row.Scan(&m.AgentID, &m.Index, &id, codedName{roleCodes, &m.Role}, &m.Content, &calls, &callID, &m.IsError, &m.Tokens, &m.Kind, &m.Reasoning, &evicted); err != nil {
		return m, err
	}
	if evicted.Valid {
		if err := json.Unmarshal([]byte(evicted.String), &m.Evicted); err != nil {
			return m, fmt.Errorf("message %s eviction: %w", m.ID, err)
		}
	}
	m.ID = orDerived(id, func() string { return messageID(m.AgentID, m.Index) })
	m.ToolCalls = []trace.ToolCall{}
	if calls.Valid {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return m, fmt.Errorf("message %s tool calls: %w", m.ID, err)
		}
	}
	m.ToolCallID = strPtr(callID)
	return m, nil
}
