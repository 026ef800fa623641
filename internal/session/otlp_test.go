package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/lessons"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view/viewtest"
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
					viewtest.SameSession(t, format, orig, back[0])
				}
			})
		}
	}
}
