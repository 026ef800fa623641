package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// A model call is one row, written at its model.started and completed at
// its model.finished; both events are read back from it. Everything about
// how a call is stored is in this file.

// callID is the id the engine gives an agent's idx-th call; such an id is
// not stored.
func callID(agentID string, idx int) string { return agentID + ".c" + strconv.Itoa(idx) }

// messageID is the id the engine gives message idx of an agent's list;
// such an id is not stored.
func messageID(agentID string, idx int) string { return agentID + "." + strconv.Itoa(idx) }

// unlessDerived is an id to store: NULL when it is the one its place
// gives.
func unlessDerived(id, derived string) sql.NullString {
	if id == derived {
		return sql.NullString{}
	}
	return sql.NullString{String: id, Valid: true}
}

// orDerived is a stored id, or the one its place gives.
func orDerived(id sql.NullString, derived func() string) string {
	if id.Valid {
		return id.String
	}
	return derived()
}

// insertCall stores a call at its model.started: n is its step, at its
// time after the session's start.
func insertCall(ctx context.Context, stmt *sql.Stmt, sid int64, n, seq, at int64, c *trace.ModelCall) error {
	if _, err := stmt.ExecContext(ctx, sid, c.AgentID, c.Index, n, seq, at, unlessDerived(c.ID, callID(c.AgentID, c.Index)),
		coded(purposeCodes, c.Purpose), packRanges(c.Context), c.SystemTokens, c.ToolTokens, c.MessageTokens, c.InheritedTokens, c.InputTokens,
		c.CachedPrefixTokens); err != nil {
		return fmt.Errorf("model call %s: %w", c.ID, err)
	}
	return nil
}

const insertCallSQL = `INSERT INTO model_calls (sid, agent_id, idx, n, seq, at, id, purpose, context, system_tokens, tool_tokens,
	message_tokens, inherited_tokens, input_tokens, cached_prefix_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const finishCallSQL = `UPDATE model_calls SET output = ?, duration_ms = ?, error = ?, usage = ?, cost = ?, response = ?, stopped_by = ?
	WHERE sid = ? AND agent_id = ? AND idx = ?`

// callPlace finds a call's agent and index by its id: from the id itself
// when it is the engine's, else by the index of ids.
func callPlace(ctx context.Context, q querier, sid int64, agentID, id string) (string, int, error) {
	if rest, ok := strings.CutPrefix(id, agentID+".c"); ok {
		if idx, err := strconv.Atoi(rest); err == nil && callID(agentID, idx) == id {
			var one int
			err := q.QueryRowContext(ctx, `SELECT 1 FROM model_calls WHERE sid = ? AND agent_id = ? AND idx = ? AND id IS NULL`,
				sid, agentID, idx).Scan(&one)
			if err == nil {
				return agentID, idx, nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return "", 0, err
			}
		}
	}
	var agent string
	var idx int
	err := q.QueryRowContext(ctx, `SELECT agent_id, idx FROM model_calls WHERE sid = ? AND id = ?`, sid, id).Scan(&agent, &idx)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, fmt.Errorf("model.finished for unknown model call %q", id)
	}
	return agent, idx, err
}

// finishCall completes a call at its model.finished.
func finishCall(ctx context.Context, stmt *sql.Stmt, sid int64, agentID string, idx int, f *delegation.ModelFinished) error {
	res, err := stmt.ExecContext(ctx, outputValue(agentID, f.OutputMessageID), f.DurationMS, f.Error, jsonOrNull(f.Usage), jsonOrNull(f.Cost),
		jsonOrNull(f.Response), nullString(&f.StoppedBy), sid, agentID, idx)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("model.finished for unknown model call %q", f.ModelCallID)
	}
	return nil
}

// outputValue is a call's answer as stored: its index in the agent's list
// when its id is the one that place gives, else its id; NULL for none.
func outputValue(agentID, id string) dyn {
	if id == "" {
		return dyn{}
	}
	if agent, idx, ok := placeOf(id, "."); ok && agent == agentID && messageID(agent, idx) == id {
		return dyn{lite: int64(idx), pg: id}
	}
	return dyn{lite: id, pg: id}
}

// output reads a call's answer back.
type output struct {
	agentID *string
	out     **string
}

func (o output) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*o.out = nil
	case int64:
		id := messageID(*o.agentID, int(x))
		*o.out = &id
	case string:
		*o.out = &x
	case []byte:
		id := string(x)
		*o.out = &id
	default:
		return fmt.Errorf("unreadable call output %v", v)
	}
	return nil
}

// callColumns are a call row's columns as scanCall reads them.
const callColumns = `c.agent_id, c.idx, c.id, c.purpose, c.context, c.system_tokens, c.tool_tokens, c.message_tokens,
	c.inherited_tokens, c.input_tokens, c.output, c.duration_ms, c.error, c.usage, c.at, c.seq, c.n, c.cached_prefix_tokens, c.cost, c.response, c.stopped_by`

// callRow is a stored call: the trace's, its seq and its step.
type callRow struct {
	trace.ModelCall
	Seq  int64
	Step int
}

// scanCall reads a call row; created is the session's start, which its
// time is after. Its system prompt and tools are its agent's, filled in by
// the caller.
func scanCall(row scanner, created int64) (callRow, error) {
	var c callRow
	var id, usage, cost, response, stoppedBy sql.NullString
	var ctxJSON string
	var at int64
	if err := row.Scan(&c.AgentID, &c.Index, &id, codedName{purposeCodes, &c.Purpose}, &ctxJSON, &c.SystemTokens, &c.ToolTokens, &c.MessageTokens,
		&c.InheritedTokens, &c.InputTokens, output{&c.AgentID, &c.OutputMessageID}, &c.DurationMS, &c.Error, &usage, &at, &c.Seq, &c.Step,
		&c.CachedPrefixTokens, &cost, &response, &stoppedBy); err != nil {
		return c, err
	}
	c.ID = orDerived(id, func() string { return callID(c.AgentID, c.Index) })
	c.StoppedBy = stoppedBy.String
	var err error
	if c.Context, err = unpackRanges(ctxJSON); err != nil {
		return c, fmt.Errorf("model call %s context: %w", c.ID, err)
	}
	if c.Usage, err = fromJSON[delegation.Usage](usage); err != nil {
		return c, fmt.Errorf("model call %s usage: %w", c.ID, err)
	}
	if c.Cost, err = fromJSON[delegation.Cost](cost); err != nil {
		return c, fmt.Errorf("model call %s cost: %w", c.ID, err)
	}
	if c.Response, err = fromJSON[delegation.ResponseMeta](response); err != nil {
		return c, fmt.Errorf("model call %s response: %w", c.ID, err)
	}
	c.StartedAt = fromNanos(created + at)
	return c, nil
}

// since is a time as the log stores it: nanoseconds after the session's
// start.
func since(created int64, t time.Time) int64 { return t.UnixNano() - created }

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

// fromJSON reads a JSON column: nil when NULL.
func fromJSON[T any](s sql.NullString) (*T, error) {
	if !s.Valid {
		return nil, nil
	}
	v := new(T)
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return nil, err
	}
	return v, nil
}
