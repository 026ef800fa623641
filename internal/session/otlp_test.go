package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// TestOTLPExportImportsBack: every built-in lesson's session, exported as
// OTLP (JSON and protobuf) and imported back, is the same session agent by
// agent and call by call: its name and title, agents, calls and their
// tokens, files, receipts and the notes the page shows.
func TestOTLPExportImportsBack(t *testing.T) {
	for _, l := range lessons.All() {
		for _, v := range l.Variants {
			if v.OTLP != nil {
				continue // a received trace: an import already (TestReExportKeepsProducer)
			}
			t.Run(l.Name+"--"+v.Name, func(t *testing.T) {
				t.Parallel()
				orig, err := v.Run(context.Background())
				if orig == nil {
					t.Fatal(err)
				}
				orig.Session.Name = l.Name // as a stored session of the lesson is named
				src := trace.SourceOf(orig)
				var js, pb strings.Builder
				if _, err := otlp.WriteJSON(&js, src, otlp.Options{}); err != nil {
					t.Fatal(err)
				}
				if _, err := otlp.WriteProto(&pb, src, otlp.Options{}); err != nil {
					t.Fatal(err)
				}
				for format, doc := range map[string]string{session.FormatOTLPJSON: js.String(), session.FormatOTLPProto: pb.String()} {
					if got := session.DetectFormat([]byte(doc)); got != format {
						t.Fatalf("an export in %s is detected as %s", format, got)
					}
					back, err := session.OTLPTraces([]byte(doc), format)
					if err != nil {
						t.Fatalf("%s: %v", format, err)
					}
					if len(back) != 1 {
						t.Fatalf("%s: %d sessions came back", format, len(back))
					}
					compareSessions(t, format, orig, back[0])
				}
			})
		}
	}
}

func compareSessions(t *testing.T, format string, orig, back *trace.Trace) {
	t.Helper()
	if orig.Session.Name != back.Session.Name || orig.Session.Title != back.Session.Title {
		t.Errorf("%s: session %q (%q) came back as %q (%q)", format, orig.Session.Name, orig.Session.Title, back.Session.Name, back.Session.Title)
	}
	if o, b := initialFiles(t, orig), initialFiles(t, back); !reflect.DeepEqual(o, b) {
		t.Errorf("%s: the session began with files %v, came back with %v", format, o, b)
	}
	if len(orig.Agents) != len(back.Agents) {
		t.Fatalf("%s: %d agents came back as %d", format, len(orig.Agents), len(back.Agents))
	}
	// Agent by agent, by id: parallel children start in the order of their
	// task calls in the engine, of their first model call in an import, so
	// the lists may differ in order only.
	backAgents := map[string]string{}
	for _, a := range back.Agents {
		backAgents[a.ID] = asJSON(a)
	}
	for _, a := range orig.Agents {
		if o, b := asJSON(a), backAgents[a.ID]; o != b {
			t.Errorf("%s: agent %s:\n  ran  %s\n  back %s", format, a.ID, o, b)
		}
	}
	if len(orig.ModelCalls) != len(back.ModelCalls) {
		t.Fatalf("%s: %d model calls came back as %d", format, len(orig.ModelCalls), len(back.ModelCalls))
	}
	total := func(tr *trace.Trace) (n int) {
		for _, c := range tr.ModelCalls {
			n += c.InputTokens
		}
		return n
	}
	if total(orig) != total(back) {
		t.Errorf("%s: input tokens: %d came back as %d", format, total(orig), total(back))
	}
	backCalls := map[string]trace.ModelCall{}
	for _, c := range back.ModelCalls {
		backCalls[c.ID] = c
	}
	for _, o := range orig.ModelCalls {
		b, ok := backCalls[o.ID]
		if !ok {
			t.Errorf("%s: call %s did not come back", format, o.ID)
			continue
		}
		// Times are the spans' (nanoseconds, in milliseconds again).
		o.StartedAt, o.DurationMS = b.StartedAt, b.DurationMS
		if os, bs := asJSON(o), asJSON(b); os != bs {
			t.Errorf("%s: call %s:\n  ran  %s\n  back %s", format, o.ID, os, bs)
		}
	}
	if !reflect.DeepEqual(orig.Files, back.Files) {
		t.Errorf("%s: files %v came back as %v", format, orig.Files, back.Files)
	}
	if o, b := receipts(orig), receipts(back); o != b {
		t.Errorf("%s: receipts:\n  ran  %s\n  back %s", format, o, b)
	}
	if o, b := notes(t, orig), notes(t, back); o != b {
		t.Errorf("%s: notes:\n  ran  %s\n  back %s", format, o, b)
	}
}

// initialFiles are the files session.started says the session began with.
func initialFiles(t *testing.T, tr *trace.Trace) map[string]string {
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
