package db

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// A file's content is stored once per version (the contents table). A
// version that extends its file's previous one — a history file that
// summarization appends to, a log that grows — is stored as the text it
// adds, on top of that version (base), so a file rewritten whole at every
// step costs what it gained, not its whole length again. The files table
// names each agent's current version of each file it changed.
//
// A version that is a string argument of the tool call that wrote it
// (write_file's content) is not stored again either: it names that
// argument (arg) and is read from the message that holds it.

// appendMin is the smallest previous version a new one is stored on top
// of: below it, a version is stored whole, which costs little and reads in
// one row.
const appendMin = 1024

// querier is a transaction, or anything that queries like one.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// contentWriter stores contents and files within one write transaction.
type contentWriter struct {
	ctx  context.Context
	q    querier
	sid  int64
	next int64 // the next content's number; 0 until read
}

// version is a stored content: its number, whole size, depth and sum.
type version struct {
	n, size, depth int64
	sum            []byte // nil for a small version read in one row
}

// contentSum is what versions are compared by: the first 8 bytes of the
// SHA-256 of their whole text.
func contentSum(text string) []byte {
	s := sha256.Sum256([]byte(text))
	return s[:8]
}

// sumMin is the smallest whole version stored with a sum: a smaller one
// costs less to read back than its sum to keep.
const sumMin = 256

// argRef is a version that is a string argument of a tool call: the value
// of Key in the arguments of call Pos of message Idx of Agent's list.
type argRef struct {
	Agent    string
	Idx, Pos int
	Key      string
}

func (r argRef) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{r.Agent, r.Idx, r.Pos, r.Key})
}

func (r *argRef) UnmarshalJSON(b []byte) error {
	var raw [4]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	return errors.Join(jsonString(raw[0], &r.Agent), jsonInt(raw[1], &r.Idx), jsonInt(raw[2], &r.Pos), jsonString(raw[3], &r.Key))
}

// jsonString decodes a JSON string: one of printable ASCII without
// escapes as it is (an export reads one per file it writes), any other by
// encoding/json.
func jsonString(raw json.RawMessage, s *string) error {
	plain := len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"'
	for i := 1; plain && i < len(raw)-1; i++ {
		plain = raw[i] >= 0x20 && raw[i] < 0x7f && raw[i] != '"' && raw[i] != '\\'
	}
	if plain {
		*s = string(raw[1 : len(raw)-1])
		return nil
	}
	return json.Unmarshal(raw, s)
}

// jsonInt decodes a JSON value (raw is one) that is an integer: as
// strconv reads it, any other by encoding/json.
func jsonInt(raw json.RawMessage, n *int) error {
	if v, err := strconv.Atoi(string(raw)); err == nil {
		*n = v
		return nil
	}
	return json.Unmarshal(raw, n)
}

