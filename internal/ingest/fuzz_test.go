package ingest_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/trace"
)

type tdT = ptrace.Traces

var decodeProto, decodeJSON = ingest.DecodeProto, ingest.DecodeJSON

// FuzzReceive: whatever a request holds, decoding it either fails with a
// reason or gives spans whose sessions are valid traces: no panic, nothing
// half-built.
func FuzzReceive(f *testing.F) {
	for _, p := range []string{"testdata/deepagents.otlp.pb", "testdata/deepagents.otlp.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/3])
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01","spanId":"02","name":"x"}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, decode := range []func([]byte) (tdT, error){decodeProto, decodeJSON} {
			td, err := decode(body)
			if err != nil {
				continue
			}
			b := ingest.Group(td)
			for _, id := range b.Order {
				sink := &collect{}
				tr := ingest.NewTrace(ingest.Config{SessionID: "s", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
				tr.Add(b.Traces[id])
				tr.Close("", "", time.Time{})
				built, err := trace.Build(trace.Meta{ID: "s"}, sink.events)
				if err != nil {
					t.Fatalf("the log does not build: %v", err)
				}
				raw, _ := json.Marshal(built)
				if _, _, err := trace.Parse(raw); err != nil {
					t.Fatalf("not a valid trace: %v", err)
				}
			}
		}
	})
}
