package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// reader is SQLite's Reader: one read-only transaction, each part a cursor
// over its rows. The log is one ordered read of the log table, joined to the
// rows its events introduced; the contents of files are read as the events
// that name them come.
type reader struct {
	ctx     context.Context
	q       querier // the read's transaction, its statements prepared once
	sid     int64
	created int64
	session *Session
	// agents holds each agent's row, which its calls' system prompt and
	// tools and its agent.started are read from; ids, the agents by
	// number, as the log names them. Each is read once, when needed.
	agents map[string]*agentRow
	ids    []string
	// memo keeps the history entries written so far (each version of a
	// history file writes all those before it again), and the rows of the
	// log block being read that its files' contents are read from.
	memo exportMemo
	// dialect is the store's engine's SQL, where it differs.
	dialect dialect
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
	r, err := openReader(ctx, tx, id, db.dialect())
	if err != nil {
		if delegation.ErrorCode(err) == delegation.ENOTFOUND {
			return err
		}
		return fmt.Errorf("read session %s: %w", id, err)
	}
	return fn(r)
}

func openReader(ctx context.Context, tx *sql.Tx, id string, d dialect) (*reader, error) {
	var key int64
	s, err := scanSession(prefixScanner{tx.QueryRowContext(ctx, `SELECT sid, `+sessionColumns+` FROM sessions WHERE id = ?`, id), &key})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err != nil {
		return nil, err
	}
	r := &reader{ctx: ctx, q: newStmtCache(tx), sid: key, created: nanos(s.CreatedAt), session: s, dialect: d}
	if _, err := r.scenario(); err != nil {
		return nil, err
	}
	return r, nil
}

// scenario reads the session's scenario as run.
func (r *reader) scenario() (json.RawMessage, error) {
	return readScenario(r.ctx, r.q, r.sid, r.session.ID)
}

