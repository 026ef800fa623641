package db_test

import (
	"path/filepath"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
)

// TestServed: a file is seen served while a server's lock is held, and
// never otherwise; the look does not keep a server from taking the lock.
func TestServed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "studio.db")
	served := func() bool {
		t.Helper()
		ok, err := db.Served(path)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if served() {
		t.Fatal("a file no server ever locked is seen served")
	}
	lock, err := db.LockServe(path)
	if err != nil {
		t.Fatal(err)
	}
	if !served() {
		t.Fatal("a file whose lock a server holds is not seen served")
	}
	if _, err := db.LockServe(path); err == nil {
		t.Fatal("a second server took the lock")
	}
	lock.Release()
	if served() {
		t.Fatal("a file whose server let its lock go is still seen served")
	}
	lock, err = db.LockServe(path)
	if err != nil {
		t.Fatalf("a server could not take the lock after the look: %v", err)
	}
	lock.Release()
	if ok, err := db.Served("postgres://u@h/db"); ok || err != nil {
		t.Fatalf("a PostgreSQL store is seen served: %v, %v", ok, err)
	}
}
