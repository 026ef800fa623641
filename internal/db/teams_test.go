package db_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

// clock is a Now that moves one second per call, so times order rows.
func clock(d *db.DB) {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d.Clock = func() time.Time {
		t = t.Add(time.Second)
		return t
	}
}

func TestTeams(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	clock(d)
	doc := json.RawMessage(`{"name":"researchers","prompt":"","subagents":[{"name":"researcher","description":"Looks things up."}]}`)

	a := &db.Team{Name: "researchers", Title: "Two researchers", Scenario: doc}
	if err := d.CreateTeam(ctx, a); err != nil {
		t.Fatal(err)
	}
	t.Run("create sets the id and the times", func(t *testing.T) {
		if a.ID == "" || a.CreatedAt.IsZero() || !a.UpdatedAt.Equal(a.CreatedAt) {
			t.Fatalf("created %+v", a)
		}
	})
	t.Run("a team reads back as written", func(t *testing.T) {
		got, err := d.Team(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "researchers" || got.Title != "Two researchers" || string(got.Scenario) != string(doc) ||
			!got.CreatedAt.Equal(a.CreatedAt) || !got.UpdatedAt.Equal(a.UpdatedAt) {
			t.Fatalf("got %+v, want %+v", got, a)
		}
	})

	b := &db.Team{Name: "solo", Scenario: json.RawMessage(`{"name":"solo","prompt":"p"}`)}
	if err := d.CreateTeam(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Run("teams are listed newest first", func(t *testing.T) {
		list, err := d.Teams(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID {
			t.Fatalf("list = %+v", list)
		}
	})
	t.Run("update replaces the document and moves updated_at only", func(t *testing.T) {
		up := &db.Team{ID: a.ID, Name: "renamed", Title: "", Scenario: json.RawMessage(`{"name":"renamed","prompt":"go"}`)}
		if err := d.UpdateTeam(ctx, up); err != nil {
			t.Fatal(err)
		}
		got, err := d.Team(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "renamed" || got.Title != "" || string(got.Scenario) != `{"name":"renamed","prompt":"go"}` {
			t.Fatalf("got %+v", got)
		}
		if !got.CreatedAt.Equal(a.CreatedAt) || !got.UpdatedAt.After(a.UpdatedAt) || !up.CreatedAt.Equal(a.CreatedAt) {
			t.Fatalf("times: created %v (was %v), updated %v (was %v)", got.CreatedAt, a.CreatedAt, got.UpdatedAt, a.UpdatedAt)
		}
	})
	t.Run("a document that is not JSON is refused", func(t *testing.T) {
		if err := d.CreateTeam(ctx, &db.Team{Name: "x", Scenario: json.RawMessage(`{"name":`)}); err == nil {
			t.Fatal("stored a team whose document is not JSON")
		}
		if err := d.UpdateTeam(ctx, &db.Team{ID: a.ID, Name: "x", Scenario: json.RawMessage(`nope`)}); err == nil {
			t.Fatal("updated a team with a document that is not JSON")
		}
		if list, _ := d.Teams(ctx); len(list) != 2 {
			t.Fatalf("%d teams after refused writes, want 2", len(list))
		}
	})
	t.Run("delete removes the team; a missing team is not found", func(t *testing.T) {
		if err := d.DeleteTeam(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		for name, err := range map[string]error{
			"Team":       func() error { _, err := d.Team(ctx, b.ID); return err }(),
			"DeleteTeam": d.DeleteTeam(ctx, b.ID),
			"UpdateTeam": d.UpdateTeam(ctx, &db.Team{ID: b.ID, Name: "solo", Scenario: json.RawMessage(`{}`)}),
		} {
			if got, want := delegation.ErrorCode(err), delegation.ENOTFOUND; got != want {
				t.Errorf("%s of a deleted team: code %q (%v), want %q", name, got, err, want)
			}
		}
		if list, _ := d.Teams(ctx); len(list) != 1 || list[0].ID != a.ID {
			t.Fatalf("list after delete = %+v", list)
		}
	})
	t.Run("teams survive a reopen", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "teams.db")
		d1, err := db.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		c := &db.Team{Name: "kept", Scenario: json.RawMessage(`{"name":"kept","prompt":""}`)}
		if err := d1.CreateTeam(ctx, c); err != nil {
			t.Fatal(err)
		}
		d1.Close()
		d2, err := db.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer d2.Close()
		if got, err := d2.Team(ctx, c.ID); err != nil || got.Name != "kept" {
			t.Fatalf("after reopen: %+v, %v", got, err)
		}
	})
}
