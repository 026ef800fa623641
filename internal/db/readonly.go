package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Why a SQLite store is served read-only (ReadOnlyReason): the codes the
// server and its pages say it by.
const (
	// ReadOnlyAsked: serve --read-only asked for it.
	ReadOnlyAsked = "asked"
	// ReadOnlyMount: the file or its folder is on a read-only file system.
	ReadOnlyMount = "mount"
	// ReadOnlyDenied: the user running the studio may not write the file
	// or its folder.
	ReadOnlyDenied = "denied"
)

// ReadOnlyReason says whether the SQLite file at dbPath can be served only
// read-only, and why (ReadOnlyMount, ReadOnlyDenied): a server writes the
// file, its WAL beside it, its lock and its reserve (all in its folder).
// "" when it can be written, or when it does not exist (Open creates it,
// or says why it cannot). It tries what a server would do rather than
// trusting permission bits, which do not stop root.
func ReadOnlyReason(dbPath string) string {
	if IsPostgres(dbPath) {
		return ""
	}
	if _, err := os.Stat(dbPath); err != nil {
		return ""
	}
	if f, err := os.OpenFile(dbPath, os.O_RDWR, 0); err != nil {
		return readOnlyCode(err)
	} else {
		f.Close()
	}
	probe, err := os.CreateTemp(filepath.Dir(dbPath), ".studio-probe-*")
	if err != nil {
		return readOnlyCode(err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return ""
}

// readOnlyCode is the reason a failed write says, or "" for another failure.
func readOnlyCode(err error) string {
	switch {
	case errors.Is(err, syscall.EROFS):
		return ReadOnlyMount
	case errors.Is(err, fs.ErrPermission):
		return ReadOnlyDenied
	}
	return ""
}

// OpenReadOnly opens the SQLite file at path for reading only: no
// migration, no reserve, no write of any kind (SQLite refuses them). A file
// whose schema is older than this studio's is refused, saying how to
// migrate it: its pages would ask for tables it lacks.
func OpenReadOnly(ctx context.Context, path string) (*DB, error) {
	if IsPostgres(path) {
		return nil, errors.New("a PostgreSQL database is not served read-only by the studio: connect as a role that may only read, or serve it as usual")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open database %s read-only: %w", path, err)
	}
	db, err := openReadOnly(ctx, path, "mode=ro")
	if err != nil {
		// A WAL file with no shared-memory file beside it, in a folder
		// nothing may write: SQLite can read it only as immutable, which
		// a read-only mount is.
		db, err = openReadOnly(ctx, path, "immutable=1")
	}
	if err != nil {
		return nil, fmt.Errorf("open database %s read-only: %w", path, Describe(path, err))
	}
	if err := db.checkSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func openReadOnly(ctx context.Context, path, mode string) (*DB, error) {
	r, err := sql.Open("sqlite", sqliteDSN(path, mode, busyTimeout(10*time.Second), "foreign_keys(ON)"))
	if err != nil {
		return nil, err
	}
	r.SetMaxOpenConns(8)
	// The writer is the readers' pool: any write through it fails, as
	// SQLite's read-only mode makes it.
	db := &DB{path: path, w: r, r: r, stmts: newSharedStmts(r), Clock: time.Now}
	var n int
	if err := r.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil {
		r.Close()
		return nil, err
	}
	return db, nil
}

// checkSchema refuses a file whose schema version is older than this
// studio's migrations: read-only, it cannot be migrated.
func (db *DB) checkSchema(ctx context.Context) error {
	steps, err := migrationSteps()
	if err != nil {
		return err
	}
	var version int
	if err := db.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("open database %s read-only: read schema version: %w", db.path, err)
	}
	if want := len(steps); version < want {
		return fmt.Errorf("the database %s has schema version %d and this studio needs %d, which a read-only database cannot be brought to: "+
			"copy it somewhere writable and run `studio sessions --db COPY` once (that migrates it), then serve the copy, "+
			"or serve it once writable with the same studio", db.path, version, want)
	}
	return nil
}
