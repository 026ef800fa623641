package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// reader is SQLite's Reader: one read-only transaction, each part a cursor
// over its rows.
type reader struct {
	ctx     context.Context
	tx      *sql.Tx
	sid     int64
	session *Session
	// agents holds each agent's system prompt and tools, which its calls
	// receive and which are stored once, with the agent.
	agents map[string]agentDefaults
}

type agentDefaults struct {
	systemPrompt string
	tools        []trace.ToolCost
}

var _ Reader = (*reader)(nil)

// Read calls fn with a Reader of the session id, inside one read-only
// transaction. A missing session is an ENOTFOUND error.
func (db *DB) Read(ctx context.Context, id string, fn func(Reader) error) error {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("read session %s: %w", id, err)
	}
	defer tx.Rollback()
	r, err := openReader(ctx, tx, id)
	if err != nil {
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return err
		}
		return fmt.Errorf("read session %s: %w", id, err)
	}
	return fn(r)
}

// readerColumns are the session's columns but for its scenario, which the
// reader reads when asked (Head): it can be megabytes, and is needed once.
var readerColumns = strings.Replace(sessionColumns, "scenario,", "x'' AS scenario,", 1)

func openReader(ctx context.Context, tx *sql.Tx, id string) (*reader, error) {
	var key int64
	row := tx.QueryRowContext(ctx, `SELECT sid, `+readerColumns+` FROM sessions WHERE id = ?`, id)
	s, err := scanSession(prefixScanner{row, &key})
	if err == sql.ErrNoRows {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err != nil {
		return nil, err
	}
	r := &reader{ctx: ctx, tx: tx, sid: key, session: s}
	if _, err := r.scenario(); err != nil {
		return nil, err
	}
	return r, nil
}

// scenario reads the session's scenario as run.
func (r *reader) scenario() (json.RawMessage, error) {
	var packed []byte
	if err := r.tx.QueryRowContext(r.ctx, `SELECT scenario FROM sessions WHERE sid = ?`, r.sid).Scan(&packed); err != nil {
		return nil, err
	}
	doc, err := unpackJSON(packed)
	if err != nil {
		return nil, fmt.Errorf("session %s scenario: %w", r.session.ID, err)
	}
	return doc, nil
}

// prefixScanner scans a first column into key, then the rest as the
// wrapped scanner's caller asks.
type prefixScanner struct {
	s   scanner
	key *int64
}

func (p prefixScanner) Scan(dest ...any) error { return p.s.Scan(append([]any{p.key}, dest...)...) }

// Session is the session's row as read, without its scenario (Head has
// it).
func (r *reader) Session() *Session { return r.session }

// Head is the session as the trace describes it, its scenario, and its
// log's last seq. The scenario is read from the store at each call (Read
// checked that it reads), so that the reader does not hold it.
func (r *reader) Head() trace.Head {
	s := r.session
	h := trace.Head{
		Session: trace.Session{ID: s.ID, Name: s.Name, Title: s.Title, Prompt: s.Prompt, Status: s.Status,
			Error: s.Error, CreatedAt: s.CreatedAt, FinishedAt: s.FinishedAt, Tokenizer: s.Tokenizer},
		LastSeq: s.LastSeq,
	}
	h.Scenario, _ = r.scenario()
	h.Session.Origin = r.origin()
	return h
}

// origin is where the session came from, which its session.started says.
func (r *reader) origin() *delegation.Origin {
	var data string
	if r.tx.QueryRowContext(r.ctx, `SELECT data FROM events WHERE sid = ? AND type = 'session.started' ORDER BY seq LIMIT 1`,
		r.sid).Scan(&data) != nil {
		return nil
	}
	var d struct {
		Origin *delegation.Origin `json:"origin"`
	}
	if json.Unmarshal([]byte(data), &d) != nil {
		return nil
	}
	return d.Origin
}

// rowsOf runs a query and yields each row as scan reads it; an error is
// yielded once, last.
func rowsOf[T any](r *reader, scan func(*sql.Rows) (T, error), query string, args ...any) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := r.tx.QueryContext(r.ctx, query, args...)
		if err != nil {
			yield(zero, err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				yield(zero, err)
				return
			}
			if !yield(v, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(zero, err)
		}
	}
}

