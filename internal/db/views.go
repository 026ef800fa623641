package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
	created int64
	session *Session
	dialect dialect
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
	r := &pageReader{pool: db.r, tx: tx, dialect: db.dialect()}
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
	r.sid, r.created, r.session = key, created, s
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

// Messages reads messages from … to-1 of an agent's list, by primary key.
func (r *pageReader) Messages(ctx context.Context, agentID string, from, to int) ([]Message, error) {
	if to <= from {
		return nil, nil
	}
	rows, err := r.query(ctx, `SELECT `+messageColumns+` FROM messages m
		WHERE m.sid = ? AND m.agent_id = ? AND m.idx >= ? AND m.idx < ? ORDER BY m.idx`, r.sid, agentID, from, to)
	if err != nil {
		return nil, fmt.Errorf("read messages of %s: %w", agentID, err)
	}
	defer rows.Close()
	out := make([]Message, 0, to-from)
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// MessageAt reads message idx of an agent's list; nil when there is none.
func (r *pageReader) MessageAt(ctx context.Context, agentID string, idx int) (*Message, error) {
	m, err := scanMessage(r.queryRow(ctx, `SELECT `+messageColumns+` FROM messages m
		WHERE m.sid = ? AND m.agent_id = ? AND m.idx = ?`, r.sid, agentID, idx))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read message %d of %s: %w", idx, agentID, err)
	}
	return &m, nil
}

// placeOf reads an id of the engine's form, "<agent><sep><index>".
func placeOf(id, sep string) (string, int, bool) {
	i := strings.LastIndex(id, sep)
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(id[i+len(sep):])
	return id[:i], n, err == nil && n >= 0
}

// MessageByID reads a message by its id; nil when there is none. An id of
// the engine's form is found by its place; any other (a trace imported from
// elsewhere) by the index of such ids.
func (r *pageReader) MessageByID(ctx context.Context, id string) (*Message, error) {
	if agent, idx, ok := placeOf(id, "."); ok {
		m, err := r.MessageAt(ctx, agent, idx)
		if err != nil || (m != nil && m.ID == id) {
			return m, err
		}
	}
	m, err := scanMessage(r.queryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE m.sid = ? AND m.id = ?`, r.sid, id))
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

func (r *pageReader) scanCalls(ctx context.Context, query string, args ...any) ([]CallRow, error) {
	rows, err := r.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("read model calls: %w", err)
	}
	var out []CallRow
	for rows.Next() {
		c, err := scanCall(rows, r.created)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, CallRow{ModelCall: c.ModelCall, Seq: c.Seq, Step: c.Step})
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
	return r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c`+r.dialect.indexedBy("model_calls_step")+`
		WHERE c.sid = ? ORDER BY c.n LIMIT ?`, r.sid, limit)
}

// CallsTail reads the session's last model calls, at most limit, in order;
// total is the number of calls.
func (r *pageReader) CallsTail(ctx context.Context, limit, total int) ([]CallRow, error) {
	return r.CallsFrom(ctx, max(total-limit, 0)+1, total+1)
}

// CallsFrom reads the calls of steps from … to-1 (from 1), in order.
func (r *pageReader) CallsFrom(ctx context.Context, from, to int) ([]CallRow, error) {
	if to <= from {
		return nil, nil
	}
	return r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c`+r.dialect.indexedBy("model_calls_step")+`
		WHERE c.sid = ? AND c.n >= ? AND c.n < ? ORDER BY c.n`, r.sid, from, to)
}

// Call reads a model call by id; nil when there is none.
func (r *pageReader) Call(ctx context.Context, id string) (*CallRow, error) {
	if agent, idx, ok := placeOf(id, ".c"); ok {
		out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.agent_id = ? AND c.idx = ? AND c.id IS NULL`,
			r.sid, agent, idx)
		if err != nil || len(out) > 0 {
			return first(out), err
		}
	}
	out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.id = ?`, r.sid, id)
	return first(out), err
}

func first(rows []CallRow) *CallRow {
	if len(rows) == 0 {
		return nil
	}
	return &rows[0]
}

// FirstCall reads an agent's first model call; nil when it made none.
func (r *pageReader) FirstCall(ctx context.Context, agentID string) (*CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.agent_id = ? ORDER BY c.idx LIMIT 1`,
		r.sid, agentID)
	return first(out), err
}

