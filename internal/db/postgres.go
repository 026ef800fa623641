package db

// The PostgreSQL store: the same DB, the same SQL and the same tests as
// SQLite's (docs/postgres.md). Its queries are the ones the rest of the
// package writes, each saying by name what it needs where the engines
// differ (dialect.go: a locking read, an index hint, a byte prefix, JSON);
// the connection below (pgConn) numbers their placeholders as PostgreSQL
// does, so that one rule of the store lives in one place whatever the
// engine. Migrations are its own (migrations_pg/), numbered, applied under
// an advisory lock. A session's appends lock its row (dialect.forUpdate), so that
// replicas writing at once keep its seq without gaps, and tell every
// replica that its log grew (NOTIFY on LogChannel, notify.go).

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// IsPostgres reports whether a --db value names a PostgreSQL database
// (a postgres:// or postgresql:// URL) rather than a SQLite file.
func IsPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// LogChannel is the channel a PostgreSQL store NOTIFYs, at the commit of
// each append, with "<last seq> <session id>": the replicas watching that
// session read what follows from the table.
const LogChannel = "studio_log"

// openPostgres opens the database a postgres:// URL names and applies the
// migrations it lacks.
func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", redact(dsn), err)
	}
	pool := sql.OpenDB(pgConnector{stdlib.GetConnector(*cfg)})
	pool.SetMaxOpenConns(16)
	pool.SetMaxIdleConns(16)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db := &DB{path: redact(dsn), dsn: dsn, pg: true, w: pool, r: pool, stmts: newSharedStmts(pool), Clock: time.Now}
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w (is PostgreSQL running there, and does the database exist?)", db.path, err)
	}
	if err := db.migratePostgres(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", db.path, err)
	}
	return db, nil
}

// Redacted is a --db value as messages show it: a PostgreSQL URL without
// its password, a file as it is.
func Redacted(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	return redact(dsn)
}

// redact is a URL without its password, for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// migrationsLock is the advisory lock migrations run under: any number of
// replicas may start at once; the first migrates, the others wait and then
// find nothing to do.
const migrationsLock = 0x5354_5544_494f // "STUDIO"

