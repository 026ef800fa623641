package db_test

import (
	"context"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/db/pgtest"
	"github.com/delegationstudio/studio/internal/db/storetest"
)

// TestStore runs the suite every store passes against SQLite.
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return openDB(t) })
}

// TestPostgresStore runs the same suite against PostgreSQL, each test in a
// schema of its own (skipped without a test server: pgtest).
func TestPostgresStore(t *testing.T) {
	pgtest.DSN(t) // skips here, not in each test, when there is no server
	storetest.Run(t, func(t *testing.T) storetest.Store { return openPostgres(t) })
}

func openPostgres(t testing.TB) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
