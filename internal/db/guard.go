package db

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	if err := flockExclusive(f); err != nil {
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
