// Package otlp exports a stored session as OpenTelemetry spans: written to a
// file as OTLP/JSON or OTLP protobuf, or pushed to a collector over
// OTLP/HTTP.
//
// Spans follow the OpenTelemetry GenAI semantic conventions (invoke_agent,
// chat, execute_tool, gen_ai.* attributes); OpenInference's attributes
// (openinference.span.kind, llm.*, input.value…), which Arize Phoenix reads,
// are added when asked. What neither covers, the delegation itself, is in the
// delegation.* namespace.
//
// The shape: one trace per session. Each agent is an invoke_agent span; the
// main agent's is the root, and a child's hangs under the execute_tool span
// of the task call that started it. An agent's model calls (chat) and tool
// calls (execute_tool) are the children of its span. Events of the log that
// are not spans are span events: delegation.refused and summarization of
// their agent's span, files.changed of the span whose work changed the files
// (the tool call, the task call whose child's changes came back, the
// summary call that wrote the history down).
//
// The export is linear in the session's size. A chat span's
// gen_ai.input.messages holds only the messages its agent's list gained
// since that agent's previous call (delegation.inputs = "new"), and
// delegation.context_ranges names everything the call received, as the
// trace's ranges do; so each message's content is written once as an input.
// Whole inputs are written only when asked (InputsFull), each bounded by a
// byte cap that the span says it applied.
//
// The spans are made by folding the session's log, one event at a time, and
// each span is written as soon as it is complete, so an export streams from
// the store's cursors in the memory of the spans still open. A running
// session's export holds only its finished spans; ids are derived from the
// session id and the log, so the same log always gives the same bytes, and a
// span finished by seq N is never sent again by an export After N.
package otlp

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// ServiceName is the resource's service.name and the instrumentation
// scope's name; ScopeVersion is the scope's version.
const (
	ServiceName  = "delegation-studio"
	ScopeVersion = "1"
)

// Source is a stored session as the export reads it: its head, its log with
// what each event introduced, and its message lists (for whole inputs).
// db.Reader and trace.SourceOf are Sources.
type Source interface {
	Head() trace.Head
	Log() iter.Seq2[trace.Step, error]
	Backward(agentID string, from, to int) iter.Seq2[trace.Message, error]
}

// Inputs says what a chat span's gen_ai.input.messages holds.
type Inputs string

const (
	// InputsNew: the messages the agent's list gained since its previous
	// call; the rest of the call's input is named by its ranges.
	InputsNew Inputs = "new"
	// InputsFull: everything the call received, newest kept first within
	// the byte cap.
	InputsFull Inputs = "full"
)

// DefaultInputCap bounds a chat span's whole input, in bytes of
// gen_ai.input.messages, when Options.InputCap is 0.
const DefaultInputCap = 64 << 10

// Options say what an export holds.
type Options struct {
	// Inputs is InputsNew (the default when empty) or InputsFull.
	Inputs Inputs
	// InputCap bounds each whole input, in bytes (0: DefaultInputCap). The
	// oldest messages are left out first, and the span says it cut.
	InputCap int
	// OpenInference adds OpenInference's attributes beside the GenAI ones,
	// for Arize Phoenix.
	OpenInference bool
	// After leaves out the spans already complete at this seq of the log:
	// those an earlier export, up to that seq, has sent.
	After int64
}

func (o Options) inputCap() int {
	if o.InputCap > 0 {
		return o.InputCap
	}
	return DefaultInputCap
}

// ParseInputs reads the inputs option: "new" (or empty) or "full".
func ParseInputs(s string) (Inputs, error) {
	switch Inputs(strings.TrimSpace(s)) {
	case "", InputsNew:
		return InputsNew, nil
	case InputsFull:
		return InputsFull, nil
	}
	return "", fmt.Errorf("inputs %q: use new (the messages each call added; the default) or full (each call's whole input, capped)", s)
}

// ParseConventions reads a comma-separated list of conventions, genai and
// openinference, and reports whether OpenInference's attributes are asked
// for. The GenAI conventions are always followed: the spans are theirs.
func ParseConventions(s string) (openInference bool, err error) {
	for _, c := range strings.Split(s, ",") {
		switch strings.ToLower(strings.TrimSpace(c)) {
		case "", "genai":
		case "openinference":
			openInference = true
		default:
			return false, fmt.Errorf("conventions %q: unknown %q; use genai, or genai,openinference (for Arize Phoenix)", s, strings.TrimSpace(c))
		}
	}
	return openInference, nil
}

// Summary says what an export held.
type Summary struct {
	// Spans is how many spans were written.
	Spans int
	// Sent is how many complete spans were left out because Options.After
	// said an earlier export had sent them.
	Sent int
	// Open is how many spans were left out because they have not finished:
	// a running session's.
	Open int
	// LastSeq is the last seq of the log read: an export After it holds
	// what was not complete yet.
	LastSeq int64
	// Through is the seq through which every complete span was written:
	// LastSeq when the export succeeded; for a push that failed part-way,
	// where the requests that went through end. An export After it sends
	// the rest, and nothing twice.
	Through int64
	// Running reports that the session was still running.
	Running bool
}

// producer is the resource and instrumentation scope every span of a
// session shares: the studio's for the sessions it ran; for a received or
// recorded session, the program that sent it (its service.name, its first
// instrumentation scope), with the studio named beside them as the
// exporter (delegation.exporter.*), so a back end shows who made the spans.
type producer struct {
	res   *resourcepb.Resource
	scope *commonpb.InstrumentationScope
}

func producerOf(h trace.Head) producer {
	service := ServiceName
	sc := &commonpb.InstrumentationScope{Name: ServiceName, Version: ScopeVersion}
	if o := h.Session.Origin; o != nil && o.OriginKind() != delegation.OriginEngine {
		if o.Service != "" {
			service = o.Service
		}
		if len(o.Instrumentation) > 0 {
			name, version := o.Instrumentation[0], ""
			if i := strings.LastIndexByte(name, ' '); i > 0 {
				name, version = name[:i], name[i+1:]
			}
			sc = &commonpb.InstrumentationScope{Name: name, Version: version}
		}
	}
	attrs := []*commonpb.KeyValue{
		str("service.name", service),
		str("session.id", h.Session.ID),
		str("delegation.exporter.name", ServiceName),
		str("delegation.exporter.version", ScopeVersion),
	}
	// The session's name and title, so that an import of the export is
	// named as the session was.
	if h.Session.Name != "" {
		attrs = append(attrs, str("delegation.session.name", h.Session.Name))
	}
	if h.Session.Title != "" {
		attrs = append(attrs, str("delegation.session.title", h.Session.Title))
	}
	return producer{res: &resourcepb.Resource{Attributes: attrs}, scope: sc}
}

var errNoSource = errors.New("otlp: no session to export")

// jsonText encodes our own plain values as the JSON text of an attribute,
// without HTML escaping, so message text stays readable.
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null" // only our own plain values are encoded here
	}
	return strings.TrimSuffix(b.String(), "\n")
}
