package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/pricing"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/internal/trace"
)

// Formats ImportFile recognizes.
const (
	FormatTrace     = "trace"      // the studio's trace (formats.md §2)
	FormatOTLPJSON  = "otlp-json"  // an OTLP ExportTraceServiceRequest in JSON
	FormatOTLPProto = "otlp-proto" // the same in protobuf
)

// DetectFormat says what a file to import holds: the studio's trace, OTLP
// JSON (a document with resourceSpans), or else OTLP protobuf.
func DetectFormat(raw []byte) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || b[0] != '{' {
		return FormatOTLPProto
	}
	var probe struct {
		Format        string          `json:"format"`
		ResourceSpans json.RawMessage `json:"resourceSpans"`
	}
	if json.Unmarshal(b, &probe) == nil && probe.Format == "" && probe.ResourceSpans != nil {
		return FormatOTLPJSON
	}
	return FormatTrace
}

// ImportFile stores what a file holds as new sessions and returns their ids:
// a trace is one session (Import); an OTLP file is one session per trace
// in it, mapped as the receiver maps spans (docs/ingest.md). Each session is
// checked whole and written in one transaction.
func (r *Runner) ImportFile(ctx context.Context, raw []byte) ([]string, error) {
	format := DetectFormat(raw)
	if format == FormatTrace {
		id, err := r.Import(ctx, raw)
		if err != nil {
			return nil, err
		}
		return []string{id}, nil
	}
	traces, err := OTLPTraces(raw, format)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range traces {
		doc, err := json.Marshal(t)
		if err != nil {
			return ids, err
		}
		id, err := r.Import(ctx, doc)
		if err != nil {
			return ids, fmt.Errorf("trace %s: %w", t.Session.Origin.TraceID, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// OTLPTraces maps an OTLP file (format FormatOTLPJSON or FormatOTLPProto)
// into the studio's traces, one per OTLP trace, in the order they appear.
func OTLPTraces(raw []byte, format string) ([]*trace.Trace, error) {
	decode := ingest.DecodeProto
	if format == FormatOTLPJSON {
		decode = ingest.DecodeJSON
	}
	td, err := decode(raw)
	if err != nil {
		return nil, delegation.Errorf(delegation.EINVALID, "%v", err)
	}
	batch := ingest.Group(td)
	if len(batch.Order) == 0 {
		msg := "the OTLP file holds no span"
		if batch.Rejected > 0 {
			msg += " with a trace and a span id"
		}
		return nil, delegation.Errorf(delegation.EINVALID, "%s", msg)
	}
	counter, err := tokens.Get(tokens.Default)
	if err != nil {
		return nil, err
	}
	var out []*trace.Trace
	for _, traceID := range batch.Order {
		id := NewID()
		var mu sync.Mutex
		var events []delegation.Event
		sink := delegation.SinkFunc(func(ev delegation.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		})
		spans := batch.Traces[traceID]
		tr := ingest.NewTrace(ingest.Config{SessionID: id, Name: ingest.NameOf(spans), Tokenizer: tokens.Default,
			Counter: counter, Sink: sink, Prices: pricing.Lookup})
		tr.Add(spans)
		tr.Close("", "", time.Time{})
		t, err := trace.Build(trace.Meta{ID: id, Title: ingest.TitleOf(spans), Scenario: json.RawMessage("{}")}, events)
		if err != nil {
			return nil, fmt.Errorf("trace %s: %w", traceID, err)
		}
		out = append(out, t)
	}
	return out, nil
}
