package db

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A read-only file whose schema is older than the studio's is refused,
// saying how to migrate it; one of today's opens, and refuses writes.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "studio.db")
	d, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	ro, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("open today's schema read-only: %v", err)
	}
	if _, err := ro.w.ExecContext(ctx, `DELETE FROM sessions`); err == nil {
		t.Errorf("a read-only store took a write")
	}
	if err := ro.Ping(ctx); err != nil {
		t.Errorf("ping a read-only store: %v", err)
	}
	ro.Close()

	d, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.w.ExecContext(ctx, `PRAGMA user_version = 3`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = OpenReadOnly(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "schema version 3") || !strings.Contains(err.Error(), "studio sessions --db COPY") {
		t.Fatalf("open an old schema read-only = %v; want a refusal saying how to migrate", err)
	}
}
