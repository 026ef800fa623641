package db_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// FuzzImport feeds documents to import: it must never panic, never write
// part of a document, and what it accepts must export as a valid trace that
// imports again.
func FuzzImport(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":"delegation-studio.trace","version":1}`))
	d, err := db.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	defer d.Close()
	r := &session.Runner{DB: d}
	f.Fuzz(func(t *testing.T, doc []byte) {
		before, err := d.Sessions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		id, err := r.Import(context.Background(), doc)
		if err != nil {
			if code := delegation.ErrorCode(err); code != delegation.EINVALID && code != delegation.ETOOLARGE {
				t.Fatalf("import failed with %s: %v", code, err)
			}
			after, _ := d.Sessions(context.Background(), 0)
			if len(after) != len(before) {
				t.Fatal("a rejected document wrote a session")
			}
			return
		}
		tr, err := d.Trace(context.Background(), id)
		if err != nil {
			t.Fatalf("export of an accepted import: %v", err)
		}
		again, _ := json.Marshal(tr)
		if _, _, err := trace.Parse(again); err != nil {
			t.Fatalf("the export of an accepted import does not import: %v", err)
		}
	})
}