// argOf finds text among the string arguments of calls (message idx of
// agent's list): the argument it is, if any. A short text is not looked
// for: naming it would cost about what it does.
func argOf(agent string, idx int, calls []trace.ToolCall, text string) (*argRef, bool) {
	if len(text) < 32 {
		return nil, false
	}
	for pos, c := range calls {
		if len(c.Args) < len(text) {
			continue
		}
		var args map[string]json.RawMessage
		if json.Unmarshal(c.Args, &args) != nil {
			continue
		}
		keys := make([]string, 0, len(args))
		for k, v := range args {
			if len(v) >= len(text)+2 && v[0] == '"' {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			var s string
			if json.Unmarshal(args[k], &s) == nil && s == text {
				return &argRef{Agent: agent, Idx: idx, Pos: pos, Key: k}, true
			}
		}
	}
	return nil, false
}

// argText reads the argument a version names: from the tool calls of its
// message, when calls has them (nil: none), else from the message's row.
func argText(ctx context.Context, q querier, sid int64, spec string, calls func(agent string, idx int) ([]trace.ToolCall, bool)) (string, error) {
	var r argRef
	if err := json.Unmarshal([]byte(spec), &r); err != nil {
		return "", fmt.Errorf("read an argument version: %w", err)
	}
	tcs, ok := []trace.ToolCall(nil), false
	if calls != nil {
		tcs, ok = calls(r.Agent, r.Idx)
	}
	if !ok {
		var raw sql.NullString
		if err := q.QueryRowContext(ctx, `SELECT tool_calls FROM messages WHERE sid = ? AND agent_id = ? AND idx = ?`,
			sid, r.Agent, r.Idx).Scan(&raw); err != nil {
			return "", fmt.Errorf("read the message of file content %s: %w", spec, err)
		}
		if err := json.Unmarshal([]byte(raw.String), &tcs); err != nil {
			return "", fmt.Errorf("file content %s: message %d of %s has no such call", spec, r.Idx, r.Agent)
		}
	}
	if r.Pos < 0 || r.Pos >= len(tcs) {
		return "", fmt.Errorf("file content %s: message %d of %s has no such call", spec, r.Idx, r.Agent)
	}
	var args map[string]json.RawMessage
	var s string
	if err := json.Unmarshal(tcs[r.Pos].Args, &args); err != nil {
		return "", fmt.Errorf("file content %s: %w", spec, err)
	}
	if err := json.Unmarshal(args[r.Key], &s); err != nil {
		return "", fmt.Errorf("file content %s: %w", spec, err)
	}
	return s, nil
}

// fileOf is an agent's current version of a file, if it has one.
func (w *contentWriter) fileOf(agent, path string) (version, bool, error) {
	var v version
	err := w.q.QueryRowContext(w.ctx, `SELECT c.n, c.size, c.depth, c.sum FROM files f JOIN contents c ON c.sid = f.sid AND c.n = f.content
		WHERE f.sid = ? AND f.agent_id = ? AND f.path = ?`, w.sid, agent, path).Scan(&v.n, &v.size, &v.depth, &v.sum)
	if errors.Is(err, sql.ErrNoRows) {
		return v, false, nil
	}
	return v, err == nil, err
}

// is reports whether text is a version's whole content: by its sum, or, for
// a version stored without one, by reading it.
func (w *contentWriter) is(v version, text string) (bool, error) {
	if int64(len(text)) != v.size {
		return false, nil
	}
	if v.sum != nil {
		return bytes.Equal(v.sum, contentSum(text)), nil
	}
	old, err := fullContent(w.ctx, w.q, w.sid, v.n)
	return old == text, err
}

// put stores text as an agent's file's content now and returns its
// version: the one it has already (the same text written again), the one
// of the child it came back from (from), the argument of the tool call
// that wrote it (arg, when it is one), one on top of its previous version
// when it extends it, or a new one.
func (w *contentWriter) put(agent, path, text, from string, arg *argRef) (int64, error) {
	size := int64(len(text))
	cur, ok, err := w.fileOf(agent, path)
	if err != nil {
		return 0, err
	}
	if ok {
		if same, err := w.is(cur, text); err != nil || same {
			return cur.n, err
		}
	}
	if arg != nil {
		spec, err := json.Marshal(arg)
		if err != nil {
			return 0, err
		}
		return w.insertRow(version{}, text, "", sql.NullString{}, sql.NullString{String: string(spec), Valid: true})
	}
	if ok && size > cur.size && cur.size >= appendMin && cur.depth < maxChain {
		if on, err := w.is(cur, text[:cur.size]); err != nil {
			return 0, err
		} else if on {
			return w.insertRow(cur, text, text[cur.size:], sql.NullString{}, sql.NullString{})
		}
	}
	if from != "" {
		back, ok, err := w.fileOf(from, path)
		if err != nil {
			return 0, err
		}
		if ok {
			if same, err := w.is(back, text); err != nil || same {
				return back.n, err
			}
		}
	}
	return w.insertRow(version{}, text, text, sql.NullString{}, sql.NullString{})
}

// insertRow stores a version whose content is whole: as text, on top of
// base (n 0: none), or as a history or an argument (hist, arg).
func (w *contentWriter) insertRow(base version, whole, text string, hist, arg sql.NullString) (int64, error) {
	if w.next == 0 {
		if err := w.q.QueryRowContext(w.ctx, `SELECT coalesce(max(n), 0) + 1 FROM contents WHERE sid = ?`, w.sid).Scan(&w.next); err != nil {
			return 0, err
		}
	}
	n := w.next
	var b sql.NullInt64
	depth := int64(0)
	if base.n != 0 {
		b, depth = sql.NullInt64{Int64: base.n, Valid: true}, base.depth+1
	}
	var sum []byte
	if len(whole) >= sumMin || b.Valid || hist.Valid {
		sum = contentSum(whole)
	}
	if _, err := w.q.ExecContext(w.ctx, `INSERT INTO contents (sid, n, base, depth, size, sum, text, history, arg) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.sid, n, b, depth, len(whole), sum, text, hist, arg); err != nil {
		return 0, fmt.Errorf("store a file's content: %w", err)
	}
	w.next++
	return n, nil
}

// set makes a version an agent's file's content.
func (w *contentWriter) set(agent, path string, n int64) error {
	_, err := w.q.ExecContext(w.ctx, `INSERT INTO files (sid, agent_id, path, content) VALUES (?, ?, ?, ?)
		ON CONFLICT (sid, agent_id, path) DO UPDATE SET content = excluded.content`, w.sid, agent, path, n)
	return err
}

// remove deletes an agent's file.
func (w *contentWriter) remove(agent, path string) error {
	_, err := w.q.ExecContext(w.ctx, `DELETE FROM files WHERE sid = ? AND agent_id = ? AND path = ?`, w.sid, agent, path)
	return err
}

// maxChain is the most versions one is stored on top of, through its base
// and theirs: past it a version is stored whole, so that reading one never
// walks far.
const maxChain = 32

// contentRow is a stored version.
type contentRow struct {
	n       int64
	base    sql.NullInt64
	size    int64
	text    string
	history sql.NullString
	arg     sql.NullString
}

// chainOf reads a version and those it is on top of, newest first.
func chainOf(ctx context.Context, q querier, sid, n int64) ([]contentRow, error) {
	var out []contentRow
	for {
		r := contentRow{n: n}
		if err := q.QueryRowContext(ctx, `SELECT base, size, text, history, arg FROM contents WHERE sid = ? AND n = ?`, sid, n).
			Scan(&r.base, &r.size, &r.text, &r.history, &r.arg); err != nil {
			return nil, fmt.Errorf("read file content %d: %w", n, err)
		}
		out = append(out, r)
		if !r.base.Valid {
			return out, nil
		}
		if r.base.Int64 >= n { // a version is only ever on top of an older one
			return nil, fmt.Errorf("file content %d is on top of %d", n, r.base.Int64)
		}
		n = r.base.Int64
	}
}

// fullContent reads a version whole.
func fullContent(ctx context.Context, q querier, sid, n int64) (string, error) {
	var b strings.Builder
	if err := writeContent(ctx, q, sid, n, &b, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// errEnough stops writing a content once a preview has what it shows.
var errEnough = errors.New("enough")

// limited is a writer that takes limit bytes (0: all), then says enough.
type limited struct {
	b     *strings.Builder
	limit int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.limit > 0 && l.b.Len()+len(p) >= l.limit {
		l.b.Write(p[:max(l.limit-l.b.Len(), 0)])
		return len(p), errEnough
	}
	return l.b.Write(p)
}

// writeContent writes a version, its first limit bytes (0: all): the
// versions it is on top of, oldest first, then its own text or history.
func writeContent(ctx context.Context, q querier, sid, n int64, b *strings.Builder, limit int) error {
	chain, err := chainOf(ctx, q, sid, n)
	if err != nil {
		return err
	}
	return writeChain(ctx, q, sid, chain, &limited{b: b, limit: limit}, nil)
}

// writeChain writes the versions of a chain (newest first), oldest first,
// its histories and arguments from memo when it has them (nil: none kept).
func writeChain(ctx context.Context, q querier, sid int64, chain []contentRow, w io.Writer, memo *exportMemo) error {
	for i := len(chain) - 1; i >= 0; i-- {
		r := chain[i]
		var err error
		switch {
		case r.history.Valid:
			if r.base.Valid {
				if _, err := io.WriteString(w, "\n"); err != nil {
					return nil
				}
			}
			err = memo.historyMemo().render(ctx, q, sid, r, w)
		case r.arg.Valid:
			err = memo.renderArg(ctx, q, sid, r, w)
		default:
			if _, err := io.WriteString(w, r.text); err != nil {
				return nil
			}
		}
		if errors.Is(err, errEnough) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// contentHead reads a version's size and its first limit bytes: the
// preview of a list.
func contentHead(ctx context.Context, q querier, sid, n int64, limit int) (int64, string, error) {
	var size int64
	if err := q.QueryRowContext(ctx, `SELECT size FROM contents WHERE sid = ? AND n = ?`, sid, n).Scan(&size); err != nil {
		return 0, "", fmt.Errorf("read file content %d: %w", n, err)
	}
	var b strings.Builder
	if err := writeContent(ctx, q, sid, n, &b, limit); err != nil {
		return 0, "", err
	}
	return size, b.String(), nil
}

// history is a version a summarization wrote: its number among its
// agent's summaries, the agent, and the ranges of messages it folded (its
// summary call's context).
type history struct {
	N      int
	Agent  string
	Ranges []delegation.Range
}

func (h history) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{h.N, h.Agent, json.RawMessage(packRanges(h.Ranges))})
}

func (h *history) UnmarshalJSON(b []byte) error {
	var raw [3]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if err := errors.Join(json.Unmarshal(raw[0], &h.N), json.Unmarshal(raw[1], &h.Agent)); err != nil {
		return err
	}
	var err error
	h.Ranges, err = unpackRanges(string(raw[2]))
	return err
}

// renderHistory writes a summarization's entry again from the messages it
// folded, as the engine wrote it (delegation.WriteHistoryHead and
// WriteHistoryMessage).
func renderHistory(ctx context.Context, q querier, sid int64, spec string, w io.Writer) error {
	var h history
	if err := json.Unmarshal([]byte(spec), &h); err != nil {
		return fmt.Errorf("read a history version: %w", err)
	}
	var err error
	write := func(s string) {
		if err == nil {
			_, err = io.WriteString(w, s)
		}
	}
	var head strings.Builder
	delegation.WriteHistoryHead(&head, h.N, h.Agent)
	write(head.String())
	for _, r := range h.Ranges {
		if err != nil {
			return err
		}
		rows, qerr := q.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages m
			WHERE m.sid = ? AND m.agent_id = ? AND m.idx >= ? AND m.idx < ? ORDER BY m.idx`, sid, r.AgentID, r.From, r.To)
		if qerr != nil {
			return qerr
		}
		seen := r.From
		for rows.Next() && err == nil {
			m, serr := scanMessage(rows)
			if serr != nil {
				rows.Close()
				return serr
			}
			if m.Index != seen {
				rows.Close()
				return fmt.Errorf("history: message %d of %s is missing", seen, r.AgentID)
			}
			seen++
			var b strings.Builder
			delegation.WriteHistoryMessage(&b, m.Message.Domain())
			write(b.String())
		}
		rows.Close()
		if err == nil && seen != r.To {
			return fmt.Errorf("history: messages %d…%d of %s are missing", seen, r.To, r.AgentID)
		}
	}
	return err
}

