package db_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// TestMigrateFromV5 opens a file the studio wrote before the log was stored
// in blocks (lessons of every kind, an imported OTLP trace, a session killed
// mid-run), migrates it and checks that every session exports byte for
// byte as the studio before the block log (schema 7) exports that file
// (v7-exports: the studio of schema 5's own exports differ from those only
// by the cached_prefix_tokens 0007_costs added to every model call).
func TestMigrateFromV5(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v5.db")
	gunzip(t, "testdata/v5.db.gz", path)
	var want map[string]string
	raw := new(bytes.Buffer)
	gunzipTo(t, "testdata/v7-exports.json.gz", raw)
	if err := json.Unmarshal(raw.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	d, err := db.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ok, err := d.IntegrityCheck(context.Background()); err != nil || ok != "ok" {
		t.Fatalf("integrity = %q, %v", ok, err)
	}
	for id, doc := range want {
		var got bytes.Buffer
		err := d.Read(context.Background(), id, func(r db.Reader) error { return trace.Write(&got, r, false) })
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		if got.String()+"\n" != doc && got.String() != doc {
			a, b := got.String(), doc
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Fatalf("session %s exports differently after the migration, at byte %d:\n got %.200q\nwant %.200q", id, i, a[max(i-80, 0):], b[max(i-80, 0):])
		}
	}
	t.Run("each session's origin is read from its log into its row", func(t *testing.T) {
		list, err := d.Sessions(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, s := range list {
			var want string
			if err := d.Read(context.Background(), s.ID, func(r db.Reader) error {
				want = r.Head().Session.Origin.OriginKind()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if s.Origin != want {
				t.Errorf("session %s: origin %q in its row, %q in its log", s.ID, s.Origin, want)
			}
			kinds[s.Origin]++
		}
		if kinds[delegation.OriginOTLP] != 1 || kinds[delegation.OriginEngine] != len(list)-1 {
			t.Errorf("origins %v of %d sessions: want the imported trace's otlp, the rest engine", kinds, len(list))
		}
	})
	t.Run("the session killed mid-run is recovered by appending its end", func(t *testing.T) {
		ids, err := d.Recover(context.Background())
		if err != nil || len(ids) != 1 {
			t.Fatalf("recovered %v, %v", ids, err)
		}
		tr, err := d.Trace(context.Background(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		last := tr.Events[len(tr.Events)-1]
		if tr.Session.Status != delegation.StatusInterrupted || last.Type != delegation.EventSessionFinished {
			t.Fatalf("after recovery: %s, last event %s", tr.Session.Status, last.Type)
		}
	})
}

func gunzip(t *testing.T, from, to string) {
	t.Helper()
	f, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gunzipTo(t, from, f)
}

func gunzipTo(t *testing.T, from string, w io.Writer) {
	t.Helper()
	f, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, zr); err != nil {
		t.Fatal(err)
	}
}
