package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// A session's log is its blocks of events (logcodec.go, logblocks.go). What
// an event introduced is written once, in its own row, and an event that
// restates a row refers to it and is read back from it (cursor.go). An
// event is stored so only when reading it back gives its exact bytes again
// (packing.go); otherwise its data is kept as the trace writes it. A live
// session, an import and recovery all append through the appender.

// logHead is what appending needs of a session's row.
type logHead struct {
	id      string
	sid     int64
	created int64 // unix nanoseconds: log times are after it
	status  string
	last    int64 // the log's last seq
	calls   int64 // model calls so far: the next one's step is calls+1
	// notify: an append tells the other replicas (a PostgreSQL store).
	notify bool
	// stmts are the writer's statements, prepared once.
	stmts *sharedStmts
}

// readHead reads a session's head within a write transaction, its row
// locked until the transaction ends.
func (db *DB) readHead(ctx context.Context, q querier, id string) (logHead, error) {
	h := logHead{id: id, notify: db.pg, stmts: db.stmts}
	err := q.QueryRowContext(ctx, `SELECT sid, created_at, status, last_seq, model_calls FROM sessions WHERE id = ?`+db.dialect().forUpdate(), id).
		Scan(&h.sid, &h.created, &h.status, &h.last, &h.calls)
	if errors.Is(err, sql.ErrNoRows) {
		return h, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	return h, err
}

// ErrSessionEnded is what an append to the log of a session that has ended
// is (errors.Is): for a live process, another one ended its session
// because its lease lapsed.
var ErrSessionEnded = errors.New("the session has ended")

// endedError is the ECONFLICT of an append after the end; it is
// ErrSessionEnded.
type endedError struct{ e *delegation.Error }

func (x endedError) Error() string        { return x.e.Error() }
func (x endedError) Unwrap() error        { return x.e }
func (x endedError) Is(target error) bool { return target == ErrSessionEnded }

// AppendEvents appends events of one session's log, in one transaction: the
// events, and what they introduced or changed (agents, messages, model
// calls, files, the session's status). Seq must follow the log's last
// without a gap, and only a running session's log grows. Events of seq 0
// are live only and are skipped.
func (db *DB) AppendEvents(ctx context.Context, sessionID string, events []delegation.Event) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		h, err := db.readHead(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		// The log only grows at its end, and only while the session runs:
		// a process whose lease lapsed (and whose session another process
		// then ended) must not write after that end.
		if h.status != delegation.StatusRunning {
			return endedError{delegation.Errorf(delegation.ECONFLICT, "session %s has ended (%s); its log takes no more events", sessionID, h.status)}
		}
		return appendEvents(ctx, tx, h, events)
	})
	if err != nil {
		return fmt.Errorf("append events for session %s: %w", sessionID, err)
	}
	return nil
}

// appendEvents appends events, each read as the log's one reading
// (trace.StepOf) says.
func appendEvents(ctx context.Context, tx *sql.Tx, h logHead, events []delegation.Event) error {
	a, err := newAppender(ctx, tx, h)
	if err != nil {
		return err
	}
	defer a.close()
	for _, ev := range events {
		if ev.Seq == 0 {
			continue
		}
		st, err := trace.StepOf(ev)
		if err != nil {
			return err
		}
		if err := a.add(st); err != nil {
			return err
		}
	}
	return a.done()
}

// appender writes steps of one session's log within one transaction.
type appender struct {
	ctx   context.Context
	tx    *sql.Tx
	q     *stmtCache // tx, its statements prepared once
	h     logHead
	log   *logWriter
	msg   *sql.Stmt
	call  *sql.Stmt
	fin   *sql.Stmt
	files *contentWriter
	// agentN numbers the session's agents, as the log names them.
	agentN map[string]int
	// asked is each agent's latest assistant message with tool calls,
	// which its tool events name; placed, the calls started in this
	// transaction, by id; folding, each agent's summary call under way,
	// whose history its next files.changed writes.
	asked   map[string]asked
	placed  map[string]place
	folding map[string]*trace.ModelCall

	start                 int64 // the last seq before this transaction
	agents, calls, tokens int
}

