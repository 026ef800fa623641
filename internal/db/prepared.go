package db

import (
	"context"
	"database/sql"
)

// stmtCache is a transaction whose statements are prepared once, at their
// first use, and reused: a read or an append that runs the same few
// queries thousands of times parses each once. They end with the
// transaction.
type stmtCache struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

var _ querier = (*stmtCache)(nil)

func newStmtCache(tx *sql.Tx) *stmtCache { return &stmtCache{tx: tx, stmts: map[string]*sql.Stmt{}} }

func (c *stmtCache) stmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := c.stmts[query]; ok {
		return st
	}
	st, err := c.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil // the query, run unprepared, says what is wrong
	}
	c.stmts[query] = st
	return st
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