// historyMemo keeps the entries of histories an export has written, by
// version, up to historyMemoBytes of them. Each summarization's version is
// on top of the one before, and a files.changed of the history file
// writes the whole chain: without it an export renders the first entry as
// many times as its agent was summarized (at 100,000 messages, 80 MB of
// history written from 10.7 MB of entries).
type historyMemo struct {
	texts map[int64]string
	bytes int
}

// exportMemo is what an export keeps of what it has read: the history
// entries it has written (histories), and, of the log block being written,
// its messages, which hold the arguments its files.changed name (block),
// and the versions those name (contents).
type exportMemo struct {
	histories historyMemo
	block     map[place]*Message
	contents  map[int64]contentRow
}

// historyMemo is the memo's histories (nil for a nil memo).
func (m *exportMemo) historyMemo() *historyMemo {
	if m == nil {
		return nil
	}
	return &m.histories
}

// calls are the tool calls of a message of the block being written.
func (m *exportMemo) calls(agent string, idx int) ([]trace.ToolCall, bool) {
	msg, ok := m.block[place{agent, idx}]
	if !ok {
		return nil, false
	}
	return msg.ToolCalls, true
}

// renderArg writes an argument version, from the block's message when the
// memo has it. A nil memo reads it from its message's row.
func (m *exportMemo) renderArg(ctx context.Context, q querier, sid int64, r contentRow, w io.Writer) error {
	var calls func(string, int) ([]trace.ToolCall, bool)
	if m != nil {
		calls = m.calls
	}
	text, err := argText(ctx, q, sid, r.arg.String, calls)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, text)
	return err
}

