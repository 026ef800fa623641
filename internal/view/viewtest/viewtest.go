// Package viewtest compares two sessions as a reader of their pages would:
// for the tests of a round trip (an export imported back) on any path.
package viewtest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// SameSession fails t where back, a session that went out and came back
// (label says how), differs from orig: its name and title, the files it
// began with, its agents and model calls (by id: an import may list
// parallel children in another order; times as the spans rounded them),
// its input tokens, files, receipts and the notes its page shows.
func SameSession(t testing.TB, label string, orig, back *trace.Trace) {
	t.Helper()
	if orig.Session.Name != back.Session.Name || orig.Session.Title != back.Session.Title {
		t.Errorf("%s: session %q (%q) came back as %q (%q)", label, orig.Session.Name, orig.Session.Title, back.Session.Name, back.Session.Title)
	}
	if o, b := initialFiles(t, orig), initialFiles(t, back); !reflect.DeepEqual(o, b) {
		t.Errorf("%s: the session began with files %v, came back with %v", label, o, b)
	}
	if len(orig.Agents) != len(back.Agents) {
		t.Fatalf("%s: %d agents came back as %d", label, len(orig.Agents), len(back.Agents))
	}
	backAgents := map[string]string{}
	for _, a := range back.Agents {
		backAgents[a.ID] = asJSON(a)
	}
	for _, a := range orig.Agents {
		if o, b := asJSON(a), backAgents[a.ID]; o != b {
			t.Errorf("%s: agent %s:\n  ran  %s\n  back %s", label, a.ID, o, b)
		}
	}
	if len(orig.ModelCalls) != len(back.ModelCalls) {
		t.Fatalf("%s: %d model calls came back as %d", label, len(orig.ModelCalls), len(back.ModelCalls))
	}
	if o, b := inputTokens(orig), inputTokens(back); o != b {
		t.Errorf("%s: input tokens: %d came back as %d", label, o, b)
	}
	backCalls := map[string]trace.ModelCall{}
	for _, c := range back.ModelCalls {
		backCalls[c.ID] = c
	}
	for _, o := range orig.ModelCalls {
		b, ok := backCalls[o.ID]
		if !ok {
			t.Errorf("%s: call %s did not come back", label, o.ID)
			continue
		}
		// Times are the spans' (nanoseconds, in milliseconds again).
		o.StartedAt, o.DurationMS = b.StartedAt, b.DurationMS
		if os, bs := asJSON(o), asJSON(b); os != bs {
			t.Errorf("%s: call %s:\n  ran  %s\n  back %s", label, o.ID, os, bs)
		}
	}
	if !reflect.DeepEqual(orig.Files, back.Files) {
		t.Errorf("%s: files %v came back as %v", label, orig.Files, back.Files)
	}
	if o, b := receipts(orig), receipts(back); o != b {
		t.Errorf("%s: receipts:\n  ran  %s\n  back %s", label, o, b)
	}
	if o, b := notes(t, orig), notes(t, back); o != b {
		t.Errorf("%s: notes:\n  ran  %s\n  back %s", label, o, b)
	}
}

func inputTokens(tr *trace.Trace) (n int) {
	for _, c := range tr.ModelCalls {
		n += c.InputTokens
	}
	return n
}

// initialFiles are the files session.started says the session began with.
func initialFiles(t testing.TB, tr *trace.Trace) map[string]string {
	t.Helper()
	for _, e := range tr.Events {
		if e.Type == "session.started" {
			var d struct {
				Files map[string]string `json:"files"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			return d.Files
		}
	}
	t.Fatal("no session.started")
	return nil
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// receipts are what each agent returned and what each delegation brought
// back, in the log's order.
func receipts(tr *trace.Trace) string {
	var out []string
	for _, e := range tr.Events {
		switch e.Type {
		case "agent.finished", "delegation.finished":
			out = append(out, fmt.Sprintf("%s %s %s", e.Type, e.AgentID, e.Data))
		}
	}
	return strings.Join(out, "\n")
}

// notes are the notes the session's page shows.
func notes(t testing.TB, tr *trace.Trace) string {
	t.Helper()
	st, err := view.FromTrace(tr, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range st.Notes {
		out = append(out, n.Kind+" "+n.AgentID+": "+n.Text)
	}
	return strings.Join(out, "\n")
}
