package db

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache is a transaction whose statements are prepared once, at their
// first use, and reused: a read or an append that runs the same few
// queries thousands of times parses each once. They end with the
// transaction.
type stmtCache struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
	// shared, when set, holds statements prepared once for the pool the
	// transaction is of, which outlive it (see sharedStmts).
	shared *sharedStmts
}

var _ querier = (*stmtCache)(nil)

func newStmtCache(tx *sql.Tx) *stmtCache { return &stmtCache{tx: tx, stmts: map[string]*sql.Stmt{}} }

func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	st, err := c.prepare(ctx, query)
	if err != nil {
		return nil // the query, run unprepared, says what is wrong
	}
	return st
}

// prepare is query's statement in this transaction.
func (c *stmtCache) prepare(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	var st *sql.Stmt
	if p := c.shared.get(query); p != nil {
		// The pool's statement, on this transaction's connection: parsed
		// once per connection, not once per transaction.
		st = c.tx.StmtContext(ctx, p)
	} else {
		var err error
		if st, err = c.tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
	}
	c.stmts[query] = st
	return st, nil
}

func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.tx.QueryRowContext(ctx, query, args...)
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.tx.QueryContext(ctx, query, args...)
}

func (c *stmtCache) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := c.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.tx.ExecContext(ctx, query, args...)
}

// close closes the statements (the transaction's end closes them too).
func (c *stmtCache) close() {
	for _, st := range c.stmts {
		st.Close()
	}
	clear(c.stmts)
}

// sharedStmts are the writer pool's statements, prepared once and reused by
// every append: a live session appends a small batch many times a second,
// and parsing its dozen statements in each transaction was a fifth of the
// studio's CPU. A statement is prepared on the pool after the first
// transaction that used it has ended — not during it, since the pool's one
// SQLite connection is that transaction's.
type sharedStmts struct {
	pool   *sql.DB
	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	missed map[string]bool
	closed bool
}

// maxSharedStmts bounds how many statements are kept (queries are a fixed
// set, but one built with a variable number of placeholders is not).
const maxSharedStmts = 256

func newSharedStmts(pool *sql.DB) *sharedStmts {
	return &sharedStmts{pool: pool, stmts: map[string]*sql.Stmt{}, missed: map[string]bool{}}
}

// get is query's prepared statement, or nil, noting that it was wanted.
func (s *sharedStmts) get(query string) *sql.Stmt {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stmts[query]
	if st == nil && !s.closed && len(s.stmts)+len(s.missed) < maxSharedStmts {
		s.missed[query] = true
	}
	return st
}

// prepareMissed prepares the statements transactions wanted and lacked. It
// runs outside any transaction and holds no lock while it prepares; a
// query that does not prepare is not asked again.
func (s *sharedStmts) prepareMissed(ctx context.Context) {
	s.mu.Lock()
	if len(s.missed) == 0 || s.closed {
		s.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(s.missed))
	for q := range s.missed {
		queries = append(queries, q)
	}
	clear(s.missed)
	s.mu.Unlock()
	for _, q := range queries {
		st, err := s.pool.PrepareContext(ctx, q)
		if err != nil {
			st = nil
		}
		s.mu.Lock()
		switch {
		case st == nil:
		case s.closed || s.stmts[q] != nil:
			st.Close()
		default:
			s.stmts[q] = st
		}
		s.mu.Unlock()
	}
}

// close closes the statements; none is prepared after.
func (s *sharedStmts) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, st := range s.stmts {
		st.Close()
	}
	clear(s.stmts)
}