func readScenario(ctx context.Context, q querier, sid int64, id string) (json.RawMessage, error) {
	var packed []byte
	err := q.QueryRowContext(ctx, `SELECT scenario FROM session_scenarios WHERE sid = ?`, sid).Scan(&packed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	doc, err := unpackJSON(packed)
	if err != nil {
		return nil, fmt.Errorf("session %s scenario: %w", id, err)
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
	for st, err := range r.logWhere(0, false, func(e *entry) bool { return e.code == typeCodes[delegation.EventSessionStarted] }) {
		if err != nil {
			return nil
		}
		var d struct {
			Origin *delegation.Origin `json:"origin"`
		}
		if json.Unmarshal(st.Event.Data, &d) != nil {
			return nil
		}
		return d.Origin
	}
	return nil
}

// rowsOf runs a query and yields each row as scan reads it; an error is
// yielded once, last.
func rowsOf[T any](ctx context.Context, q querier, scan func(*sql.Rows) (T, error), query string, args ...any) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		var zero T
		rows, err := q.QueryContext(ctx, query, args...)
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

// Agents yields the session's agents in the order they started.
func (r *reader) Agents() iter.Seq2[trace.Agent, error] {
	return rowsOf(r.ctx, r.q, func(rows *sql.Rows) (trace.Agent, error) {
		a, err := scanAgentRow(rows)
		return a.Agent, err
	}, `SELECT `+agentColumns+` FROM agents WHERE sid = ? ORDER BY seq`, r.sid)
}

func scanMessageRow(rows *sql.Rows) (trace.Message, error) {
	m, err := scanMessage(rows)
	return m.Message, err
}

// Messages yields the session's messages in the order they were added:
// their message.added events' order.
func (r *reader) Messages() iter.Seq2[trace.Message, error] {
	return func(yield func(trace.Message, error) bool) {
		added := typeCodes[delegation.EventMessageAdded]
		for st, err := range r.logWhere(0, true, func(e *entry) bool { return e.code == added }) {
			if err == nil && st.Message == nil {
				err = fmt.Errorf("event %d: message.added without its message", st.Event.Seq)
			}
			if err != nil {
				yield(trace.Message{}, err)
				return
			}
			if !yield(*st.Message, nil) {
				return
			}
		}
	}
}

// Backward yields messages to-1 down to from of an agent's message list,
// newest first.
func (r *reader) Backward(agentID string, from, to int) iter.Seq2[trace.Message, error] {
	return rowsOf(r.ctx, r.q, scanMessageRow, `SELECT `+messageColumns+` FROM messages m
		WHERE m.sid = ? AND m.agent_id = ? AND m.idx >= ? AND m.idx < ? ORDER BY m.idx DESC`, r.sid, agentID, from, to)
}

// agentRows loads each agent's row, once.
func (r *reader) agentRows() (map[string]*agentRow, error) {
	if r.agents != nil {
		return r.agents, nil
	}
	out := map[string]*agentRow{}
	for a, err := range rowsOf(r.ctx, r.q, func(rows *sql.Rows) (agentRow, error) { return scanAgentRow(rows) },
		`SELECT `+agentColumns+` FROM agents WHERE sid = ?`, r.sid) {
		if err != nil {
			return nil, err
		}
		out[a.ID] = &a
	}
	r.agents = out
	return out, nil
}

// withDefaults gives a call its agent's system prompt and tools, which it
// received and which are stored once, with the agent.
func (r *reader) withDefaults(c *trace.ModelCall) error {
	agents, err := r.agentRows()
	if err != nil {
		return err
	}
	if a, ok := agents[c.AgentID]; ok {
		c.SystemPrompt, c.Tools = a.SystemPrompt, a.Tools
	}
	return nil
}

// ModelCalls yields the session's model calls in the order they started.
func (r *reader) ModelCalls() iter.Seq2[trace.ModelCall, error] {
	return func(yield func(trace.ModelCall, error) bool) {
		if _, err := r.agentRows(); err != nil {
			yield(trace.ModelCall{}, err)
			return
		}
		rowsOf(r.ctx, r.q, func(rows *sql.Rows) (trace.ModelCall, error) {
			c, err := scanCall(rows, r.created)
			if err == nil {
				err = r.withDefaults(&c.ModelCall)
			}
			return c.ModelCall, err
		}, `SELECT `+callColumns+` FROM model_calls c`+r.dialect.indexedBy("model_calls_step")+` WHERE c.sid = ? ORDER BY c.n`, r.sid)(yield)
	}
}

// argPart is the SQL of an argument reference's part i (contents.arg is a
// JSON array: the message's agent, its index, …): the agent as text, the
// index as an integer.
func (r *reader) argPart(i int) string {
	if i == 0 {
		return r.dialect.jsonText("c.arg", 0)
	}
	return r.dialect.jsonInt("c.arg", i)
}

// Files yields the main agent's files, in path order, each whole. A
// version that is an argument is read with the message that holds it.
func (r *reader) Files() iter.Seq2[trace.File, error] {
	type row struct {
		path, text string
		n          int64
		whole      bool // its text is all of it
		arg, calls sql.NullString
	}
	return func(yield func(trace.File, error) bool) {
		for f, err := range rowsOf(r.ctx, r.q, func(rows *sql.Rows) (row, error) {
			var f row
			err := rows.Scan(&f.path, &f.n, &f.whole, &f.text, &f.arg, &f.calls)
			return f, err
		}, `SELECT f.path, f.content, c.base IS NULL AND c.history IS NULL AND c.arg IS NULL, c.text, c.arg, m.tool_calls FROM files f
			JOIN contents c ON c.sid = f.sid AND c.n = f.content
			LEFT JOIN messages m ON c.arg IS NOT NULL AND m.sid = c.sid AND m.agent_id = `+r.argPart(0)+`
				AND m.idx = `+r.argPart(1)+`
			WHERE f.sid = ? AND f.agent_id = ? ORDER BY f.path`, r.sid, trace.MainAgent) {
			if err != nil {
				yield(trace.File{}, err)
				return
			}
			text := f.text
			switch {
			case f.arg.Valid:
				text, err = argText(r.ctx, r.q, r.sid, f.arg.String, func(string, int) ([]trace.ToolCall, bool) {
					var calls []trace.ToolCall
					return calls, f.calls.Valid && json.Unmarshal([]byte(f.calls.String), &calls) == nil
				})
			case !f.whole:
				text, err = textOf(r.content, f.n)
			}
			if !yield(trace.File{Path: f.path, Content: text}, err) || err != nil {
				return
			}
		}
	}
}

// Events yields the session's log as the trace writes it: events that
// introduced a message or a model call refer to it by id.
func (r *reader) Events() iter.Seq2[delegation.Event, error] {
	return func(yield func(delegation.Event, error) bool) {
		for st, err := range r.log(0, false) {
			if !yield(st.Event, err) || err != nil {
				return
			}
		}
	}
}

// Log yields the session's log, each event a step with what it introduced
// and its data read: message.added with its message, model.started with
// its call (its agent's system prompt and tools included), model.finished
// with what it added to the call.
func (r *reader) Log() iter.Seq2[trace.Step, error] { return r.log(0, true) }

// log yields the log after a seq. whole reads what each event introduced
// and decodes its data (a step); otherwise only the event, as the trace
// writes it.
func (r *reader) log(after int64, whole bool) iter.Seq2[trace.Step, error] {
	return r.logWhere(after, whole, nil)
}

// agentIDs are the session's agents by number, as the log names them.
func (r *reader) agentIDs() ([]string, error) {
	if r.ids != nil {
		return r.ids, nil
	}
	ids := []string{}
	for id, err := range rowsOf(r.ctx, r.q, func(rows *sql.Rows) (string, error) {
		var id string
		err := rows.Scan(&id)
		return id, err
	}, `SELECT id FROM agents WHERE sid = ? ORDER BY n`, r.sid) {
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	r.ids = ids
	return ids, nil
}

// logWhere is log of the events keep takes (nil: all).
func (r *reader) logWhere(after int64, whole bool, keep func(*entry) bool) iter.Seq2[trace.Step, error] {
	return func(yield func(trace.Step, error) bool) {
		if whole {
			if _, err := r.agentRows(); err != nil {
				yield(trace.Step{}, err)
				return
			}
		}
		for b, err := range blocks(r.ctx, r.q, r.sid, after, r.agentIDs) {
			if err != nil {
				yield(trace.Step{}, err)
				return
			}
			var todo []int
			for i := range b.entries {
				if b.first+int64(i) > after && (keep == nil || keep(&b.entries[i])) {
					todo = append(todo, i)
				}
			}
			rows, err := r.resolve(b, todo, whole)
			if err != nil {
				yield(trace.Step{}, fmt.Errorf("read the log: %w", err))
				return
			}
			for _, i := range todo {
				r.memo.block, r.memo.contents = rows.msgs, rows.contents
				st, err := r.step(b.first+int64(i), &b.entries[i], rows, whole)
				r.memo.block, r.memo.contents = nil, nil
				if err != nil {
					yield(st, fmt.Errorf("read the log: %w", err))
					return
				}
				if !yield(st, nil) {
					return
				}
			}
		}
	}
}

// resolved are the rows a block's events restate.
type resolved struct {
	msgs     map[place]*Message
	calls    map[place]*callRow
	contents map[int64]contentRow // the versions its files.changed name
}

// resolve reads, a few queries a block, the rows its events restate: the
// messages message.added introduced and tool events are of, the calls of
// model.* (whole only).
func (r *reader) resolve(b block, todo []int, whole bool) (*resolved, error) {
	msgs, calls := map[string][]any{}, map[string][]any{}
	for _, i := range todo {
		e := &b.entries[i]
		if !e.hasRef {
			continue
		}
		switch e.code {
		case typeCodes[delegation.EventToolStarted], typeCodes[delegation.EventToolFinished]:
			msgs[e.agent] = append(msgs[e.agent], e.ref)
		case typeCodes[delegation.EventMessageAdded]:
			if whole {
				msgs[e.agent] = append(msgs[e.agent], e.ref)
			}
		case typeCodes[delegation.EventModelStarted], typeCodes[delegation.EventModelFinished]:
			if whole {
				calls[e.agent] = append(calls[e.agent], e.ref)
			}
		}
	}
	out := &resolved{msgs: map[place]*Message{}, calls: map[place]*callRow{}}
	for agent, idxs := range msgs {
		rows, err := r.q.QueryContext(r.ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.sid = ? AND m.agent_id = ? AND m.idx IN (`+
			placeholders(len(idxs))+`)`, append([]any{r.sid, agent}, idxs...)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			m, err := scanMessage(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out.msgs[place{agent, m.Index}] = &m
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	for agent, idxs := range calls {
		rows, err := r.q.QueryContext(r.ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.agent_id = ? AND c.idx IN (`+
			placeholders(len(idxs))+`)`, append([]any{r.sid, agent}, idxs...)...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			c, err := scanCall(rows, r.created)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out.calls[place{agent, c.Index}] = &c
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, r.resolveContents(b, todo, out)
}

// resolveContents reads, in one query, the versions a block's files.changed
// name.
func (r *reader) resolveContents(b block, todo []int, out *resolved) error {
	var ns []any
	for _, i := range todo {
		e := &b.entries[i]
		if !e.hasRef || e.code != typeCodes[delegation.EventFilesChanged] {
			continue
		}
		_, files, err := packedFilesChanged(e.data)
		if err != nil {
			return err
		}
		for _, f := range files {
			if !f.deleted {
				ns = append(ns, f.n)
			}
		}
	}
	if len(ns) == 0 {
		return nil
	}
	out.contents = make(map[int64]contentRow, len(ns))
	rows, err := r.q.QueryContext(r.ctx, `SELECT n, base, size, text, history, arg FROM contents WHERE sid = ? AND n IN (`+
		placeholders(len(ns))+`)`, append([]any{r.sid}, ns...)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c contentRow
		if err := rows.Scan(&c.n, &c.base, &c.size, &c.text, &c.history, &c.arg); err != nil {
			return err
		}
		out.contents[c.n] = c
	}
	return rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// step reads one event of the log back.
func (r *reader) step(seq int64, e *entry, rows *resolved, whole bool) (trace.Step, error) {
	var st trace.Step
	ev := &st.Event
	ev.Seq, ev.AgentID, ev.At = seq, e.agent, fromNanos(r.created+e.at)
	if e.code == 0 {
		ev.Type = delegation.EventType(e.name)
	} else if t, ok := codeTypes[e.code]; ok {
		ev.Type = t
	} else {
		return st, fmt.Errorf("event %d: unknown type code %d", seq, e.code)
	}
	if !e.hasRef {
		// Kept as the trace writes it.
		ev.Data = json.RawMessage(e.data)
		if !whole {
			return st, nil
		}
		return trace.StepOf(*ev)
	}
	idx := int(e.ref)
	var err error
	switch ev.Type {
	case delegation.EventMessageAdded:
		id := messageID(ev.AgentID, idx)
		if e.hasData {
			id = string(e.data)
		}
		ev.Data = trace.MessageAddedData(idx, id)
		if !whole {
			return st, nil
		}
		m := rows.msgs[place{ev.AgentID, idx}]
		if m == nil {
			return st, fmt.Errorf("event %d: no message %d of %s", seq, idx, ev.AgentID)
		}
		msg := m.Message
		return trace.Introduced(*ev, idx, &msg, nil, nil), nil
	case delegation.EventModelStarted, delegation.EventModelFinished:
		id := callID(ev.AgentID, idx)
		if e.hasData {
			id = string(e.data)
		}
		ev.Data = trace.ModelCallData(id)
		if !whole {
			return st, nil
		}
		c := rows.calls[place{ev.AgentID, idx}]
		if c == nil {
			return st, fmt.Errorf("event %d: no model call %d of %s", seq, idx, ev.AgentID)
		}
		call := c.ModelCall
		if ev.Type == delegation.EventModelFinished {
			return trace.Introduced(*ev, 0, nil, nil, call.Finished()), nil
		}
		if err := r.withDefaults(&call); err != nil {
			return st, err
		}
		return trace.Introduced(*ev, 0, nil, &call, nil), nil
	case delegation.EventToolStarted, delegation.EventToolFinished:
		m := rows.msgs[place{ev.AgentID, idx}]
		if m == nil {
			return st, fmt.Errorf("event %d: no message %d of %s", seq, idx, ev.AgentID)
		}
		ev.Data, err = unpackTool(ev.Type, m.ToolCalls, e.data)
	case delegation.EventAgentStarted:
		agents, aerr := r.agentRows()
		if aerr != nil {
			return st, aerr
		}
		a := agents[ev.AgentID]
		if a == nil {
			return st, fmt.Errorf("event %d: no agent %s", seq, ev.AgentID)
		}
		ev.Data, err = unpackAgentStarted(a)
	case delegation.EventSessionStarted:
		ev.Data, err = unpackSessionStarted(e.data, r.content)
	case delegation.EventFilesChanged:
		ev.Data, err = unpackFilesChanged(e.data, r.content)
	default:
		err = fmt.Errorf("a %s event restates no row", ev.Type)
	}
	if err != nil {
		return st, fmt.Errorf("event %d (%s): %w", seq, ev.Type, err)
	}
	if !whole {
		return st, nil
	}
	return trace.StepOf(*ev)
}

// content reads a file content of the session: its size, and a function
// that writes it.
func (r *reader) content(n int64) (int64, func(io.Writer) error, error) {
	chain := []contentRow{r.memo.contents[n]}
	if c, ok := r.memo.contents[n]; !ok || c.base.Valid {
		var err error
		if chain, err = chainOf(r.ctx, r.q, r.sid, n); err != nil {
			return 0, nil, err
		}
	}
	return chain[0].size, func(w io.Writer) error { return writeChain(r.ctx, r.q, r.sid, chain, w, &r.memo) }, nil
}