// asked is an assistant message's tool calls and its place.
type asked struct {
	idx   int
	calls []trace.ToolCall
}

// place is a model call's agent and index.
type place struct {
	agent string
	idx   int
}

func newAppender(ctx context.Context, tx *sql.Tx, h logHead) (*appender, error) {
	q := newStmtCache(tx)
	q.shared = h.stmts
	a := &appender{ctx: ctx, tx: tx, q: q, h: h, start: h.last, agentN: map[string]int{}, asked: map[string]asked{},
		placed: map[string]place{}, folding: map[string]*trace.ModelCall{}, files: &contentWriter{ctx: ctx, q: q, sid: h.sid}}
	var err error
	if a.log, err = openLogWriter(ctx, q, h.sid); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, n FROM agents WHERE sid = ?`, h.sid)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return nil, err
		}
		a.agentN[id] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&a.msg, insertMessageSQL},
		{&a.call, insertCallSQL},
		{&a.fin, finishCallSQL},
	} {
		if *p.st, err = q.prepare(ctx, p.sql); err != nil {
			a.close()
			return nil, err
		}
	}
	return a, nil
}

// close closes its statements (its own; the shared ones stay).
func (a *appender) close() { a.q.close() }

// add appends one step: its event to the log, and what it introduced or
// changed to its rows.
func (a *appender) add(st trace.Step) error {
	ev := st.Event
	if ev.Seq != a.h.last+1 {
		return delegation.Errorf(delegation.ECONFLICT, "event seq %d does not follow the log's last seq %d", ev.Seq, a.h.last)
	}
	stored, err := st.Stored()
	if err != nil {
		return err
	}
	e := entry{agent: ev.AgentID, at: since(a.h.created, ev.At), data: stored.Data, hasData: true}
	switch {
	case st.Message != nil:
		m := st.Message
		if err := insertMessage(a.ctx, a.msg, a.h.sid, st.Index, m); err != nil {
			return err
		}
		e.agent, e.ref, e.hasRef = m.AgentID, int64(st.Index), true
		e.data, e.hasData = idUnlessDerived(m.ID, messageID(m.AgentID, st.Index))
		if m.Role == string(delegation.RoleAssistant) && len(m.ToolCalls) > 0 {
			a.asked[m.AgentID] = asked{idx: st.Index, calls: m.ToolCalls}
		}
	case st.Call != nil:
		if err := a.addCall(st, &e); err != nil {
			return err
		}
	case st.Finished != nil:
		p, ok := a.placed[st.Finished.ModelCallID]
		if !ok {
			if p.agent, p.idx, err = callPlace(a.ctx, a.q, a.h.sid, ev.AgentID, st.Finished.ModelCallID); err != nil {
				return err
			}
		}
		if err := finishCall(a.ctx, a.fin, a.h.sid, p.agent, p.idx, st.Finished); err != nil {
			return err
		}
		e.agent, e.ref, e.hasRef = p.agent, int64(p.idx), true
		e.data, e.hasData = idUnlessDerived(st.Finished.ModelCallID, callID(p.agent, p.idx))
	case st.ToolStarted != nil, st.ToolFinished != nil:
		if ref, packed, ok, err := a.packTool(st, stored.Data); err != nil {
			return err
		} else if ok {
			e.ref, e.hasRef, e.data = ref, true, packed
		}
	case st.AgentStarted != nil:
		if err := a.addAgent(st, stored.Data, &e); err != nil {
			return err
		}
	case st.AgentFinished != nil:
		d := st.AgentFinished
		if _, err := a.q.ExecContext(a.ctx, `UPDATE agents SET status = ?, error = ?, steps = ? WHERE sid = ? AND id = ?`,
			d.Status, d.Error, d.Steps, a.h.sid, ev.AgentID); err != nil {
			return err
		}
	case st.SessionStarted != nil:
		d := st.SessionStarted
		if _, err := a.q.ExecContext(a.ctx, `UPDATE sessions SET prompt = ?, tokenizer = ?, origin = ? WHERE sid = ?`,
			d.Prompt, d.Tokenizer, d.Origin.OriginKind(), a.h.sid); err != nil {
			return err
		}
		if packed, ok, err := a.packSessionStarted(st, stored.Data); err != nil {
			return err
		} else if ok {
			e.ref, e.hasRef, e.data = 1, true, packed
		}
	case st.SessionFinished != nil:
		d := st.SessionFinished
		if _, err := a.q.ExecContext(a.ctx, `UPDATE sessions SET status = ?, error = ?, finished_at = ? WHERE sid = ?`,
			d.Status, d.Error, nanos(ev.At), a.h.sid); err != nil {
			return err
		}
	case st.FilesChanged != nil:
		if packed, ok, err := a.packFilesChanged(st, stored.Data); err != nil {
			return err
		} else if ok {
			e.ref, e.hasRef, e.data = 1, true, packed
		}
	}
	if st.Summarization != nil {
		delete(a.folding, ev.AgentID)
	}
	if n, ok := a.agentN[e.agent]; ok {
		e.agentN = n
	} else {
		e.agentN = -1
	}
	if code, ok := typeCodes[ev.Type]; ok {
		e.code = code
	} else {
		e.name = string(ev.Type)
	}
	if err := a.log.add(ev.Seq, &e); err != nil {
		return err
	}
	a.h.last = ev.Seq
	return nil
}

// addCall stores a model.started's call row.
func (a *appender) addCall(st trace.Step, e *entry) error {
	c := st.Call
	if err := insertCall(a.ctx, a.call, a.h.sid, a.h.calls+1, st.Event.Seq, since(a.h.created, st.Event.At), c); err != nil {
		return err
	}
	a.h.calls++
	a.calls++
	a.tokens += c.InputTokens
	a.placed[c.ID] = place{c.AgentID, c.Index}
	if c.Purpose == string(delegation.PurposeSummary) {
		a.folding[c.AgentID] = c
	}
	e.agent, e.ref, e.hasRef = c.AgentID, int64(c.Index), true
	e.data, e.hasData = idUnlessDerived(c.ID, callID(c.AgentID, c.Index))
	return nil
}

// addAgent stores an agent.started's agent row; the event keeps no data
// when the row gives it back exactly.
func (a *appender) addAgent(st trace.Step, data json.RawMessage, e *entry) error {
	d := st.AgentStarted
	n := len(a.agentN)
	if _, dup := a.agentN[d.Agent.ID]; dup {
		return fmt.Errorf("agent %s started twice", d.Agent.ID)
	}
	tools, _ := json.Marshal(d.Tools)
	if _, err := a.q.ExecContext(a.ctx, `INSERT INTO agents (sid, id, n, seq, name, parent_id, mode, task_call_id,
		status, invocation, system_prompt, system_tokens, tools, max_steps, model, endpoint, price)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.h.sid, d.Agent.ID, n, st.Event.Seq, d.Agent.Name, nullString(&d.Agent.ParentID), nullString((*string)(&d.Agent.Mode)),
		nullString(&d.Agent.TaskCallID), d.Agent.Invocation, d.SystemPrompt, d.SystemTokens, string(tools),
		d.MaxSteps, d.Model, d.Endpoint, jsonOrNull(d.Price)); err != nil {
		return fmt.Errorf("agent %s: %w", d.Agent.ID, err)
	}
	a.agentN[d.Agent.ID] = n
	a.agents++
	// Read back from its agent's row, when that gives it exactly.
	if back, err := unpackAgentStarted(agentRowOf(d)); err == nil && st.Event.AgentID == d.Agent.ID && string(back) == string(data) {
		e.ref, e.hasRef, e.data, e.hasData = 0, true, nil, false
	}
	return nil
}