// LatestCall reads an agent's latest model call at or before a seq; nil
// when it had made none. An agent's calls are in seq order by their index,
// so it is found by halving the index range: a few lookups by key, however
// many calls the agent made.
func (r *pageReader) LatestCall(ctx context.Context, agentID string, seq int64) (*CallRow, error) {
	var last sql.NullInt64
	if err := r.queryRow(ctx, `SELECT max(idx) FROM model_calls WHERE sid = ? AND agent_id = ?`, r.sid, agentID).Scan(&last); err != nil {
		return nil, fmt.Errorf("read the calls of %s: %w", agentID, err)
	}
	// The answer is the largest index whose seq is at most seq, in lo-1 … hi.
	lo, hi := 0, int(last.Int64)
	if !last.Valid {
		return nil, nil
	}
	found := -1
	for lo <= hi {
		mid := (lo + hi) / 2
		var at int64
		err := r.queryRow(ctx, `SELECT seq FROM model_calls WHERE sid = ? AND agent_id = ? AND idx = ?`, r.sid, agentID, mid).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			// A gap in the indexes (a trace from elsewhere): the plain way.
			out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c
				WHERE c.sid = ? AND c.agent_id = ? AND c.seq <= ? ORDER BY c.idx DESC LIMIT 1`, r.sid, agentID, seq)
			return first(out), err
		}
		if err != nil {
			return nil, err
		}
		if at <= seq {
			found, lo = mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	if found < 0 {
		return nil, nil
	}
	out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c WHERE c.sid = ? AND c.agent_id = ? AND c.idx = ?`,
		r.sid, agentID, found)
	return first(out), err
}

// File is a stored file as a list shows it: its size and the start of it.
type File struct {
	Path    string
	Size    int
	Preview string
}

// fileColumns are a listed file: its path, its version, whether its text
// is not all of it (it is on top of another, a history or an argument:
// contentHead reads its start), its size and the start of its text.
func (r *pageReader) fileColumns() string {
	return `f.path, c.n, c.base IS NOT NULL OR c.history IS NOT NULL OR c.arg IS NOT NULL, c.size,
	` + r.dialect.bytePrefix("c.text")
}

func (r *pageReader) scanFile(ctx context.Context, row scanner, previewBytes int) (File, error) {
	var f File
	var n int64
	var derived bool
	var pv []byte
	if err := row.Scan(&f.Path, &n, &derived, &f.Size, &pv); err != nil {
		return f, err
	}
	f.Preview = string(pv)
	if derived {
		size, head, err := contentHead(ctx, r.tx, r.sid, n, previewBytes)
		if err != nil {
			return f, err
		}
		f.Size, f.Preview = int(size), head
	}
	return f, nil
}

