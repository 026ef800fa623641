package db

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// TestStatementsOutliveTheirTransaction: a writer's statement is prepared
// on the pool after the first transaction that used it, and every later
// transaction uses that one statement, until the store closes.
func TestStatementsOutliveTheirTransaction(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	const q = `SELECT count(*) FROM sessions`
	var first *sql.Stmt
	for i := range 3 {
		err := d.tx(ctx, func(tx *sql.Tx) error {
			c := newStmtCache(tx)
			c.shared = d.stmts
			defer c.close()
			var n int
			return c.QueryRowContext(ctx, q).Scan(&n)
		})
		if err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
		d.stmts.mu.Lock()
		st := d.stmts.stmts[q]
		d.stmts.mu.Unlock()
		switch {
		case st == nil:
			t.Fatalf("after transaction %d the pool has no statement for %q", i, q)
		case first == nil:
			first = st
		case st != first:
			t.Fatalf("transaction %d prepared %q again", i, q)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if len(d.stmts.stmts) != 0 || !d.stmts.closed {
		t.Fatalf("after Close the pool keeps %d statements", len(d.stmts.stmts))
	}
}
