package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// The narrow reads of a session's pages: each reads the rows it shows, by
// key, never the whole session. A PageReader holds one read transaction, so
// what a page reads is one moment of the session.

// prepared caches the read pool's prepared statements of the page reads: a
// page's reads are few and small, and parsing their SQL anew each time cost
// more than running it. A statement is prepared outside any read, before
// the read after the one that first wanted it: preparing on the pool from
// within a read could wait for a connection that every other read holds.
var (
	prepared sync.Map // preparedKey → *sql.Stmt
	wanted   sync.Map // preparedKey → struct{}
)

type preparedKey struct {
	pool  *sql.DB
	query string
}

// prepareWanted prepares the statements reads asked for since the last.
func (db *DB) prepareWanted(ctx context.Context) {
	wanted.Range(func(k, _ any) bool {
		key := k.(preparedKey)
		if key.pool != db.r {
			return true
		}
		wanted.Delete(k)
		if _, ok := prepared.Load(key); ok {
			return true
		}
		if st, err := db.r.PrepareContext(ctx, key.query); err == nil {
			if _, loaded := prepared.LoadOrStore(key, st); loaded {
				st.Close()
			}
		}
		return true
	})
}

// query runs a statement within the read, prepared once it is cached.
func (r *pageReader) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(query); st != nil {
		return r.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return r.tx.QueryContext(ctx, query, args...)
}

func (r *pageReader) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(query); st != nil {
		return r.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return r.tx.QueryRowContext(ctx, query, args...)
}

func (r *pageReader) stmt(query string) *sql.Stmt {
	key := preparedKey{r.pool, query}
	if st, ok := prepared.Load(key); ok {
		return st.(*sql.Stmt)
	}
	wanted.Store(key, struct{}{})
	return nil
}

// pageReader is SQLite's PageReader: one read transaction.
type pageReader struct {
	pool    *sql.DB
	tx      *sql.Tx
	sid     int64
	session *Session
}

var _ PageReader = (*pageReader)(nil)

// Session is the session's row as the read began, but for its scenario.
func (r *pageReader) Session() *Session { return r.session }

// ReadPage begins a read of a session: its row now, and every later read of
// the PageReader sees the store as it was at that moment. Close it.
func (db *DB) ReadPage(ctx context.Context, id string) (PageReader, error) {
	db.prepareWanted(ctx)
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	r := &pageReader{pool: db.r, tx: tx}
	// The first read fixes the transaction's snapshot. The scenario is not
	// read: a page does not show it, and it is stored packed.
	var key, created int64
	var finished sql.NullInt64
	s := &Session{}
	err = r.queryRow(ctx, `SELECT sid, id, name, title, prompt, status, error, tokenizer, created_at, finished_at,
		last_seq, agents, model_calls, input_tokens FROM sessions WHERE id = ?`, id).Scan(&key, &s.ID, &s.Name, &s.Title, &s.Prompt,
		&s.Status, &s.Error, &s.Tokenizer, &created, &finished, &s.LastSeq, &s.Agents, &s.ModelCalls, &s.InputTokens)
	s.CreatedAt = fromNanos(created)
	if finished.Valid {
		t := fromNanos(finished.Int64)
		s.FinishedAt = &t
	}
	if errors.Is(err, sql.ErrNoRows) {
		tx.Rollback()
		return nil, delegation.Errorf(delegation.ENOTFOUND, "no session %q", id)
	}
	if err != nil {
		tx.Rollback()
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	r.sid, r.session = key, s
	return r, nil
}

// Close ends the read.
func (r *pageReader) Close() { _ = r.tx.Rollback() }

// View returns the session's stored page state and the seq it is at; nil
// when there is none of this version.
func (r *pageReader) View(ctx context.Context, version int) ([]byte, int64, error) {
	var state []byte
	var seq int64
	var v int
	err := r.queryRow(ctx, `SELECT seq, version, state FROM session_views WHERE sid = ?`, r.sid).Scan(&seq, &v, &state)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && v != version) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the view of session %s: %w", r.session.ID, err)
	}
	return state, seq, nil
}