// done writes the log's open block and records what the transaction
// appended in the session's row.
func (a *appender) done() error {
	if err := a.log.flush(); err != nil {
		return err
	}
	if a.h.last == a.start {
		return nil
	}
	_, err := a.q.ExecContext(a.ctx, `UPDATE sessions SET last_seq = ?, agents = agents + ?, model_calls = model_calls + ?,
		input_tokens = input_tokens + ? WHERE sid = ?`, a.h.last, a.agents, a.calls, a.tokens, a.h.sid)
	if err != nil || !a.h.notify {
		return err
	}
	// Delivered when the transaction commits, and only then: a replica
	// told of seq N reads every event through N.
	_, err = a.tx.ExecContext(a.ctx, `SELECT pg_notify(?, ?)`, LogChannel, strconv.FormatInt(a.h.last, 10)+" "+a.h.id)
	return err
}

// idUnlessDerived is the data of an event that names a row by its place:
// its id when that is not the one its place gives.
func idUnlessDerived(id, derived string) ([]byte, bool) {
	if id == derived {
		return nil, false
	}
	return []byte(id), true
}

// packTool stores a tool.started or tool.finished as the place of the
// assistant message that asked for the call (ref) and the call's position
// in it, with, for tool.finished, how it ended: "position,is_error,ms"
// (just the position for a quick success).
func (a *appender) packTool(st trace.Step, data []byte) (int64, []byte, bool, error) {
	ev := st.Event
	callID := ""
	if st.ToolStarted != nil {
		callID = st.ToolStarted.ToolCallID
	} else {
		callID = st.ToolFinished.ToolCallID
	}
	m, ok := a.asked[ev.AgentID]
	if !ok || position(m.calls, callID) < 0 {
		var err error
		if m, ok, err = lastAsked(a.ctx, a.q, a.h.sid, ev.AgentID); err != nil || !ok {
			return 0, nil, false, err
		}
		a.asked[ev.AgentID] = m
	}
	pos := position(m.calls, callID)
	if pos < 0 {
		return 0, nil, false, nil
	}
	packed := strconv.Itoa(pos)
	if d := st.ToolFinished; d != nil && (d.IsError || d.DurationMS != 0) {
		isErr := 0
		if d.IsError {
			isErr = 1
		}
		packed = fmt.Sprintf("%d,%d,%d", pos, isErr, d.DurationMS)
	}
	back, err := unpackTool(ev.Type, m.calls, []byte(packed))
	if err != nil || string(back) != string(data) {
		return 0, nil, false, nil
	}
	return int64(m.idx), []byte(packed), true, nil
}

