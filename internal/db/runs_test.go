package db_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
)

func TestRuns(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	clock(d)
	for _, id := range []string{"s1", "s2", "s3"} {
		if err := d.CreateSession(ctx, &db.Session{ID: id, Name: "n-" + id, Scenario: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	old := &db.Run{Kind: db.RunLesson, Lesson: "receipt", Mode: "ours",
		Sessions: []db.RunSession{{Variant: "text", SessionID: "s1"}, {Variant: "structured", SessionID: "s2"}}}
	if err := d.CreateRun(ctx, old); err != nil {
		t.Fatal(err)
	}
	latest := &db.Run{Kind: db.RunLesson, Lesson: "receipt", Mode: "ours",
		Sessions: []db.RunSession{{Variant: "text", SessionID: "s3"}, {Variant: "structured", SessionID: "s2"}}}
	if err := d.CreateRun(ctx, latest); err != nil {
		t.Fatal(err)
	}
	team := &db.Run{Kind: db.RunTeam, TeamID: "t1", Sessions: []db.RunSession{{Variant: "run", SessionID: "s3"}}}
	if err := d.CreateRun(ctx, team); err != nil {
		t.Fatal(err)
	}

	t.Run("a lesson's runs are listed newest first with their sessions in order", func(t *testing.T) {
		runs, err := d.Runs(ctx, db.RunFilter{Lesson: "receipt"})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[0].ID != latest.ID || runs[1].ID != old.ID {
			t.Fatalf("runs = %+v; want the latest, then the old", runs)
		}
		s := runs[0].Sessions
		if len(s) != 2 || s[0].Variant != "text" || s[0].SessionID != "s3" || s[0].Name != "n-s3" || s[0].Status != delegation.StatusRunning {
			t.Fatalf("sessions = %+v", s)
		}
		if !runs[0].Running() {
			t.Fatal("a run of running sessions is not Running")
		}
	})
	t.Run("runs are found by team and by session", func(t *testing.T) {
		runs, err := d.Runs(ctx, db.RunFilter{TeamID: "t1"})
		if err != nil || len(runs) != 1 || runs[0].ID != team.ID {
			t.Fatalf("team runs = %+v, %v", runs, err)
		}
		runs, err = d.Runs(ctx, db.RunFilter{SessionID: "s2"})
		if err != nil || len(runs) != 2 {
			t.Fatalf("runs with s2 = %+v, %v", runs, err)
		}
	})
	t.Run("a run reads back; a missing one is not found", func(t *testing.T) {
		r, err := d.Run(ctx, old.ID)
		if err != nil || r.Kind != db.RunLesson || r.Mode != "ours" || len(r.Sessions) != 2 {
			t.Fatalf("run = %+v, %v", r, err)
		}
		if _, err := d.Run(ctx, "nope"); delegation.ErrorCode(err) != delegation.ENOTFOUND {
			t.Fatalf("missing run: %v", err)
		}
	})
	t.Run("a deleted session leaves its runs", func(t *testing.T) {
		if err := d.DeleteSession(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		r, err := d.Run(ctx, old.ID)
		if err != nil || len(r.Sessions) != 1 || r.Sessions[0].SessionID != "s2" {
			t.Fatalf("run after the delete = %+v, %v", r, err)
		}
	})
	t.Run("a cloned team remembers its source", func(t *testing.T) {
		tm := &db.Team{Name: "receipt-2", Scenario: json.RawMessage(`{"name":"receipt-2"}`)}
		if err := d.CreateTeamFrom(ctx, tm, "lesson:receipt"); err != nil {
			t.Fatal(err)
		}
		if src, err := d.TeamSource(ctx, tm.ID); err != nil || src != "lesson:receipt" {
			t.Fatalf("source = %q, %v", src, err)
		}
		names, err := d.TeamNames(ctx)
		if err != nil || !names["receipt-2"] {
			t.Fatalf("names = %v, %v", names, err)
		}
	})
}
