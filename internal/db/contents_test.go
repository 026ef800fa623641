package db_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// TestFileContentsAreStoredOnce runs write_file turns long enough to be
// summarized, in batches the recorder cuts where it likes, and checks that
// each content is stored once: a written file as the argument of the call
// that wrote it, each summarization's history entry as the messages it
// folded (under compat too, where the history file is deepagents'
// session_<8 hex>.md); and that every file reads back as the run left it.
func TestFileContentsAreStoredOnce(t *testing.T) {
	t.Run("ours", func(t *testing.T) { storedOnce(t, delegation.CompatNone) })
	t.Run("compat", func(t *testing.T) { storedOnce(t, delegation.CompatDeepagents) })
}

func storedOnce(t *testing.T, compat delegation.Compat) {
	sc, err := scenario.Parse(benchdata.Messages(16000))
	if err != nil {
		t.Fatal(err)
	}
	sc.Team.Main.Compat = compat
	d := openDB(t)
	id, res, err := (&session.Runner{DB: d}).Run(context.Background(), sc)
	if err != nil || res.Status != delegation.StatusDone {
		t.Fatalf("run: %v %+v", err, res)
	}
	raw, err := sql.Open("sqlite", "file:"+d.Path()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var versions, args, histories, texts int
	if err := raw.QueryRow(`SELECT count(*), count(arg), count(history), coalesce(sum(length(text)), 0) FROM contents`).
		Scan(&versions, &args, &histories, &texts); err != nil {
		t.Fatal(err)
	}
	tr, err := d.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	sums := 0
	for _, e := range tr.Events {
		if e.Type == delegation.EventSummarization && e.AgentID == "main" {
			sums++
		}
	}
	if sums < 2 || histories != sums || args < versions-sums-1 || texts != 0 {
		t.Fatalf("%d versions: %d arguments, %d histories (of %d summaries), %d bytes of text stored again", versions, args, histories, sums, texts)
	}
	// Every file reads back as the engine left it.
	if len(tr.Files) != len(res.Files) {
		t.Fatalf("%d files, want %d", len(tr.Files), len(res.Files))
	}
	for p, want := range res.Files {
		if tr.Files[p] != want {
			t.Fatalf("file %s = %.80q, want %.80q", p, tr.Files[p], want)
		}
	}
}
