package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
)

// logWriter appends events to a session's log within one write
// transaction: to its tail block while that has room; a full block goes to
// the log table, once.
type logWriter struct {
	ctx context.Context
	q   querier
	sid int64

	open   bool  // a block is open: first, count, prevAt, buf
	tailed bool  // the session has a log_tail row
	first  int64 // the open block's first seq
	count  int
	prevAt int64
	buf    []byte
	lastAt int64 // the last event's time, which the next is stored after
}

func openLogWriter(ctx context.Context, q querier, sid int64) (*logWriter, error) {
	w := &logWriter{ctx: ctx, q: q, sid: sid, buf: make([]byte, 0, blockSize+64)}
	var events []byte
	err := q.QueryRowContext(ctx, `SELECT first, count, prev_at, last_at, events FROM log_tail WHERE sid = ?`, sid).
		Scan(&w.first, &w.count, &w.prevAt, &w.lastAt, &events)
	switch {
	case err == nil:
		w.open, w.tailed, w.buf = true, true, append(w.buf, events...)
		return w, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("read the log's tail: %w", err)
	}
	// No tail: the next event's time is after the last block's.
	err = q.QueryRowContext(ctx, `SELECT last_at FROM log WHERE sid = ? ORDER BY first DESC LIMIT 1`, sid).Scan(&w.lastAt)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read the log's last block: %w", err)
	}
	return w, nil
}

// add appends the event of seq, which follows the log's last.
func (w *logWriter) add(seq int64, e *entry) error {
	if w.open && len(w.buf) >= blockSize {
		if err := w.seal(); err != nil {
			return err
		}
	}
	if !w.open {
		w.open, w.first, w.count, w.prevAt, w.buf = true, seq, 0, w.lastAt, w.buf[:0]
	}
	w.buf = appendEntry(w.buf, e, w.lastAt)
	w.count++
	w.lastAt = e.at
	return nil
}

// seal writes the open block, full, to the log.
func (w *logWriter) seal() error {
	if _, err := w.q.ExecContext(w.ctx, `INSERT INTO log (sid, first, count, prev_at, last_at, events) VALUES (?, ?, ?, ?, ?, ?)`,
		w.sid, w.first, w.count, w.prevAt, w.lastAt, w.buf); err != nil {
		return fmt.Errorf("write the log: %w", err)
	}
	w.open = false
	return nil
}

// flush writes the open block as the log's tail (or, full, to the log).
func (w *logWriter) flush() error {
	if w.open && len(w.buf) >= blockSize {
		if err := w.seal(); err != nil {
			return err
		}
	}
	var err error
	switch {
	case w.open:
		_, err = w.q.ExecContext(w.ctx, `INSERT INTO log_tail (sid, first, count, prev_at, last_at, events) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (sid) DO UPDATE SET first = excluded.first, count = excluded.count, prev_at = excluded.prev_at,
			last_at = excluded.last_at, events = excluded.events`, w.sid, w.first, w.count, w.prevAt, w.lastAt, w.buf)
	case w.tailed:
		_, err = w.q.ExecContext(w.ctx, `DELETE FROM log_tail WHERE sid = ?`, w.sid)
	}
	if err != nil {
		return fmt.Errorf("write the log: %w", err)
	}
	w.tailed = w.open
	return nil
}

// block is a stored block, decoded.
type block struct {
	first   int64
	entries []entry
}

// blocks yields a session's log blocks from the one that holds seq after+1
// on, decoded; agentIDs are the session's agents by number.
func blocks(ctx context.Context, q querier, sid, after int64, agentIDs func() ([]string, error)) iter.Seq2[block, error] {
	return func(yield func(block, error) bool) {
		rows, err := q.QueryContext(ctx, `SELECT first, prev_at, events FROM (
				SELECT first, prev_at, events FROM log WHERE sid = ?1
					AND first >= coalesce((SELECT max(first) FROM log WHERE sid = ?1 AND first <= ?2), 0)
				UNION ALL SELECT first, prev_at, events FROM log_tail WHERE sid = ?1 AND first + count > ?2 - 1
			) AS b ORDER BY first`, sid, after+1)
		if err != nil {
			yield(block{}, fmt.Errorf("read the log: %w", err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			var b block
			var prevAt int64
			var events []byte
			if err := rows.Scan(&b.first, &prevAt, &events); err != nil {
				yield(block{}, fmt.Errorf("read the log: %w", err))
				return
			}
			ids, err := agentIDs()
			if err != nil {
				yield(block{}, err)
				return
			}
			if b.entries, err = decodeEntries(events, prevAt, ids); err != nil {
				yield(block{}, fmt.Errorf("read the log from seq %d: %w", b.first, err))
				return
			}
			if !yield(b, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(block{}, fmt.Errorf("read the log: %w", err))
		}
	}
}
