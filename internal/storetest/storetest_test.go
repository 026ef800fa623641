package storetest_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/db/pgtest"
	"github.com/delegationstudio/studio/internal/server"
	"github.com/delegationstudio/studio/internal/storetest"
)

// TestStore runs the suite every store passes against SQLite.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) server.Store {
		return open(t, filepath.Join(t.TempDir(), "studio.db"))
	})
}

// TestPostgresStore runs the same suite against PostgreSQL, each test in a
// schema of its own (skipped without a test server: pgtest).
func TestPostgresStore(t *testing.T) {
	pgtest.DSN(t) // skips here, not in each test, when there is no server
	storetest.Run(t, func(t *testing.T) server.Store { return open(t, pgtest.DSN(t)) })
}

// open opens a store at a path or DSN, closed when the test ends.
func open(t *testing.T, dsn string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
