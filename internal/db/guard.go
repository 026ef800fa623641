package db

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// ServeLock is one server's hold on a database file: while a `studio serve`
// holds it, a second one on the same file refuses to start, before it reads
// or writes anything. Other commands (`studio run --db`, `import`) do not
// take it: they write alongside the server, each write transaction waiting
// for the write lock, and each of their sessions held by a lease of its own.
type ServeLock struct {
	f *os.File
}

// LockPath is the file beside a database that a server's lock lives in.
func LockPath(dbPath string) string { return dbPath + ".serve-lock" }

// LockServe takes the server lock of the database at dbPath, or says who
// holds it. The kernel releases it when the process ends, however it ends.
// A PostgreSQL database takes none: any number of studios serve it at once
// (docs/postgres.md).
func LockServe(dbPath string) (*ServeLock, error) {
	if IsPostgres(dbPath) {
		return &ServeLock{}, nil
	}
	path := LockPath(dbPath)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	if err := lockRetrying(f); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("the database %s is in use by another studio serve%s: stop that one, or give this one another --db", dbPath, holder)
		}
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &ServeLock{f: f}, nil
}

// lockRetrying takes the lock, trying again for a moment while it is held:
// Served's probe holds it for an instant, and must not turn a server away.
func lockRetrying(f *os.File) error {
	var err error
	for range 20 {
		if err = flockExclusive(f); !errors.Is(err, errLocked) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return err
}

// Served reports whether a `studio serve` holds the database at dbPath. It
// ends the sessions whose lease lapsed and pushes their spans, so the other
// commands leave that to it. It tells by trying the lock and letting it go
// at once; a PostgreSQL database is never held by one server.
func Served(dbPath string) (bool, error) {
	if IsPostgres(dbPath) {
		return false, nil
	}
	f, err := os.Open(LockPath(dbPath))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // no server ever served it
	}
	if err != nil {
		return false, fmt.Errorf("see whether a server holds %s: %w", dbPath, err)
	}
	defer f.Close() // closing the file releases the lock, if taken
	switch err := flockShared(f); {
	case errors.Is(err, errLocked):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("see whether a server holds %s: %w", dbPath, err)
	}
	return false, nil
}

// Release lets the lock go.
func (l *ServeLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the file releases its lock
	l.f = nil
	return err
}

var errLocked = errors.New("locked")
