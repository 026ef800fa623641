package db

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db/pgtest"
)

// TestPostgresSchemaIsSQLites: PostgreSQL's tables (migrations_pg) have
// the columns SQLite's migrations leave, so that the queries written once
// run on both; a migration of one without the other fails here.
func TestPostgresSchemaIsSQLites(t *testing.T) {
	ctx := context.Background()
	lite, err := Open(ctx, filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg, err := Open(ctx, pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	columns := func(d *DB, query string) map[string]string {
		rows, err := d.r.QueryContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols := map[string][]string{}
		for rows.Next() {
			var table, col string
			if err := rows.Scan(&table, &col); err != nil {
				t.Fatal(err)
			}
			cols[table] = append(cols[table], col)
		}
		out := map[string]string{}
		for table, cs := range cols {
			slices.Sort(cs)
			out[table] = strings.Join(cs, ", ")
		}
		return out
	}
	want := columns(lite, `SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`)
	got := columns(pg, `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()`)
	// PostgreSQL's own: its schema's version, and the replicas' secrets.
	delete(got, "schema_version")
	delete(got, "secrets")
	var diffs []string
	for table, cols := range want {
		if got[table] != cols {
			diffs = append(diffs, fmt.Sprintf("%s: SQLite (%s), PostgreSQL (%s)", table, cols, got[table]))
		}
	}
	for table := range got {
		if _, ok := want[table]; !ok {
			diffs = append(diffs, table+": only in PostgreSQL")
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Fatalf("the stores' tables differ:\n%s", strings.Join(diffs, "\n"))
	}
}

// TestPostgresReplicasMigrateTogether: replicas that start at once on a new
// database each open it; the migrations run once, under their lock.
func TestPostgresReplicasMigrateTogether(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	const replicas = 4
	errs := make(chan error, replicas)
	opened := make(chan *DB, replicas)
	for range replicas {
		go func() {
			d, err := Open(ctx, dsn)
			errs <- err
			opened <- d
		}()
	}
	for range replicas {
		if err := <-errs; err != nil {
			t.Fatalf("a replica starting with the others: %v", err)
		}
		d := <-opened
		defer d.Close()
	}
	d, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var version, rows int
	if err := d.r.QueryRowContext(ctx, `SELECT max(version), count(*) FROM schema_version`).Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(migrations, "migrations_pg/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if version != len(names) || rows != 1 {
		t.Fatalf("schema version %d in %d rows; want %d in one", version, rows, len(names))
	}
}