const agentColumns = `id, name, parent_id, mode, task_call_id, status, error, invocation,
	system_prompt, system_tokens, tools, steps, model, price`

func scanAgent(rows *sql.Rows) (trace.Agent, error) {
	var a trace.Agent
	var parent, mode, task sql.NullString
	var tools string
	var price sql.NullString
	if err := rows.Scan(&a.ID, &a.Name, &parent, &mode, &task, &a.Status, &a.Error, &a.Invocation,
		&a.SystemPrompt, &a.SystemTokens, &tools, &a.Steps, &a.Model, &price); err != nil {
		return a, err
	}
	if price.Valid {
		a.Price = &delegation.Price{}
		if err := json.Unmarshal([]byte(price.String), a.Price); err != nil {
			return a, fmt.Errorf("agent %s price: %w", a.ID, err)
		}
	}
	a.ParentID, a.Mode, a.TaskCallID = strPtr(parent), strPtr(mode), strPtr(task)
	if err := json.Unmarshal([]byte(tools), &a.Tools); err != nil {
		return a, fmt.Errorf("agent %s tools: %w", a.ID, err)
	}
	return a, nil
}

// Agents yields the session's agents in the order they started.
func (r *reader) Agents() iter.Seq2[trace.Agent, error] {
	return rowsOf(r, scanAgent, `SELECT `+agentColumns+` FROM agents WHERE sid = ? ORDER BY seq`, r.sid)
}

const messageColumns = `id, agent_id, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning`

func scanMessage(rows *sql.Rows, extra ...any) (trace.Message, error) {
	var m trace.Message
	var calls, callID sql.NullString
	dest := append([]any{&m.ID, &m.AgentID, &m.Role, &m.Content, &calls, &callID, &m.IsError, &m.Tokens, &m.Kind, &m.Reasoning}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return m, err
	}
	m.ToolCalls = []trace.ToolCall{}
	if calls.Valid {
		if err := json.Unmarshal([]byte(calls.String), &m.ToolCalls); err != nil {
			return m, fmt.Errorf("message %s tool calls: %w", m.ID, err)
		}
	}
	m.ToolCallID = strPtr(callID)
	return m, nil
}

func scanMessageRow(rows *sql.Rows) (trace.Message, error) { return scanMessage(rows) }

// Messages yields the session's messages in the order they were added.
func (r *reader) Messages() iter.Seq2[trace.Message, error] {
	return rowsOf(r, scanMessageRow, `SELECT `+messageColumns+` FROM messages WHERE sid = ? ORDER BY seq`, r.sid)
}

// Backward yields messages to-1 down to from of an agent's message list,
// newest first.
func (r *reader) Backward(agentID string, from, to int) iter.Seq2[trace.Message, error] {
	return rowsOf(r, scanMessageRow, `SELECT `+messageColumns+` FROM messages
		WHERE sid = ? AND agent_id = ? AND idx >= ? AND idx < ? ORDER BY idx DESC`, r.sid, agentID, from, to)
}

const callColumns = `id, agent_id, idx, purpose, context, system_tokens, tool_tokens,
	message_tokens, inherited_tokens, input_tokens, output_message_id, duration_ms, error, usage, at,
	cached_prefix_tokens, cost`

// scanCall reads a model call row; its system prompt and tools are its
// agent's, filled in by the caller.
func scanCall(rows *sql.Rows, extra ...any) (trace.ModelCall, error) {
	var c trace.ModelCall
	var ctxJSON string
	var out, usage, cost sql.NullString
	var at int64
	dest := append([]any{&c.ID, &c.AgentID, &c.Index, &c.Purpose, &ctxJSON, &c.SystemTokens, &c.ToolTokens,
		&c.MessageTokens, &c.InheritedTokens, &c.InputTokens, &out, &c.DurationMS, &c.Error, &usage, &at,
		&c.CachedPrefixTokens, &cost}, extra...)
	if err := rows.Scan(dest...); err != nil {
		return c, err
	}
	var err error
	if c.Context, err = unpackRanges(ctxJSON); err != nil {
		return c, fmt.Errorf("model call %s context: %w", c.ID, err)
	}
	if err := callJSON(&c, usage, cost); err != nil {
		return c, err
	}
	c.OutputMessageID, c.StartedAt = strPtr(out), fromNanos(at)
	return c, nil
}

