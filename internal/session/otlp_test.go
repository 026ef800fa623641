package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view/viewtest"
)

// TestOTLPExportImportsBack: every built-in lesson's session, and a session
// of an OpenAI-compatible endpoint that says what it answered (each
// completion's id, model, finish_reason), exported as OTLP (JSON and
// protobuf) and imported back, is the same session agent by agent and call
// by call: its name and title, agents, calls and their tokens and what the
// endpoint said of them, each agent's endpoint (its whole base URL), files,
// receipts and the notes the page shows.
func TestOTLPExportImportsBack(t *testing.T) {
	type run struct {
		name, sessionName string
		variant           lessons.Variant
	}
	var runs []run
	for _, l := range lessons.All() {
		for _, v := range l.Variants {
			if v.Recorded != nil {
				continue // a recording: an import already (TestReExportKeepsProducer)
			}
			// Named as a stored session of the lesson is.
			runs = append(runs, run{l.Name + "--" + v.Name, l.Name, v})
		}
	}
	ep := openaitest.NewServer(t, func(req openaitest.Request) openaitest.Reply {
		r := openaitest.ThinkerAndRambler(req)
		r.ID, r.Model = "chatcmpl-"+strings.Fields(req.Last().Content + " x")[0], "gpt-x-2026"
		return r
	})
	runs = append(runs, run{"endpoint", "thinking", lessons.Variant{Name: "endpoint",
		Scenario: []byte(openaitest.ThinkerAndRamblerScenario(ep.URL + "/v1"))}})
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			orig, err := r.variant.Run(context.Background())
			if orig == nil {
				t.Fatal(err)
			}
			orig.Session.Name = r.sessionName
			if r.variant.Name == "endpoint" {
				if c := orig.ModelCalls[0].Response; c == nil || *c != (delegation.ResponseMeta{ID: "chatcmpl-Ask", Model: "gpt-x-2026", FinishReason: "tool_calls"}) {
					t.Fatalf("the endpoint's first answer was recorded as %+v", c)
				}
			}
			exportsImportBack(t, orig)
		})
	}
}

// exportsImportBack exports a session as OTLP, JSON and protobuf, and checks
// each imports back as the same session.
func exportsImportBack(t *testing.T, orig *trace.Trace) {
	t.Helper()
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
		viewtest.SameSession(t, format, orig, back[0])
	}
}