func position(calls []trace.ToolCall, id string) int {
	for i, c := range calls {
		if c.ID == id {
			return i
		}
	}
	return -1
}

// lastAsked reads an agent's latest assistant message with tool calls: the
// one whose calls its tool events are of.
func lastAsked(ctx context.Context, q querier, sid int64, agent string) (asked, bool, error) {
	var m asked
	var calls string
	err := q.QueryRowContext(ctx, `SELECT idx, tool_calls FROM messages WHERE sid = ? AND agent_id = ? AND tool_calls IS NOT NULL
		ORDER BY idx DESC LIMIT 1`, sid, agent).Scan(&m.idx, &calls)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	if err := json.Unmarshal([]byte(calls), &m.calls); err != nil {
		return m, false, fmt.Errorf("message %d of %s tool calls: %w", m.idx, agent, err)
	}
	return m, true, nil
}

// putFiles stores an agent's changes to its files and returns them packed
// ([[path, content number], …], null for a deleted file), with each
// content by its number, for reading them back at once.
func (a *appender) putFiles(agent, from string, changes []delegation.FileChange) (string, map[int64]string, error) {
	packed := make([][2]any, 0, len(changes))
	texts := map[int64]string{}
	for _, c := range changes {
		if c.Deleted {
			if err := a.files.remove(agent, c.Path); err != nil {
				return "", nil, err
			}
			packed = append(packed, [2]any{c.Path, nil})
			continue
		}
		var n int64
		var err error
		var call *trace.ModelCall
		if from == "" && delegation.IsHistoryPath(c.Path) {
			if call, err = a.summaryCall(agent); err != nil {
				return "", nil, err
			}
		}
		if call != nil {
			n, err = a.files.putHistory(agent, c.Path, c.Content, call)
		} else {
			var arg *argRef
			if from == "" {
				if arg, err = a.argOf(agent, c.Content); err != nil {
					return "", nil, err
				}
			}
			n, err = a.files.put(agent, c.Path, c.Content, from, arg)
		}
		if err != nil {
			return "", nil, err
		}
		if err := a.files.set(agent, c.Path, n); err != nil {
			return "", nil, err
		}
		packed = append(packed, [2]any{c.Path, n})
		texts[n] = c.Content
	}
	b, err := json.Marshal(packed)
	return string(b), texts, err
}

