package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// TestRunOutputAsBefore runs the example and lessons once each and prints
// them both ways from the same log: --json as it was (the whole trace built,
// then json-indented in memory) against the streamed trace of the events
// folded as they came, and the tree as it was (the trace's log folded back
// through its JSON, view.FromTrace) against the tree of the fold made while
// the session ran. Each pair must be byte for byte the same.
func TestRunOutputAsBefore(t *testing.T) {
	ex, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]byte{"example": ex}
	for _, name := range []string{"one-delegation", "files-and-todos", "order-number"} {
		if docs[name], err = lessonScenario(name); err != nil {
			t.Fatal(err)
		}
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			events, viaJSON, tree := runBothWays(t, doc)
			before, err := trace.Build(trace.Meta{ID: "s1", Title: "t", Scenario: doc}, events)
			if err != nil {
				t.Fatal(err)
			}
			var old, streamed, oldTree, newTree bytes.Buffer
			encodeWhole(t, &old, before)
			if code := writeTrace(&streamed, os.Stderr, trace.SourceOf(viaJSON.b.Trace())); code != exitOK {
				t.Fatalf("writeTrace: %d", code)
			}
			if !bytes.Equal(old.Bytes(), streamed.Bytes()) {
				t.Errorf("--json differs from before: %d bytes, before %d\n%s", streamed.Len(), old.Len(), firstDiff(old.Bytes(), streamed.Bytes()))
			}
			printTree(&oldTree, before)
			printState(&newTree, tree.b.Trace(), tree.st)
			if oldTree.String() != newTree.String() {
				t.Errorf("the tree differs from before:\nbefore:\n%s\nnow:\n%s", oldTree.String(), newTree.String())
			}
			if len(events) == 0 || oldTree.Len() < 100 {
				t.Fatalf("nothing compared: %d events, tree %q", len(events), oldTree.String())
			}
		})
	}
}

// runBothWays runs a scenario once, keeping its log's events and folding
// each, as cmdRun does, for --json and for the tree.
func runBothWays(t testing.TB, doc []byte) ([]delegation.Event, *runOutput, *runOutput) {
	t.Helper()
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	var asJSON, tree runOutput
	meta := trace.Meta{ID: "s1", Title: "t", Scenario: doc}
	asJSON.start(meta, false)
	tree.start(meta, true)
	sink := delegation.SinkFunc(func(e delegation.Event) {
		if e.Seq > 0 {
			events = append(events, e)
		}
		asJSON.add(e)
		tree.add(e)
	})
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "s1", Sink: sink}); err != nil {
		t.Fatal(err)
	}
	if asJSON.err != nil || tree.err != nil {
		t.Fatal(asJSON.err, tree.err)
	}
	return events, &asJSON, &tree
}

// encodeWhole is how run --json wrote the trace before it streamed.
func encodeWhole(t *testing.T, w *bytes.Buffer, tr *trace.Trace) {
	t.Helper()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(tr); err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(i-200, 0)
	return "before: " + string(a[lo:min(i+200, len(a))]) + "\nnow:    " + string(b[lo:min(i+200, len(b))])
}