// SaveView stores a session's page state at a seq, replacing any older one.
func (db *DB) SaveView(ctx context.Context, id string, seq int64, version int, state []byte) error {
	err := db.tx(ctx, func(tx *sql.Tx) error {
		n, err := sid(ctx, tx, id)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO session_views (sid, seq, version, state) VALUES (?, ?, ?, ?)
			ON CONFLICT (sid) DO UPDATE SET seq = excluded.seq, version = excluded.version, state = excluded.state
			WHERE excluded.seq >= session_views.seq`, n, seq, version, state)
		return err
	})
	if err != nil {
		return fmt.Errorf("store the view of session %s: %w", id, err)
	}
	return nil
}

const pageMessageColumns = `id, agent_id, idx, role, content, tool_calls, tool_call_id, is_error, tokens, kind, reasoning`

// Message is a stored message with its place in its agent's list.
type Message struct {
	trace.Message
	Index int
}

func scanPageMessage(row scanner) (Message, error) {
	var m Message
	var calls, callID sql.NullString
	if err := row.Scan(&m.ID, &m.AgentID, &m.Index, &m.Role, &m.Content, &calls, &callID, &m.IsError, &m.Tokens, &m.Kind, &m.Reasoning); err != nil {
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

// Messages reads messages from … to-1 of an agent's list, by primary key.
func (r *pageReader) Messages(ctx context.Context, agentID string, from, to int) ([]Message, error) {
	if to <= from {
		return nil, nil
	}
	rows, err := r.query(ctx, `SELECT `+pageMessageColumns+` FROM messages
		WHERE sid = ? AND agent_id = ? AND idx >= ? AND idx < ? ORDER BY idx`, r.sid, agentID, from, to)
	if err != nil {
		return nil, fmt.Errorf("read messages of %s: %w", agentID, err)
	}
	defer rows.Close()
	out := make([]Message, 0, to-from)
	for rows.Next() {
		m, err := scanPageMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MessageAt reads message idx of an agent's list; nil when there is none.
func (r *pageReader) MessageAt(ctx context.Context, agentID string, idx int) (*Message, error) {
	m, err := scanPageMessage(r.queryRow(ctx, `SELECT `+pageMessageColumns+` FROM messages
		WHERE sid = ? AND agent_id = ? AND idx = ?`, r.sid, agentID, idx))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message %d of %s: %w", idx, agentID, err)
	}
	return &m, nil
}

// placeOf reads an id of the engine's form, "<agent>.<index>".
func placeOf(id string) (string, int, bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+1:])
	return id[:i], n, err == nil && n >= 0
}

// MessageByID reads a message by its id; nil when there is none. An id of
// the engine's form is found by its place; any other (a trace imported from
// elsewhere) by a scan of the session's messages.
func (r *pageReader) MessageByID(ctx context.Context, id string) (*Message, error) {
	if agent, idx, ok := placeOf(id); ok {
		m, err := r.MessageAt(ctx, agent, idx)
		if err != nil || (m != nil && m.ID == id) {
			return m, err
		}
	}
	m, err := scanPageMessage(r.tx.QueryRowContext(ctx, `SELECT `+pageMessageColumns+` FROM messages WHERE sid = ? AND id = ?`, r.sid, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message %s: %w", id, err)
	}
	return &m, nil
}

// CallRow is a stored model call with its answer, as a timeline row shows
// it. Step is its place among the session's calls, from 1.
type CallRow struct {
	trace.ModelCall
	Seq    int64
	Step   int
	Output *Message
}

const pageCallColumns = `c.id, c.agent_id, c.idx, c.purpose, c.context, c.system_tokens, c.tool_tokens, c.message_tokens,
	c.inherited_tokens, c.input_tokens, c.output_message_id, c.duration_ms, c.error, c.usage, c.at, c.seq,
	c.cached_prefix_tokens, c.cost`

func (r *pageReader) scanCalls(ctx context.Context, query string, args ...any) ([]CallRow, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read model calls: %w", err)
	}
	var out []CallRow
	for rows.Next() {
		var c CallRow
		var ctxJSON string
		var outID, usage, cost sql.NullString
		var at int64
		if err := rows.Scan(&c.ID, &c.AgentID, &c.Index, &c.Purpose, &ctxJSON, &c.SystemTokens, &c.ToolTokens,
			&c.MessageTokens, &c.InheritedTokens, &c.InputTokens, &outID, &c.DurationMS, &c.Error, &usage, &at, &c.Seq,
			&c.CachedPrefixTokens, &cost); err != nil {
			rows.Close()
			return nil, err
		}
		if c.Context, err = unpackRanges(ctxJSON); err != nil {
			rows.Close()
			return nil, fmt.Errorf("model call %s context: %w", c.ID, err)
		}
		if err := callJSON(&c.ModelCall, usage, cost); err != nil {
			rows.Close()
			return nil, err
		}
		c.OutputMessageID, c.StartedAt = strPtr(outID), fromNanos(at)
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if id := out[i].OutputMessageID; id != nil {
			if out[i].Output, err = r.MessageByID(ctx, *id); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// CallsHead reads the session's first model calls, at most limit.
func (r *pageReader) CallsHead(ctx context.Context, limit int) ([]CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c WHERE c.sid = ? ORDER BY c.seq LIMIT ?`, r.sid, limit)
	for i := range out {
		out[i].Step = i + 1
	}
	return out, err
}

// CallsTail reads the session's last model calls, at most limit, in order;
// total is the number of calls, for their steps.
func (r *pageReader) CallsTail(ctx context.Context, limit, total int) ([]CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c WHERE c.sid = ? ORDER BY c.seq DESC LIMIT ?`, r.sid, limit)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	for i := range out {
		out[i].Step = total - len(out) + i + 1
	}
	return out, err
}

// CallsFrom reads the calls of steps from … to-1 (from 1), in order.
func (r *pageReader) CallsFrom(ctx context.Context, from, to int) ([]CallRow, error) {
	if to <= from {
		return nil, nil
	}
	// The step's seq first, from the index alone: an offset over whole
	// rows would read every row it skips.
	var seq int64
	err := r.queryRow(ctx, `SELECT seq FROM model_calls INDEXED BY model_calls_seq WHERE sid = ? ORDER BY seq LIMIT 1 OFFSET ?`,
		r.sid, from-1).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read model call %d: %w", from, err)
	}
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c WHERE c.sid = ? AND c.seq >= ? ORDER BY c.seq LIMIT ?`,
		r.sid, seq, to-from)
	for i := range out {
		out[i].Step = from + i
	}
	return out, err
}

