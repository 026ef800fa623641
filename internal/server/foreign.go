package server

import (
	"bytes"
	"encoding/json"

	"github.com/delegationstudio/studio/internal/session"
)

// Kinds of document a form can be given (documentKind).
const (
	docScenario  = "scenario"
	docTrace     = session.FormatTrace
	docOTLPJSON  = session.FormatOTLPJSON
	docOTLPProto = session.FormatOTLPProto
	docJSON      = "json" // JSON of no kind the studio reads
	docText      = "text" // not JSON
)

// documentKind says what a pasted or uploaded document is, so that a form
// given the wrong kind (an OTLP file where a scenario goes, a scenario
// where a trace goes) can say so in one sentence instead of listing its
// schema errors.
func documentKind(raw []byte) string {
	if isProtobuf(raw) {
		return docOTLPProto
	}
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return ""
	}
	if b[0] != '{' {
		if json.Valid(b) {
			return docJSON
		}
		return docText
	}
	var probe struct {
		Format        string          `json:"format"`
		ResourceSpans json.RawMessage `json:"resourceSpans"`
		Prompt        *string         `json:"prompt"`
		Script        json.RawMessage `json:"script"`
		Subagents     json.RawMessage `json:"subagents"`
		Agent         json.RawMessage `json:"agent"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return docText // broken JSON: its own errors say where
	}
	switch {
	case probe.Format == "delegation-studio.trace":
		return docTrace
	case probe.Format == "" && probe.ResourceSpans != nil:
		return docOTLPJSON
	case probe.Format == "" && (probe.Prompt != nil || probe.Script != nil || probe.Subagents != nil || probe.Agent != nil):
		return docScenario
	}
	return docJSON
}

// isProtobuf reports whether b starts as an OTLP ExportTraceServiceRequest
// does in protobuf: field 1 (resource_spans), length-delimited (0x0a, a
// line feed to a text reader), and holds bytes no text has.
func isProtobuf(b []byte) bool {
	if len(b) < 2 || b[0] != 0x0a {
		return false
	}
	for _, c := range b[1:min(len(b), 64)] {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
			return true
		}
	}
	return false
}
