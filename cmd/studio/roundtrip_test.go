package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// TestOTLPRoundTrip exports lessons' sessions as OTLP/JSON, imports them
// back, and compares the two sessions agent by agent and call by call: the
// same name, agents, calls and their tokens, files, receipts and notes.
func TestOTLPRoundTrip(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "s.db")
	for _, lesson := range []string{"one-delegation", "files-and-todos", "order-number"} {
		t.Run(lesson, func(t *testing.T) {
			if code, _, errOut := studio(t, "run", "lesson:"+lesson, "--db", dbPath); code != exitOK {
				t.Fatalf("run: %d %s", code, errOut)
			}
			_, list, _ := studio(t, "sessions", "--db", dbPath)
			var id string
			for _, line := range strings.Split(list, "\n") {
				if f := strings.Fields(line); len(f) > 2 && f[2] == lesson {
					id = f[0]
				}
			}
			code, doc, errOut := studio(t, "export", id, "--format", "otlp", "--db", dbPath)
			if code != exitOK {
				t.Fatalf("export: %d %s", code, errOut)
			}
			code, out, errOut := studio(t, "import", writeFile(t, doc), "--db", dbPath)
			if code != exitOK {
				t.Fatalf("import: %d %s", code, errOut)
			}
			orig, back := storedTrace(t, dbPath, id), storedTrace(t, dbPath, strings.TrimSpace(out))
			compareSessions(t, orig, back)
		})
	}
}

func storedTrace(t *testing.T, dbPath, id string) *trace.Trace {
	t.Helper()
	code, out, errOut := studio(t, "export", id, "--db", dbPath)
	if code != exitOK {
		t.Fatalf("export %s: %d %s", id, code, errOut)
	}
	tr, _, err := trace.Parse([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func compareSessions(t *testing.T, orig, back *trace.Trace) {
	t.Helper()
	if orig.Session.Name != back.Session.Name || orig.Session.Title != back.Session.Title {
		t.Errorf("session %q (%q) came back as %q (%q)", orig.Session.Name, orig.Session.Title, back.Session.Name, back.Session.Title)
	}
	if len(orig.Agents) != len(back.Agents) {
		t.Fatalf("%d agents came back as %d", len(orig.Agents), len(back.Agents))
	}
	// Agent by agent, by id: parallel children start in the order of
	// their task calls in the engine, of their first model call in an
	// import, so the lists may differ in order only.
	backAgents := map[string]string{}
	for _, a := range back.Agents {
		backAgents[a.ID] = asJSON(a)
	}
	for _, a := range orig.Agents {
		if o, b := asJSON(a), backAgents[a.ID]; o != b {
			t.Errorf("agent %s:\n  ran  %s\n  back %s", a.ID, o, b)
		}
	}
	if len(orig.ModelCalls) != len(back.ModelCalls) {
		t.Fatalf("%d model calls came back as %d", len(orig.ModelCalls), len(back.ModelCalls))
	}
	total := func(tr *trace.Trace) (n int) {
		for _, c := range tr.ModelCalls {
			n += c.InputTokens
		}
		return n
	}
	if total(orig) != total(back) {
		t.Errorf("input tokens: %d came back as %d", total(orig), total(back))
	}
	backCalls := map[string]trace.ModelCall{}
	for _, c := range back.ModelCalls {
		backCalls[c.ID] = c
	}
	for _, o := range orig.ModelCalls {
		b := backCalls[o.ID]
		// Times are the spans' (nanoseconds, rounded to milliseconds
		// again); the rest must be the same.
		o.StartedAt = b.StartedAt
		o.DurationMS = b.DurationMS
		if os, bs := asJSON(o), asJSON(b); os != bs {
			t.Errorf("call %s:\n  ran  %s\n  back %s", o.ID, os, bs)
		}
	}
	if !reflect.DeepEqual(orig.Files, back.Files) {
		t.Errorf("files %v came back as %v", orig.Files, back.Files)
	}
	if o, b := receipts(orig), receipts(back); o != b {
		t.Errorf("receipts:\n  ran  %s\n  back %s", o, b)
	}
	if o, b := notes(t, orig), notes(t, back); o != b {
		t.Errorf("notes:\n  ran  %s\n  back %s", o, b)
	}
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

func notes(t *testing.T, tr *trace.Trace) string {
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