// Call reads a model call by id; nil when there is none. Its step is not
// read (0).
func (r *pageReader) Call(ctx context.Context, id string) (*CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c WHERE c.sid = ? AND c.id = ?`, r.sid, id)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// FirstCall reads an agent's first model call; nil when it made none.
func (r *pageReader) FirstCall(ctx context.Context, agentID string) (*CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c INDEXED BY model_calls_agent
		WHERE c.sid = ? AND c.agent_id = ? ORDER BY c.seq LIMIT 1`, r.sid, agentID)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// LatestCall reads an agent's latest model call at or before a seq; nil
// when it had made none.
func (r *pageReader) LatestCall(ctx context.Context, agentID string, seq int64) (*CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+pageCallColumns+` FROM model_calls c INDEXED BY model_calls_agent
		WHERE c.sid = ? AND c.agent_id = ? AND c.seq <= ? ORDER BY c.seq DESC LIMIT 1`, r.sid, agentID, seq)
	if err != nil || len(out) == 0 {
		return nil, err
	}
	return &out[0], nil
}

// File is a stored file as a list shows it: its size and the start of it.
type File struct {
	Path    string
	Size    int
	Preview string
}

// Files reads main's files after a path (in path order), at most limit,
// each with the first previewBytes of its content.
func (r *pageReader) Files(ctx context.Context, after string, limit, previewBytes int) ([]File, error) {
	rows, err := r.query(ctx, `SELECT path, length(CAST(content AS BLOB)), substr(CAST(content AS BLOB), 1, ?)
		FROM files WHERE sid = ? AND path > ? ORDER BY path LIMIT ?`, previewBytes, r.sid, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read files: %w", err)
	}
	defer rows.Close()
	var out []File
	for rows.Next() {
		var f File
		var pv []byte
		if err := rows.Scan(&f.Path, &f.Size, &pv); err != nil {
			return nil, err
		}
		f.Preview = string(pv)
		out = append(out, f)
	}
	return out, rows.Err()
}