// summaryCall is the agent's summary call under way, whose history its
// files.changed writes: started in this transaction, or its latest call
// when that is a summary call (a batch may end between the two).
func (a *appender) summaryCall(agent string) (*trace.ModelCall, error) {
	if c := a.folding[agent]; c != nil {
		return c, nil
	}
	c, err := scanCall(a.q.QueryRowContext(a.ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.agent_id = ?
		ORDER BY c.idx DESC LIMIT 1`, a.h.sid, agent), a.h.created)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && c.Purpose != string(delegation.PurposeSummary)) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	a.folding[agent] = &c.ModelCall
	return &c.ModelCall, nil
}

// argOf is the argument of the agent's latest tool calls that a content
// it wrote is, if it is one: write_file's content.
func (a *appender) argOf(agent, text string) (*argRef, error) {
	if len(text) < 32 {
		return nil, nil
	}
	m, ok := a.asked[agent]
	if !ok {
		var err error
		if m, ok, err = lastAsked(a.ctx, a.q, a.h.sid, agent); err != nil || !ok {
			return nil, err
		}
		a.asked[agent] = m
	}
	ref, _ := argOf(agent, m.idx, m.calls, text)
	return ref, nil
}

// inMemory reads contents from a map, as putFiles returns it.
func inMemory(texts map[int64]string) contentOf {
	return func(n int64) (int64, func(io.Writer) error, error) {
		t, ok := texts[n]
		if !ok {
			return 0, nil, fmt.Errorf("no content %d", n)
		}
		return int64(len(t)), func(w io.Writer) error {
			_, err := io.WriteString(w, t)
			return err
		}, nil
	}
}

// packFilesChanged stores the changes and the event as its packed changes,
// or [from, packed changes] for a child's that came back.
func (a *appender) packFilesChanged(st trace.Step, data []byte) ([]byte, bool, error) {
	d := st.FilesChanged
	files, texts, err := a.putFiles(st.Event.AgentID, d.From, d.Changes)
	if err != nil {
		return nil, false, err
	}
	if d.Changes == nil {
		files = "null"
	}
	packed := []byte(files)
	if d.From != "" {
		if packed, err = json.Marshal([]any{d.From, json.RawMessage(files)}); err != nil {
			return nil, false, err
		}
	}
	back, err := unpackFilesChanged(packed, inMemory(texts))
	if err != nil || string(back) != string(data) {
		return nil, false, nil
	}
	return packed, true, nil
}

// packSessionStarted stores the session's first files (the main agent's)
// and the event as [its data but files, packed files].
func (a *appender) packSessionStarted(st trace.Step, data []byte) ([]byte, bool, error) {
	changes, _ := st.MainFiles()
	files, texts, err := a.putFiles(trace.MainAgent, "", changes)
	if err != nil {
		return nil, false, err
	}
	d := *st.SessionStarted
	if d.Files == nil {
		files = "null"
	}
	d.Files = nil
	rest, err := json.Marshal(d)
	if err != nil {
		return nil, false, err
	}
	packed, err := json.Marshal([]any{json.RawMessage(rest), json.RawMessage(files)})
	if err != nil {
		return nil, false, err
	}
	back, err := unpackSessionStarted(packed, inMemory(texts))
	if err != nil || string(back) != string(data) {
		return nil, false, nil
	}
	return packed, true, nil
}
