package db_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

func TestReader(t *testing.T) {
	ctx := context.Background()
	d := openDB(t)
	id, _, err := (&session.Runner{DB: d}).Run(ctx, loadScenario(t, example))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := d.Trace(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	read := func(fn func(db.Reader)) {
		t.Helper()
		if err := d.Read(ctx, id, func(r db.Reader) error { fn(r); return nil }); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("the trace written from the cursors is the trace read whole", func(t *testing.T) {
		for _, pretty := range []bool{false, true} {
			var streamed, inMemory bytes.Buffer
			read(func(r db.Reader) {
				if err := trace.Write(&streamed, r, pretty); err != nil {
					t.Fatal(err)
				}
			})
			if err := trace.Write(&inMemory, trace.SourceOf(whole), pretty); err != nil {
				t.Fatal(err)
			}
			if streamed.String() != inMemory.String() {
				t.Fatalf("pretty=%v: the streamed trace differs:\n%s\n---\n%s", pretty, streamed.String(), inMemory.String())
			}
		}
	})

	t.Run("the log carries what each event introduced, as the trace in memory does", func(t *testing.T) {
		var got []trace.Step
		read(func(r db.Reader) {
			for sp, err := range r.Log() {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, sp)
			}
		})
		var want []trace.Step
		for sp, err := range trace.SourceOf(whole).Log() {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, sp)
		}
		if len(got) != len(want) || len(got) != len(whole.Events) {
			t.Fatalf("%d entries from the store, %d from memory, %d events", len(got), len(want), len(whole.Events))
		}
		for i := range got {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			if !bytes.Equal(g, w) {
				t.Fatalf("entry %d:\n%s\n%s", i, g, w)
			}
			if got[i].Event.Seq != int64(i+1) {
				t.Fatalf("entry %d has seq %d", i, got[i].Event.Seq)
			}
		}
		calls := 0
		for _, sp := range got {
			if sp.Call != nil {
				calls++
				if sp.Call.SystemPrompt == "" && sp.Call.AgentID == "a1" {
					t.Fatal("a call's system prompt is its agent's")
				}
			}
		}
		if calls != len(whole.ModelCalls) {
			t.Fatalf("%d model.started with their call, %d calls", calls, len(whole.ModelCalls))
		}
	})

	t.Run("backward reads a range of a list newest first, beside an open log cursor", func(t *testing.T) {
		read(func(r db.Reader) {
			for sp, err := range r.Log() {
				if err != nil {
					t.Fatal(err)
				}
				if sp.Event.Type != delegation.EventSessionFinished {
					continue
				}
				var ids []string
				for m, err := range r.Backward("main", 1, 4) {
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, m.ID)
				}
				if want := []string{"main.3", "main.2", "main.1"}; !reflect.DeepEqual(ids, want) {
					t.Fatalf("got %v, want %v", ids, want)
				}
			}
		})
	})

	t.Run("a missing session is not found", func(t *testing.T) {
		err := d.Read(ctx, "nope", func(db.Reader) error { return nil })
		if delegation.ErrorCode(err) != delegation.ENOTFOUND {
			t.Fatalf("err = %v", err)
		}
	})
}