// FilesAt reads the named files of main, those that exist, in path order.
func (r *pageReader) FilesAt(ctx context.Context, paths []string, previewBytes int) (map[string]File, error) {
	out := map[string]File{}
	for _, p := range paths {
		var f File
		var pv []byte
		err := r.queryRow(ctx, `SELECT path, length(CAST(content AS BLOB)), substr(CAST(content AS BLOB), 1, ?)
			FROM files WHERE sid = ? AND path = ?`, previewBytes, r.sid, p).Scan(&f.Path, &f.Size, &pv)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read file %s: %w", p, err)
		}
		f.Preview = string(pv)
		out[p] = f
	}
	return out, nil
}

// FileContent reads one of main's files whole; ok is false when it does not exist.
func (r *pageReader) FileContent(ctx context.Context, path string) (content string, ok bool, err error) {
	err = r.tx.QueryRowContext(ctx, `SELECT content FROM files WHERE sid = ? AND path = ?`, r.sid, path).Scan(&content)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return content, err == nil, err
}

// LoggedEvent is an event of the stored log with the message or model call
// it introduced, as the live stream sends it.
type LoggedEvent struct {
	delegation.Event
	Message *trace.Message
	Call    *trace.ModelCall
}

// EventsPage reads a session's events with seq > after, in order, at most
// limit, with the messages and model calls they introduced: a page of the
// live stream's backlog.
func (db *DB) EventsPage(ctx context.Context, sessionID string, after int64, limit int) ([]LoggedEvent, error) {
	pr, err := db.ReadPage(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	r := pr.(*pageReader)
	events, err := readLog(ctx, r.tx, r.sid, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
	}
	out := make([]LoggedEvent, len(events))
	for i, ev := range events {
		out[i].Event = ev
		var ref trace.Ref
		switch ev.Type {
		case delegation.EventMessageAdded:
			_ = json.Unmarshal(ev.Data, &ref)
			m, err := r.MessageAt(ctx, ev.AgentID, ref.Index)
			if err != nil {
				return nil, err
			}
			if m != nil {
				out[i].Message = &m.Message
			}
		case delegation.EventModelStarted:
			_ = json.Unmarshal(ev.Data, &ref)
			c, err := r.Call(ctx, ref.ModelCallID)
			if err != nil {
				return nil, err
			}
			if c != nil {
				mc := c.ModelCall
				out[i].Call = &mc
			}
		}
	}
	return out, nil
}

// Reader reads the whole session within the read: for a session whose
// page state has to be folded from its log.
func (r *pageReader) Reader(ctx context.Context) Reader {
	return &reader{ctx: ctx, tx: r.tx, sid: r.sid, session: r.session}
}

// EventsOfType reads the session's stored events of one type, in order:
// for a list of them (a received trace's spans).
func (r *pageReader) EventsOfType(ctx context.Context, typ delegation.EventType) ([]delegation.Event, error) {
	rows, err := r.query(ctx, `SELECT seq, agent_id, at, data FROM events WHERE sid = ? AND type = ? ORDER BY seq`, r.sid, string(typ))
	if err != nil {
		return nil, fmt.Errorf("read %s events: %w", typ, err)
	}
	defer rows.Close()
	var out []delegation.Event
	for rows.Next() {
		ev := delegation.Event{Type: typ}
		var agent sql.NullString
		var at int64
		var data string
		if err := rows.Scan(&ev.Seq, &agent, &at, &data); err != nil {
			return nil, err
		}
		ev.AgentID, ev.At, ev.Data = agent.String, fromNanos(at), json.RawMessage(data)
		out = append(out, ev)
	}
	return out, rows.Err()
}