// defaults loads each agent's system prompt and tools, once.
func (r *reader) defaults() (map[string]agentDefaults, error) {
	if r.agents != nil {
		return r.agents, nil
	}
	out := map[string]agentDefaults{}
	for a, err := range r.Agents() {
		if err != nil {
			return nil, err
		}
		out[a.ID] = agentDefaults{systemPrompt: a.SystemPrompt, tools: a.Tools}
	}
	r.agents = out
	return out, nil
}

func (r *reader) withDefaults(c *trace.ModelCall) error {
	agents, err := r.defaults()
	if err != nil {
		return err
	}
	if a, ok := agents[c.AgentID]; ok {
		c.SystemPrompt, c.Tools = a.systemPrompt, a.tools
	}
	return nil
}

// ModelCalls yields the session's model calls in the order they started.
func (r *reader) ModelCalls() iter.Seq2[trace.ModelCall, error] {
	scan := func(rows *sql.Rows) (trace.ModelCall, error) {
		c, err := scanCall(rows)
		if err == nil {
			err = r.withDefaults(&c)
		}
		return c, err
	}
	return func(yield func(trace.ModelCall, error) bool) {
		if _, err := r.defaults(); err != nil {
			yield(trace.ModelCall{}, err)
			return
		}
		rowsOf(r, scan, `SELECT `+callColumns+` FROM model_calls WHERE sid = ? ORDER BY seq`, r.sid)(yield)
	}
}

// Files yields the main agent's files, in path order.
func (r *reader) Files() iter.Seq2[trace.File, error] {
	return rowsOf(r, func(rows *sql.Rows) (trace.File, error) {
		var f trace.File
		err := rows.Scan(&f.Path, &f.Content)
		return f, err
	}, `SELECT path, content FROM files WHERE sid = ? ORDER BY path`, r.sid)
}

// Events yields the session's log as the trace writes it: the events table
// merged, by seq, with the events read back from message and model-call
// rows, which refer to their row by id.
func (r *reader) Events() iter.Seq2[delegation.Event, error] {
	return func(yield func(delegation.Event, error) bool) {
		for sp, err := range r.log(0, false) {
			if !yield(sp.Event, err) || err != nil {
				return
			}
		}
	}
}

// Log yields the session's log, each event with what it introduced, as
// trace.SplitEvent splits it: message.added with its message, model.started
// with its call (its agent's system prompt and tools included),
// model.finished with what it added to the call.
func (r *reader) Log() iter.Seq2[trace.Step, error] { return r.log(0, true) }

// A log source is one of the four cursors the log is merged from.
type logSource int

const (
	fromEvents logSource = iota
	fromMessages
	fromCallsStarted
	fromCallsFinished
)

// cursor is one open query of the log's merge, with its current row.
type cursor struct {
	src  logSource
	rows *sql.Rows
	cur  trace.Step
	ok   bool
}

