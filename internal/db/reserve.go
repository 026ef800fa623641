package db

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"github.com/delegationstudio/studio/internal/delegation"
)

// reserveSize is the room a SQLite store keeps beside its file for the
// writes that end sessions when its disk fills: a session.finished and an
// agent.finished per running agent are a few pages of the log, so a
// session cut off by a full disk is recorded as failed, saying why, at
// once rather than once space returns.
const reserveSize = 1 << 20

// ReservePath is the file beside a database that holds its reserve.
func ReservePath(dbPath string) string { return dbPath + ".reserve" }

// reserve is the space kept on a SQLite file's disk (reserveSize, in a
// file of its own). It is given back to the disk only to end sessions a
// full disk cut off (finish), and taken again as soon as the disk has room
// (Ping): while it cannot be, the store says its disk is full.
type reserve struct {
	path string
	mu   sync.Mutex
	held bool
}

func newReserve(dbPath string) *reserve { return &reserve{path: ReservePath(dbPath)} }

// hold puts the reserve on the disk unless it is there; it fails when the
// disk has no room for it.
func (r *reserve) hold() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if fi, err := os.Stat(r.path); err == nil && fi.Size() == reserveSize {
		r.held = true // ours, or another process's on the same file
		return nil
	}
	r.held = false
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	// Random bytes, not zeros: a compressing file system keeps no room for
	// zeros.
	b := make([]byte, reserveSize)
	_, _ = rand.Read(b)
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(r.path) // a part of it is no reserve
		return err
	}
	r.held = true
	return nil
}

// release gives the reserve back to the disk; it reports whether that freed
// anything (another process on the same file may have freed it already).
func (r *reserve) release() bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held = false
	return os.Remove(r.path) == nil
}

// isFull reports whether err is a write the store's disk had no room for.
func isFull(err error) bool { return delegation.ErrorCode(err) == delegation.EFULL }

// fullDisk is the error of a store whose disk is full.
func (db *DB) fullDisk() error {
	return &delegation.Error{Code: delegation.EFULL, Message: fmt.Sprintf(
		"the disk holding the database %s is full: free some space on it; the studio takes writes again once there is room", db.path)}
}

// checkSpace says whether the store's disk has room: room for its reserve,
// which it takes again here once a full disk made it give it up, and (where
// the system says) that much more.
func (db *DB) checkSpace() error {
	if db.reserve == nil {
		return nil
	}
	if err := db.reserve.hold(); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, errQuota) {
			return db.fullDisk()
		}
		return nil // not about space (a folder made read-only): writes say what is wrong
	}
	if free, ok := freeSpace(db.path); ok && free < reserveSize {
		return db.fullDisk()
	}
	return nil
}