// historyMemoBytes bounds what a historyMemo keeps: past it, entries are
// written again from their messages each time.
const historyMemoBytes = 16 << 20

// render writes a history version's entry: kept, or rendered (and kept
// while there is room). A nil memo renders it.
func (m *historyMemo) render(ctx context.Context, q querier, sid int64, r contentRow, w io.Writer) error {
	if m == nil {
		return renderHistory(ctx, q, sid, r.history.String, w)
	}
	text, ok := m.texts[r.n]
	if !ok {
		var b strings.Builder
		if err := renderHistory(ctx, q, sid, r.history.String, &b); err != nil {
			return err
		}
		text = b.String()
		if m.bytes+len(text) <= historyMemoBytes {
			if m.texts == nil {
				m.texts = map[int64]string{}
			}
			m.texts[r.n], m.bytes = text, m.bytes+len(text)
		}
	}
	_, err := io.WriteString(w, text)
	return err
}

// putHistory stores what a summarization wrote to its agent's history
// file. When the file's new content is its previous one and a newline (or
// it had none), then the entry the summary call's folded messages make, it
// is stored as that entry: its number, its agent, the call's ranges; the
// text is written again from the messages when read. Anything else is
// stored as put stores it. (A history has as many versions on top of each
// other as its agent has summaries: each is cheap to read, so they are not
// capped.)
func (w *contentWriter) putHistory(agent, path, text string, call *trace.ModelCall) (int64, error) {
	cur, had, err := w.fileOf(agent, path)
	if err != nil {
		return 0, err
	}
	rest, base := text, version{}
	if had {
		if int64(len(text)) <= cur.size || text[cur.size] != '\n' {
			return w.put(agent, path, text, "", nil)
		}
		if on, err := w.is(cur, text[:cur.size]); err != nil || !on {
			if err != nil {
				return 0, err
			}
			return w.put(agent, path, text, "", nil)
		}
		rest, base = text[cur.size+1:], cur
	}
	var n int
	if _, err := fmt.Sscanf(rest, "# Summarization %d of agent ", &n); err != nil {
		return w.put(agent, path, text, "", nil)
	}
	spec, err := json.Marshal(history{N: n, Agent: agent, Ranges: call.Context})
	if err != nil {
		return 0, err
	}
	var again strings.Builder
	if err := renderHistory(w.ctx, w.q, w.sid, string(spec), &again); err != nil || again.String() != rest {
		return w.put(agent, path, text, "", nil)
	}
	return w.insertRow(base, text, "", sql.NullString{String: string(spec), Valid: true}, sql.NullString{})
}