func (db *DB) migratePostgres(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations_pg/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	if len(names) == 0 {
		return errors.New("no PostgreSQL migrations are built in")
	}
	return db.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, int64(migrationsLock)); err != nil {
			return fmt.Errorf("take the migrations' lock: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)`); err != nil {
			return err
		}
		var version int
		err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`)
		}
		if err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		seen := map[int]string{}
		last := 0
		for _, name := range names {
			n, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "migrations_pg/"), "_", 2)[0])
			if err != nil {
				return fmt.Errorf("migration %s: its name must start with a number", name)
			}
			if other, dup := seen[n]; dup {
				return fmt.Errorf("migrations %s and %s have the same number", other, name)
			}
			seen[n], last = name, n
			if n <= version {
				continue
			}
			body, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			// As written: a migration's SQL is PostgreSQL's own, not
			// rewritten (rawSQL).
			if _, err := tx.ExecContext(ctx, rawSQL+string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			if step := pgGoSteps[n]; step != nil {
				if err := step(ctx, tx); err != nil {
					return fmt.Errorf("migration %s: %w", name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, n); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
		}
		if version > last {
			return fmt.Errorf("the database is at schema version %d, newer than this studio knows (%d): run a newer studio", version, last)
		}
		return nil
	})
}

// isRetryable reports whether a PostgreSQL transaction failed only because
// another one ran at the same time (a serialization failure or a
// deadlock), so that trying it again may succeed.
func isRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// rawSQL starts a statement pgConn passes as it is.
const rawSQL = "/* postgres */ "

// rewrites caches each query as PostgreSQL's.
var rewrites sync.Map // string → string

// postgresSQL is a query of this package with its placeholders as
// PostgreSQL's: ? and ?N as $N. What else differs the query says itself
// (dialect).
func postgresSQL(q string) string {
	if s, ok := rewrites.Load(q); ok {
		return s.(string)
	}
	if strings.HasPrefix(q, rawSQL) {
		return q
	}
	var b strings.Builder
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			if j > i+1 {
				b.WriteString("$" + q[i+1:j])
				i = j - 1
				continue
			}
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	out := b.String()
	rewrites.Store(q, out)
	return out
}

// pgConnector makes pgConns.
type pgConnector struct{ inner driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.inner.Driver() }

// pgConn is pgx's database/sql connection with this package's SQL turned
// into PostgreSQL's, values of two forms (dyn) in their PostgreSQL form,
// strings as bytes,
// read-only transactions reading one snapshot (as SQLite's do), and each
// result read whole before it is handed on: a read of this package runs
// queries while it walks the rows of another (a log block, then its
// messages), which one PostgreSQL connection cannot do with a result still
// coming in.
type pgConn struct{ c *stdlib.Conn }

var (
	_ driver.ConnPrepareContext = (*pgConn)(nil)
	_ driver.ConnBeginTx        = (*pgConn)(nil)
	_ driver.ExecerContext      = (*pgConn)(nil)
	_ driver.QueryerContext     = (*pgConn)(nil)
	_ driver.NamedValueChecker  = (*pgConn)(nil)
	_ driver.SessionResetter    = (*pgConn)(nil)
	_ driver.Pinger             = (*pgConn)(nil)
)

func (p *pgConn) Prepare(query string) (driver.Stmt, error) {
	return p.PrepareContext(context.Background(), query)
}

func (p *pgConn) PrepareContext(_ context.Context, query string) (driver.Stmt, error) {
	// pgx prepares and caches each statement on its connection at its first
	// run, and describes it once: a statement prepared here again (a
	// transaction's, stmtCache) would cost a round trip to prepare and one
	// to deallocate.
	return pgStmt{p, query}, nil
}

func (p *pgConn) Close() error { return p.c.Close() }

func (p *pgConn) Begin() (driver.Tx, error) {
	return p.BeginTx(context.Background(), driver.TxOptions{})
}

func (p *pgConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly && sql.IsolationLevel(opts.Isolation) == sql.LevelDefault {
		// A read is one moment of the store, as a SQLite read transaction
		// is: every statement of it sees the snapshot its first saw.
		opts.Isolation = driver.IsolationLevel(sql.LevelRepeatableRead)
	}
	return p.c.BeginTx(ctx, opts)
}

func (p *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return p.c.ExecContext(ctx, postgresSQL(query), args)
}

func (p *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	rows, err := p.c.QueryContext(ctx, postgresSQL(query), args)
	if err != nil {
		return nil, err
	}
	return readWhole(rows)
}

func (p *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	if d, ok := nv.Value.(dyn); ok {
		nv.Value = d.pg
	}
	// A string goes as its bytes: into a TEXT column as the text, into
	// a BYTEA one (what agents wrote: 0001_store.sql) byte for byte.
	if s, ok := nv.Value.(string); ok {
		nv.Value = []byte(s)
	}
	return p.c.CheckNamedValue(nv)
}

func (p *pgConn) ResetSession(ctx context.Context) error { return p.c.ResetSession(ctx) }

func (p *pgConn) Ping(ctx context.Context) error { return p.c.Ping(ctx) }

// pgStmt is a statement of pgConn: its query, run as the connection runs
// queries.
type pgStmt struct {
	c     *pgConn
	query string
}

func (s pgStmt) Close() error  { return nil }
func (s pgStmt) NumInput() int { return -1 } // pgx checks the arguments

func (s pgStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s pgStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s pgStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.c.ExecContext(ctx, s.query, args)
}

func (s pgStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.c.QueryContext(ctx, s.query, args)
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

// readWhole reads a result to its end and closes it, so that its
// connection is free for the next query while the rows are walked.
func readWhole(rows driver.Rows) (driver.Rows, error) {
	defer rows.Close()
	out := &wholeRows{cols: rows.Columns()}
	for {
		row := make([]driver.Value, len(out.cols))
		err := rows.Next(row)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for i, v := range row {
			if b, ok := v.([]byte); ok {
				row[i] = append([]byte(nil), b...)
			}
		}
		out.rows = append(out.rows, row)
	}
}

type wholeRows struct {
	cols []string
	rows [][]driver.Value
}

func (r *wholeRows) Columns() []string { return r.cols }
func (r *wholeRows) Close() error      { r.rows = nil; return nil }

func (r *wholeRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}
