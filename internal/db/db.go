// Package db keeps sessions in one SQLite file (modernc.org/sqlite, no cgo),
// or in a PostgreSQL database that several studios share (pgx; postgres.go):
// each session's event log and what its events introduced, with the queries
// the studio's views, exports and imports need. SQL is written by hand, one
// file per aggregate; public methods open the transaction and lower-case
// helpers take the *sql.Tx, so several writes share one.
package db

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql migrations_pg/*.sql
var migrations embed.FS

// DB is an open store. Writes go through one connection, so they never
// fight each other for the lock; reads use a pool and, thanks to WAL, are
// not blocked by writes.
type DB struct {
	path string
	w    *sql.DB
	r    *sql.DB
	// pg is a PostgreSQL store: w and r are one pool, and dsn its URL.
	pg  bool
	dsn string
	// stmts are the writer's statements, prepared once (prepared.go).
	stmts *sharedStmts
	// Clock is the store's clock; tests replace it.
	Clock func() time.Time
	// reserve is the space kept beside a SQLite file for ending sessions
	// when its disk fills (reserve.go); nil for PostgreSQL.
	reserve *reserve
}

// Now is the time by the store's clock: of leases, and of what the runner
// records.
func (db *DB) Now() time.Time { return db.Clock() }

// Options tune an open database; the zero value is what the studio uses.
type Options struct {
	// BusyTimeout is how long a write waits for another process's lock
	// before failing; 0 means 10 s.
	BusyTimeout time.Duration
	// MaxPages caps the file's size in pages (0: no cap), to test a full disk.
	MaxPages int
}

// Open opens (creating if needed) the database at path, or the PostgreSQL
// database a postgres:// URL names, and applies the migrations it lacks.
func Open(ctx context.Context, path string) (*DB, error) {
	if IsPostgres(path) {
		return openPostgres(ctx, path)
	}
	return OpenWith(ctx, path, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: no path given")
	}
	if opt.BusyTimeout == 0 {
		opt.BusyTimeout = 10 * time.Second
	}
	pragmas := []string{
		// first, so that the pragmas after it wait for another process's
		// lock too (switching a new file to WAL takes one)
		busyTimeout(opt.BusyTimeout),
		"journal_mode(WAL)",   // readers do not block the writer, nor it them
		"foreign_keys(ON)",    // deleting a session deletes all it holds
		"synchronous(NORMAL)", // with WAL: durable across a process crash, and fast commits
	}
	if opt.MaxPages > 0 {
		pragmas = append(pragmas, fmt.Sprintf("max_page_count(%d)", opt.MaxPages))
	}
	dsn := sqliteDSN(path, "", pragmas...)
	// Write transactions take the write lock when they begin (BEGIN
	// IMMEDIATE), so that one waits its busy timeout for another process's
	// writer; a deferred one that reads first fails at once (SQLITE_BUSY)
	// when it tries to upgrade, whatever the timeout.
	w, err := sql.Open("sqlite", dsn+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	db := &DB{path: path, w: w, r: r, stmts: newSharedStmts(w), Clock: time.Now, reserve: newReserve(path)}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.reserve.hold() // a disk already full holds none: Ping says so
	return db, nil
}

// sqliteDSN is the driver's name for the file at path, opened in mode
// (SQLite's URI parameters, "" for none) with the pragmas, in order.
func sqliteDSN(path, mode string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	dsn := "file:" + path + "?"
	if mode != "" {
		dsn += mode + "&"
	}
	return dsn + q.Encode()
}

// busyTimeout is the pragma that makes a connection wait d for another
// process's lock.
func busyTimeout(d time.Duration) string {
	return fmt.Sprintf("busy_timeout(%d)", d.Milliseconds())
}

// Close closes the database.
func (db *DB) Close() error {
	db.stmts.close()
	if db.w == db.r {
		return db.w.Close()
	}
	return errors.Join(db.w.Close(), db.r.Close())
}

// Postgres reports whether the store is a PostgreSQL database.
func (db *DB) Postgres() bool { return db.pg }

// dialect is the store's engine's SQL, where it differs.
func (db *DB) dialect() dialect { return dialect{pg: db.pg} }

// Path is the database file (a PostgreSQL store's URL, without password).
func (db *DB) Path() string { return db.path }

// migrate applies, in order, the numbered migrations the database has not
// seen, all in one write transaction: the schema version (user_version) is
// read under the write lock, so any number of processes may open a new file
// at once; the first migrates it, the others wait for its lock and then
// find nothing to do.
func (db *DB) migrate(ctx context.Context) error {
	steps, err := migrationSteps()
	if err != nil {
		return err
	}
	return db.tx(ctx, func(tx *sql.Tx) error {
		var version int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		for _, m := range steps {
			if m.n <= version {
				continue
			}
			body, err := migrations.ReadFile(m.name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if step := goSteps[m.n]; step != nil {
				if err := step(ctx, tx); err != nil {
					return fmt.Errorf("migration %s: %w", m.name, err)
				}
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.n)); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}

type migration struct {
	n    int
	name string
}

// migrationSteps lists the embedded migrations in order. Their numbers run
// 1, 2, 3… with none shared: a file whose schema version is N is taken to
// hold every migration up to N, so two migrations of one number would
// leave one of them out of some files.
func migrationSteps() ([]migration, error) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var steps []migration
	for i, name := range names {
		n, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(name, "migrations/"), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: its name must start with a number", name)
		}
		if n != i+1 {
			return nil, fmt.Errorf("migration %s: numbered %d, but it comes %d%s: number the migrations 1, 2, 3… with none shared or skipped",
				name, n, i+1, ordinalSuffix(i+1))
		}
		steps = append(steps, migration{n: n, name: name})
	}
	return steps, nil
}

func ordinalSuffix(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}

// busyRetries is how many more times a write transaction is tried when
// another process held the write lock for a whole busy timeout.
const busyRetries = 2

// tx runs fn in a write transaction: committed when fn returns nil, rolled
// back otherwise, so a failed write leaves nothing half-written. The
// transaction holds the write lock from its start; when another process
// holds it past the busy timeout, the whole transaction is tried again, a
// bounded number of times.
func (db *DB) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	var err error
	for attempt := 0; attempt <= busyRetries; attempt++ {
		if err = db.tryTx(ctx, fn); !(isBusy(err) || isRetryable(err)) || ctx.Err() != nil {
			break
		}
	}
	return db.unavailable(err)
}

func (db *DB) tryTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	err = tx.Commit()
	db.stmts.prepareMissed(ctx)
	return err
}

// isBusy reports whether err is SQLite's "another connection holds the lock".
func isBusy(err error) bool {
	var coded interface{ Code() int }
	if err == nil || !errors.As(err, &coded) {
		return false
	}
	c := coded.Code() & 0xff
	return c == sqliteBusy || c == sqliteLocked
}

// SQLite's result codes for a lock held elsewhere and a full disk.
const (
	sqliteBusy   = 5
	sqliteLocked = 6
	sqliteFull   = 13
)

// unavailable turns a locked or full database into an error that says so
// and what to do; other errors pass as they are.
func (db *DB) unavailable(err error) error {
	var coded interface{ Code() int }
	if err == nil || !errors.As(err, &coded) {
		return err
	}
	switch coded.Code() & 0xff { // the primary code, without its extended part
	case sqliteBusy, sqliteLocked:
		return &delegation.Error{Code: delegation.EUNAVAILABLE, Message: fmt.Sprintf(
			"the database %s is locked by another process: stop the other studio (or sqlite3 shell) using it, then try again", db.path)}
	case sqliteFull:
		return &delegation.Error{Code: delegation.EFULL, Message: fmt.Sprintf(
			"the database %s is full (no space left on its disk): free some space, then try again; nothing of the failed write was kept", db.path)}
	}
	return err
}

// IntegrityCheck runs SQLite's integrity check; it returns "ok" for a sound file.
func (db *DB) IntegrityCheck(ctx context.Context) (string, error) {
	var res string
	err := db.r.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res)
	return res, err
}

// packJSON gzips a large JSON document for storage: a scenario with a long
// script is mostly repetition. Stored values keep a one-byte tag so either
// form reads back.
func packJSON(doc []byte) []byte {
	if len(doc) < 1024 {
		return append([]byte{'j'}, doc...)
	}
	var b bytes.Buffer
	b.WriteByte('z')
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	_, _ = zw.Write(doc)
	_ = zw.Close()
	return b.Bytes()
}

func unpackJSON(stored []byte) ([]byte, error) {
	if len(stored) == 0 {
		return nil, nil
	}
	switch stored[0] {
	case 'j':
		return stored[1:], nil
	case 'z':
		zr, err := gzip.NewReader(bytes.NewReader(stored[1:]))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(zr)
	}
	return stored, nil // written before packing existed
}

// packRanges stores a context compactly: [["main",0,12],["a1",0,1]].
func packRanges(rs []delegation.Range) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		id, _ := json.Marshal(r.AgentID)
		fmt.Fprintf(&b, "[%s,%d,%d]", id, r.From, r.To)
	}
	b.WriteByte(']')
	return b.String()
}

func unpackRanges(s string) ([]delegation.Range, error) {
	var raw [][3]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, err
	}
	out := make([]delegation.Range, len(raw))
	for i, r := range raw {
		if err := errors.Join(json.Unmarshal(r[0], &out[i].AgentID), json.Unmarshal(r[1], &out[i].From), json.Unmarshal(r[2], &out[i].To)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func nullString(s *string) sql.NullString {
	if s == nil || *s == "" {
		return sql.NullString{}
	}
	return sql.NullString{String: *s, Valid: true}
}

func strPtr(ns sql.NullString) *string {
	if !ns.Valid {
		return nil
	}
	s := ns.String
	return &s
}

// Checkpoint moves the write-ahead log into the database file and truncates
// it, so the file's size is the store's size.
func (db *DB) Checkpoint(ctx context.Context) error {
	_, err := db.w.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}
