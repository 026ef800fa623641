//go:build unix

package db

import (
	"errors"
	"os"
	"syscall"
)

// flockExclusive takes an exclusive flock on f without waiting: flock, not
// fcntl, so that it never meets SQLite's own (fcntl) locks on the database.
func flockExclusive(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

// flockShared takes a shared flock on f without waiting; it fails while a
// server holds the exclusive one.
func flockShared(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