// Files reads main's files after a path (in path order), at most limit,
// each with the first previewBytes of its content.
func (r *pageReader) Files(ctx context.Context, after string, limit, previewBytes int) ([]File, error) {
	rows, err := r.query(ctx, `SELECT `+r.fileColumns()+` FROM files f JOIN contents c ON c.sid = f.sid AND c.n = f.content
		WHERE f.sid = ? AND f.agent_id = 'main' AND f.path > ? ORDER BY f.path LIMIT ?`, previewBytes, r.sid, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read files: %w", err)
	}
	var raw []File
	var chained []int
	for rows.Next() {
		var f File
		var n int64
		var derived bool
		var pv []byte
		if err := rows.Scan(&f.Path, &n, &derived, &f.Size, &pv); err != nil {
			rows.Close()
			return nil, err
		}
		f.Preview = string(pv)
		if derived {
			chained = append(chained, len(raw))
			f.Size = int(n) // the version, until read below
		}
		raw = append(raw, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, i := range chained {
		size, head, err := contentHead(ctx, r.tx, r.sid, int64(raw[i].Size), previewBytes)
		if err != nil {
			return nil, err
		}
		raw[i].Size, raw[i].Preview = int(size), head
	}
	return raw, nil
}

// FilesAt reads the named files of main, those that exist, in path order.
func (r *pageReader) FilesAt(ctx context.Context, paths []string, previewBytes int) (map[string]File, error) {
	out := map[string]File{}
	for _, p := range paths {
		f, err := r.scanFile(ctx, r.queryRow(ctx, `SELECT `+r.fileColumns()+` FROM files f JOIN contents c ON c.sid = f.sid AND c.n = f.content
			WHERE f.sid = ? AND f.agent_id = 'main' AND f.path = ?`, previewBytes, r.sid, p), previewBytes)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read file %s: %w", p, err)
		}
		out[p] = f
	}
	return out, nil
}

// FileContent reads one of main's files whole; ok is false when it does not exist.
func (r *pageReader) FileContent(ctx context.Context, path string) (content string, ok bool, err error) {
	var n int64
	err = r.tx.QueryRowContext(ctx, `SELECT content FROM files WHERE sid = ? AND agent_id = 'main' AND path = ?`, r.sid, path).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	content, err = fullContent(ctx, r.tx, r.sid, n)
	return content, err == nil, err
}

// LoggedEvent is an event of the stored log with the message or model call
// it introduced, as the live stream sends it.
type LoggedEvent struct {
	delegation.Event
	Message *trace.Message
	Call    *trace.ModelCall
	// Step is the event as the log's one reading gives it, to fold into a
	// page state (a session another replica runs).
	Step trace.Step
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
	var out []LoggedEvent
	for st, err := range pr.Reader(ctx).(*reader).log(after, true) {
		if err != nil {
			return nil, fmt.Errorf("read events of session %s: %w", sessionID, err)
		}
		out = append(out, LoggedEvent{Event: st.Event, Message: st.Message, Call: st.Call, Step: st})
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// Reader reads the whole session within the read: for a session whose
// page state has to be folded from its log.
func (r *pageReader) Reader(ctx context.Context) Reader {
	return &reader{ctx: ctx, q: newStmtCache(r.tx), sid: r.sid, created: r.created, session: r.session, dialect: r.dialect}
}

// EventsOfType reads the session's stored events of one type, in order:
// for a list of them (a received trace's spans).
func (r *pageReader) EventsOfType(ctx context.Context, typ delegation.EventType) ([]delegation.Event, error) {
	rd := r.Reader(ctx).(*reader)
	var out []delegation.Event
	for st, err := range rd.logWhere(0, false, func(e *entry) bool { return e.code == typeCodes[typ] && (e.code != 0 || e.name == string(typ)) }) {
		if err != nil {
			return nil, fmt.Errorf("read %s events: %w", typ, err)
		}
		out = append(out, st.Event)
	}
	return out, nil
}

// StepOf is the step (from 1) of the model call whose model.started has seq:
// how many calls began at or before it.
func (r *pageReader) StepOf(ctx context.Context, seq int64) (int, error) {
	var n sql.NullInt64
	err := r.queryRow(ctx, `SELECT max(n) FROM model_calls WHERE sid = ? AND seq <= ?`, r.sid, seq).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read the step of seq %d: %w", seq, err)
	}
	return int(n.Int64), nil
}

// AgentCounts is an agent's model calls and their input tokens up to a seq.
type AgentCounts struct {
	Calls, Tokens int
}

// CountsAt reads, for each agent, its model calls begun at or before a seq
// and their input tokens: the tree at a step of the past.
func (r *pageReader) CountsAt(ctx context.Context, seq int64) (map[string]AgentCounts, error) {
	rows, err := r.query(ctx, `SELECT agent_id, count(*), CAST(coalesce(sum(input_tokens), 0) AS BIGINT) FROM model_calls WHERE sid = ? AND seq <= ? GROUP BY agent_id`, r.sid, seq)
	if err != nil {
		return nil, fmt.Errorf("read the counts at seq %d: %w", seq, err)
	}
	defer rows.Close()
	out := map[string]AgentCounts{}
	for rows.Next() {
		var id string
		var c AgentCounts
		if err := rows.Scan(&id, &c.Calls, &c.Tokens); err != nil {
			return nil, err
		}
		out[id] = c
	}
	return out, rows.Err()
}

// AgentCallsHead reads an agent's first model calls, at most limit, in
// order.
func (r *pageReader) AgentCallsHead(ctx context.Context, agentID string, limit int) ([]CallRow, error) {
	return r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c
		WHERE c.sid = ? AND c.agent_id = ? ORDER BY c.idx LIMIT ?`, r.sid, agentID, limit)
}

// AgentCallsTail reads an agent's last model calls at or before a seq, at
// most limit, in order.
func (r *pageReader) AgentCallsTail(ctx context.Context, agentID string, seq int64, limit int) ([]CallRow, error) {
	out, err := r.scanCalls(ctx, `SELECT `+callColumns+` FROM model_calls c
		WHERE c.sid = ? AND c.agent_id = ? AND c.seq <= ? ORDER BY c.idx DESC LIMIT ?`, r.sid, agentID, seq, limit)
	slices.Reverse(out)
	return out, err
}

// ToolEvents reads the tool.started, tool.finished and model.finished
// events with seq in [from, to], in order: the bars of a timeline, and
// which of its calls had ended by then.
func (r *pageReader) ToolEvents(ctx context.Context, from, to int64) ([]delegation.Event, error) {
	rd := r.Reader(ctx).(*reader)
	want := map[int64]bool{}
	for _, t := range []delegation.EventType{delegation.EventToolStarted, delegation.EventToolFinished, delegation.EventModelFinished} {
		want[typeCodes[t]] = true
	}
	var out []delegation.Event
	for st, err := range rd.logWhere(from-1, false, func(e *entry) bool { return e.code != 0 && want[e.code] }) {
		if err != nil {
			return nil, fmt.Errorf("read tool events: %w", err)
		}
		if st.Event.Seq > to {
			break
		}
		out = append(out, st.Event)
	}
	return out, nil
}