// log merges, by seq, the four cursors a session's log is read from: the
// events table, and message.added, model.started and model.finished read
// back from their rows. whole reads each row whole (the message, the call);
// otherwise only what the event refers to it by.
func (r *reader) log(after int64, whole bool) iter.Seq2[trace.Step, error] {
	return func(yield func(trace.Step, error) bool) {
		if whole {
			if _, err := r.defaults(); err != nil {
				yield(trace.Step{}, err)
				return
			}
		}
		queries := [...]string{
			fromEvents:       `SELECT seq, type, agent_id, at, data FROM events WHERE sid = ? AND seq > ? ORDER BY seq`,
			fromMessages:     `SELECT seq, agent_id, at, idx, id FROM messages WHERE sid = ? AND seq > ? ORDER BY seq`,
			fromCallsStarted: `SELECT seq, agent_id, at, id FROM model_calls WHERE sid = ? AND seq > ? ORDER BY seq`,
			fromCallsFinished: `SELECT finished_seq, agent_id, finished_at, id, output_message_id, duration_ms, error, usage, cost
				FROM model_calls WHERE sid = ? AND finished_seq > ? ORDER BY finished_seq`,
		}
		if whole {
			queries[fromMessages] = `SELECT ` + messageColumns + `, seq, at, idx FROM messages WHERE sid = ? AND seq > ? ORDER BY seq`
			queries[fromCallsStarted] = `SELECT ` + callColumns + `, seq FROM model_calls WHERE sid = ? AND seq > ? ORDER BY seq`
		}
		var cursors []*cursor
		defer func() {
			for _, c := range cursors {
				c.rows.Close()
			}
		}()
		for src, q := range queries {
			rows, err := r.tx.QueryContext(r.ctx, q, r.sid, after)
			if err != nil {
				yield(trace.Step{}, err)
				return
			}
			c := &cursor{src: logSource(src), rows: rows}
			cursors = append(cursors, c)
			if err := r.advance(c, whole); err != nil {
				yield(trace.Step{}, err)
				return
			}
		}
		for {
			var next *cursor
			for _, c := range cursors {
				if c.ok && (next == nil || c.cur.Event.Seq < next.cur.Event.Seq) {
					next = c
				}
			}
			if next == nil {
				return
			}
			if !yield(next.cur, nil) {
				return
			}
			if err := r.advance(next, whole); err != nil {
				yield(trace.Step{}, err)
				return
			}
		}
	}
}

// advance reads a cursor's next row into its current split.
func (r *reader) advance(c *cursor, whole bool) error {
	if !c.rows.Next() {
		c.ok = false
		if err := c.rows.Err(); err != nil {
			return fmt.Errorf("read the log: %w", err)
		}
		return nil
	}
	var sp trace.Step
	ev := &sp.Event
	var agent sql.NullString
	var at int64
	var err error
	switch c.src {
	case fromEvents:
		var typ, data string
		if err = c.rows.Scan(&ev.Seq, &typ, &agent, &at, &data); err == nil {
			ev.Type, ev.Data = delegation.EventType(typ), json.RawMessage(data)
		}
	case fromMessages:
		ev.Type = delegation.EventMessageAdded
		if whole {
			var m trace.Message
			if m, err = scanMessage(c.rows, &ev.Seq, &at, &sp.Index); err == nil {
				sp.Message = &m
				agent = sql.NullString{String: m.AgentID, Valid: true}
				ev.Data = trace.MessageAddedData(sp.Index, m.ID)
			}
		} else {
			var id string
			if err = c.rows.Scan(&ev.Seq, &agent, &at, &sp.Index, &id); err == nil {
				ev.Data = trace.MessageAddedData(sp.Index, id)
			}
		}
	case fromCallsStarted:
		ev.Type = delegation.EventModelStarted
		if whole {
			var call trace.ModelCall
			if call, err = scanCall(c.rows, &ev.Seq); err == nil {
				at = nanos(call.StartedAt)
				if err = r.withDefaults(&call); err == nil {
					sp.Call = &call
					agent = sql.NullString{String: call.AgentID, Valid: true}
					ev.Data = trace.ModelCallData(call.ID)
				}
			}
		} else {
			var id string
			if err = c.rows.Scan(&ev.Seq, &agent, &at, &id); err == nil {
				ev.Data = trace.ModelCallData(id)
			}
		}
	case fromCallsFinished:
		ev.Type = delegation.EventModelFinished
		f := &delegation.ModelFinished{}
		var out, usage, cost sql.NullString
		if err = c.rows.Scan(&ev.Seq, &agent, &at, &f.ModelCallID, &out, &f.DurationMS, &f.Error, &usage, &cost); err == nil {
			f.OutputMessageID = out.String
			var call trace.ModelCall
			err = callJSON(&call, usage, cost)
			f.Usage, f.Cost = call.Usage, call.Cost
			sp.Finished = f
			ev.Data = trace.ModelCallData(f.ModelCallID)
		}
	}
	if err != nil {
		return fmt.Errorf("read the log: %w", err)
	}
	ev.AgentID, ev.At = agent.String, fromNanos(at)
	if c.src == fromEvents {
		if sp, err = trace.StepOf(*ev); err != nil {
			return fmt.Errorf("read the log: %w", err)
		}
	}
	c.cur, c.ok = sp, true
	return nil
}
