package ingest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Conventions a trace's spans may follow.
const (
	ConventionOpenInference = "openinference"
	ConventionGenAI         = "genai"
)

// MaxAttributeLen is how much of each attribute value a kept span
// (span.received) stores; longer values are cut, saying how long they were.
const MaxAttributeLen = 2048

// DecodeProto reads an OTLP ExportTraceServiceRequest in protobuf.
func DecodeProto(b []byte) (ptrace.Traces, error) {
	t, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		return t, fmt.Errorf("the body is not an OTLP ExportTraceServiceRequest in protobuf: %w", err)
	}
	return t, nil
}

// DecodeJSON reads an OTLP ExportTraceServiceRequest in its JSON encoding.
func DecodeJSON(b []byte) (ptrace.Traces, error) {
	t, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		return t, fmt.Errorf("the body is not an OTLP ExportTraceServiceRequest in JSON: %w", err)
	}
	return t, nil
}

// Span is one received span, copied out of the request that brought it.
type Span struct {
	TraceID, ID, Parent string
	Name                string
	Kind                ptrace.SpanKind
	Start, End          time.Time
	Attrs               map[string]any
	Events              []SpanEvent
	StatusError         bool
	StatusMessage       string
	Resource            *Resource
}

// SpanEvent is an event of a span.
type SpanEvent struct {
	Name  string
	At    time.Time
	Attrs map[string]any
}

// Resource is what a span's resource and instrumentation scope say of the
// program that sent it.
type Resource struct {
	Service string
	SDK     string
	Scope   string // "name version"
	// SessionName and SessionTitle are what the studio's own export says
	// of the session it came from (delegation.session.*), so an import of
	// it is named as that session was.
	SessionName, SessionTitle string
}

// Batch is the spans of one request, grouped by trace, and the spans that
// cannot be used at all (no trace or span id, no time) with why. Reasons
// also says what was changed in spans that were kept (a time clamped).
type Batch struct {
	Traces   map[string][]Span
	Order    []string // trace ids in the order they first appear
	Rejected int
	Reasons  []string
}

// maxReasons bounds the reasons a batch gives; a count says the rest.
const maxReasons = 5

func (b *Batch) reason(format string, args ...any) {
	if len(b.Reasons) < maxReasons {
		b.Reasons = append(b.Reasons, fmt.Sprintf(format, args...))
	}
}

// validTime reports whether a span's timestamp is a time: not 0 (unset)
// and within the nanoseconds since 1970 that an int64 holds (2^63 and past
// it wrap to before 1970).
func validTime(ts pcommon.Timestamp) bool { return ts > 0 && ts < 1<<63 }

// Group copies a request's spans out, by trace.
func Group(td ptrace.Traces) Batch {
	b := Batch{Traces: map[string][]Span{}}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		base := Resource{Service: str(res, "service.name"),
			SessionName: str(res, "delegation.session.name"), SessionTitle: str(res, "delegation.session.title")}
		if name := str(res, "telemetry.sdk.name"); name != "" {
			base.SDK = strings.TrimSpace(strings.Join([]string{name, str(res, "telemetry.sdk.language"), str(res, "telemetry.sdk.version")}, " "))
		}
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			ss := sss.At(j)
			r := base
			r.Scope = strings.TrimSpace(ss.Scope().Name() + " " + ss.Scope().Version())
			spans := ss.Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.TraceID().IsEmpty() || sp.SpanID().IsEmpty() {
					b.Rejected++
					b.reason("span %q has no trace id or no span id", sp.Name())
					continue
				}
				startOK, endOK := validTime(sp.StartTimestamp()), validTime(sp.EndTimestamp())
				if !startOK && !endOK {
					b.Rejected++
					b.reason("span %q (%s) has no usable time: start %d and end %d must be nanoseconds since 1970, more than 0 and less than 2^63",
						sp.Name(), sp.SpanID(), sp.StartTimestamp(), sp.EndTimestamp())
					continue
				}
				s := copySpan(sp, &r)
				switch {
				case !startOK:
					s.Start = s.End
					b.reason("span %q (%s): start time %d is not a time (0 or 2^63 and past), so it was taken as its end time", sp.Name(), sp.SpanID(), sp.StartTimestamp())
				case !endOK:
					s.End = s.Start
					b.reason("span %q (%s): end time %d is not a time (0 or 2^63 and past), so it was taken as its start time", sp.Name(), sp.SpanID(), sp.EndTimestamp())
				}
				if _, ok := b.Traces[s.TraceID]; !ok {
					b.Order = append(b.Order, s.TraceID)
				}
				b.Traces[s.TraceID] = append(b.Traces[s.TraceID], s)
			}
		}
	}
	return b
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func copySpan(sp ptrace.Span, r *Resource) Span {
	s := Span{TraceID: sp.TraceID().String(), ID: sp.SpanID().String(), Name: sp.Name(), Kind: sp.Kind(),
		Start: sp.StartTimestamp().AsTime().UTC(), End: sp.EndTimestamp().AsTime().UTC(),
		Attrs: sp.Attributes().AsRaw(), StatusError: sp.Status().Code() == ptrace.StatusCodeError,
		StatusMessage: sp.Status().Message(), Resource: r}
	if !sp.ParentSpanID().IsEmpty() {
		s.Parent = sp.ParentSpanID().String()
	}
	if s.End.Before(s.Start) {
		s.End = s.Start
	}
	evs := sp.Events()
	for i := 0; i < evs.Len(); i++ {
		e := evs.At(i)
		s.Events = append(s.Events, SpanEvent{Name: e.Name(), At: e.Timestamp().AsTime().UTC(), Attrs: e.Attributes().AsRaw()})
		if e.Name() == "exception" && s.StatusError && s.StatusMessage == "" {
			s.StatusMessage = attrString(e.Attributes().AsRaw(), "exception.message")
		}
	}
	return s
}

// class is what a span maps to.
type class int

const (
	classOther class = iota // kept as span.received
	classModel              // a model call
	classTool               // a tool call
	classAgent              // an agent's run
)

// NameOf names the session of a trace: the session's name when the
// studio's own export gives it, else its program's service.name, else
// "trace" and the start of its id.
func NameOf(spans []Span) string {
	for _, sp := range spans {
		if sp.Resource != nil && sp.Resource.SessionName != "" {
			return sp.Resource.SessionName
		}
	}
	for _, sp := range spans {
		if sp.Resource != nil && sp.Resource.Service != "" {
			return sp.Resource.Service
		}
	}
	if len(spans) == 0 {
		return "trace"
	}
	return "trace " + spans[0].TraceID[:min(8, len(spans[0].TraceID))]
}

// TitleOf is the session's title when the studio's own export gives it.
func TitleOf(spans []Span) string {
	for _, sp := range spans {
		if sp.Resource != nil && sp.Resource.SessionTitle != "" {
			return sp.Resource.SessionTitle
		}
	}
	return ""
}

// Trace assembles one trace's spans into a Session as they arrive, in any
// order: a span is mapped as soon as where it belongs is known, from its
// ancestors when they have arrived, else from its content; one that cannot
// be placed yet waits for its parent. Spans that map to nothing are kept,
// and written when the trace ends, each marked orphan if its parent never
// came.
type Trace struct {
	s       *Session
	spans   map[string]*Span
	cls     map[string]class
	waiting []*Span // calls and tools not placed yet, in arrival order
	others  []*Span // kept spans, written at the end
	root    *Span
	conv    string
	origin  *delegation.Origin
	scopes  map[string]bool
	files   map[string]string // the root's final state, when it says
	initial map[string]string // the files it began with, when the studio's own export says
	ended   bool
	lists   lists             // a linear export's message lists (linear.go)
	systems map[string]string // and its agents' system prompts
}

// NewTrace starts assembling a trace into a session (cfg.Origin is filled in
// as the spans say who sent them).
func NewTrace(cfg Config) *Trace {
	if cfg.Origin == nil {
		cfg.Origin = &delegation.Origin{Kind: delegation.OriginOTLP}
	}
	return &Trace{s: New(cfg), spans: map[string]*Span{}, cls: map[string]class{}, origin: cfg.Origin, scopes: map[string]bool{}}
}

// Session is the session the trace is assembled into.
func (t *Trace) Session() *Session { return t.s }

// Root is the trace's root span, once it has arrived.
func (t *Trace) Root() *Span { return t.root }

// Complete reports whether the root span has arrived and every span has
// been placed and has its parent: nothing is known to be missing.
func (t *Trace) Complete() bool {
	if t.root == nil || len(t.waiting) > 0 {
		return false
	}
	for _, sp := range t.spans {
		if sp.Parent != "" && t.spans[sp.Parent] == nil {
			return false
		}
	}
	return true
}

// Add takes a batch of the trace's spans. Spans seen before (same id) are
// taken once (exporters retry): it returns how many were left out so, and
// the first of them.
func (t *Trace) Add(spans []Span) (dups int, first *Span) {
	if t.ended {
		return 0, nil
	}
	batch := make([]*Span, 0, len(spans))
	for i := range spans {
		sp := spans[i]
		if _, dup := t.spans[sp.ID]; dup {
			if dups == 0 {
				first = &spans[i]
			}
			dups++
			continue
		}
		t.spans[sp.ID] = &sp
		batch = append(batch, &sp)
		t.learnOrigin(&sp)
	}
	for _, sp := range batch {
		t.cls[sp.ID] = t.classify(sp)
		if files := initialFilesOf(sp); files != nil && t.initial == nil {
			t.initial = files
			t.s.BeginWith(files)
		}
	}
	// Take them in the order things happened: a model call when it began
	// (an agent's calls follow one another, a child's start after the call
	// that delegated and before the parent's next), anything else when it
	// ended, complete (a tool's result, an agent's end).
	at := func(sp *Span) time.Time {
		if t.cls[sp.ID] == classModel {
			return sp.Start
		}
		return sp.End
	}
	sort.SliceStable(batch, func(i, j int) bool {
		if a, b := at(batch[i]), at(batch[j]); !a.Equal(b) {
			return a.Before(b)
		}
		return batch[i].Start.Before(batch[j].Start)
	})
	for _, sp := range batch {
		t.take(sp)
	}
	t.retry(false)
	return dups, first
}

func (t *Trace) learnOrigin(sp *Span) {
	o := t.origin
	if r := sp.Resource; r != nil {
		if o.Service == "" {
			o.Service = r.Service
		}
		if o.SDK == "" {
			o.SDK = r.SDK
		}
		if r.Scope != "" && !t.scopes[r.Scope] && !t.s.Started() {
			t.scopes[r.Scope] = true
			o.Instrumentation = append(o.Instrumentation, r.Scope)
		}
	}
	if o.TraceID == "" {
		o.TraceID = sp.TraceID
	}
	if o.Provider == "" && !t.s.Started() {
		o.Provider = providerOf(sp)
	}
	if t.conv == "" {
		if _, ok := sp.Attrs["gen_ai.operation.name"]; ok {
			t.conv = ConventionGenAI
		} else if _, ok := sp.Attrs["openinference.span.kind"]; ok {
			t.conv = ConventionOpenInference
		}
		o.Convention = t.conv
	}
	if t.s.cfg.Name == "" {
		t.s.cfg.Name = NameOf([]Span{*sp})
	}
}

// providerOf is whose API a span's calls spoke, as it names it: the GenAI
// convention's gen_ai.provider.name (gen_ai.system before it), else
// OpenInference's llm.provider (llm.system before it); "" when it names
// none.
func providerOf(sp *Span) string {
	for _, key := range []string{"gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"} {
		if v := attrString(sp.Attrs, key); v != "" {
			return v
		}
	}
	return ""
}

// classify says what a span maps to, by its convention's attributes: the
// GenAI operation name when it has one, else OpenInference's span kind.
func (t *Trace) classify(sp *Span) class {
	if op := attrString(sp.Attrs, "gen_ai.operation.name"); op != "" {
		switch op {
		case "chat", "text_completion", "generate_content":
			return classModel
		case "execute_tool":
			return classTool
		case "invoke_agent", "create_agent":
			return classAgent
		}
		return classOther
	}
	switch attrString(sp.Attrs, "openinference.span.kind") {
	case "LLM":
		return classModel
	case "TOOL":
		return classTool
	case "AGENT":
		return classAgent
	case "CHAIN":
		if sp.Parent == "" {
			return classAgent // the graph's run: the main agent's
		}
		if p := t.spans[sp.Parent]; p != nil && t.cls[p.ID] == classTool {
			return classAgent // a graph run under a tool: a subagent's
		}
	}
	return classOther
}

// take maps one span, or sets it aside.
func (t *Trace) take(sp *Span) {
	if sp.Parent == "" {
		t.root = sp
	}
	switch t.cls[sp.ID] {
	case classModel:
		if !t.call(sp, false) {
			t.waiting = append(t.waiting, sp)
		}
	case classTool:
		if !t.tool(sp) {
			t.waiting = append(t.waiting, sp)
		}
	default:
		if sp.Parent == "" {
			if files := finalFiles(sp); files != nil {
				t.files = files
			} else if files := filesFromEvents(t.initial, t.mainSpans(sp)...); files != nil {
				t.files = files
			}
			return
		}
		if t.s.Known(sp.ID) {
			if t.agentRun(sp) {
				t.s.AgentEnded(sp.ID, sp.StatusError, sp.StatusMessage, sp.End, exportedOf(sp))
				return
			}
			// A step inside an agent's run: its parent is the same agent's.
			t.s.Alias(sp.Parent, sp.ID)
		}
		t.others = append(t.others, sp)
	}
}

// mainSpans are the root span and the spans right under it: the main
// agent's own and its calls', where its file changes are kept.
func (t *Trace) mainSpans(root *Span) []*Span {
	out := []*Span{root}
	for _, sp := range t.spans {
		if sp.Parent == root.ID {
			out = append(out, sp)
		}
	}
	return out
}

// agentRun reports whether a span that calls were placed under is its
// agent's own run: by its kind, by its parent being a tool, or by its name
// being the agent's, as LangGraph names a subagent's run.
func (t *Trace) agentRun(sp *Span) bool {
	p := t.spans[sp.Parent]
	return t.cls[sp.ID] == classAgent || (p != nil && t.cls[p.ID] == classTool) || t.s.AgentName(sp.ID) == sp.Name
}

// retry places what waits; force places it however it can (at the end).
func (t *Trace) retry(force bool) {
	for progress := true; progress && len(t.waiting) > 0; {
		progress = false
		var still []*Span
		for _, sp := range t.waiting {
			ok := false
			if t.cls[sp.ID] == classModel {
				ok = t.call(sp, force)
			} else {
				ok = t.tool(sp)
			}
			if ok {
				progress = true
			} else {
				still = append(still, sp)
			}
		}
		t.waiting = still
	}
}

// hint finds a span's agent from its ancestors: the nearest agent span, or,
// when the chain breaks at a span not arrived yet, that span's id (every
// call of one agent run shares it). The name is the agent name the span or
// that ancestor gives.
func (t *Trace) hint(sp *Span) (Hint, bool) {
	h := Hint{Name: agentName(sp)}
	cur := sp
	for depth := 0; depth < 256; depth++ {
		if cur.Parent == "" {
			h.Key = cur.ID
			return h, true
		}
		p := t.spans[cur.Parent]
		if p == nil {
			h.Key = cur.Parent
			return h, false
		}
		// An agent's run: by its kind, by calls placed under it before, or
		// by its name being the agent's (LangGraph names a subagent's run
		// after it).
		if t.cls[p.ID] == classAgent || t.s.Known(p.ID) || (h.Name != "" && p.Name == h.Name) {
			h.Key = p.ID
			if h.Name == "" {
				h.Name = agentName(p)
			}
			return h, true
		}
		if t.cls[p.ID] == classTool && cur != sp {
			h.Key = cur.ID
			return h, true
		}
		cur = p
	}
	return h, false
}

// call maps a model span; without force it declines when neither its
// ancestors nor its content say where it belongs.
func (t *Trace) call(sp *Span, force bool) bool {
	h, whole := t.hint(sp)
	in, out := t.readCall(sp)
	if linear, ready := t.linearInput(sp, &in); linear && !ready && !force {
		return false // its inherited messages come with a call still to arrive
	}
	in.Hint = h
	if !force {
		// What nothing explains may be explained by a span still to come;
		// a guess from content alone waits for the span's ancestors.
		p := t.s.Place(in)
		if p.Unattached || (!whole && p.Weak()) {
			return false
		}
	}
	t.s.Call(in, out)
	return true
}

func (t *Trace) readCall(sp *Span) (CallInput, CallOutput) {
	var in CallInput
	var out CallOutput
	if _, ok := sp.Attrs["gen_ai.operation.name"]; ok {
		in, out = genAICall(sp)
	} else {
		in, out = openInferenceCall(sp)
	}
	// The endpoint's base URL, as the studio's own export writes it beside
	// server.address and server.port (otlp's endpointAttrs).
	in.Endpoint = attrString(sp.Attrs, "delegation.endpoint")
	return in, out
}

// tool maps a tool span onto the call it answers; false when no call of any
// agent is waiting for it yet.
func (t *Trace) tool(sp *Span) bool {
	h, _ := t.hint(sp)
	var r ToolResult
	if _, ok := sp.Attrs["gen_ai.operation.name"]; ok {
		r = genAITool(sp)
	} else {
		r = openInferenceTool(sp)
	}
	r.Hint = h
	r.Start, r.End = sp.Start, sp.End
	r.ChildKey = t.childKey(sp)
	return t.s.Tool(r)
}

// childKey is the agent span right under a tool span, if one has arrived.
func (t *Trace) childKey(tool *Span) string {
	for _, sp := range t.spans {
		if sp.Parent == tool.ID && (t.cls[sp.ID] == classAgent || t.s.Known(sp.ID)) {
			return sp.ID
		}
	}
	return ""
}

// Close ends the trace's session: what still waits is placed however it can
// (calls on an agent of their own, tools kept as spans), the kept spans are
// written, and session.finished says status. With status "" the root span
// decides: done, or failed when it ended with an error.
func (t *Trace) Close(status, reason string, at time.Time) {
	if t.ended {
		return
	}
	t.retry(true)
	t.others = append(t.others, t.waiting...) // tools no call asked for
	t.waiting = nil
	sort.SliceStable(t.others, func(i, j int) bool { return t.others[i].Start.Before(t.others[j].Start) })
	for _, sp := range t.others {
		if t.s.Known(sp.ID) && t.agentRun(sp) {
			// An agent's run, which calls placed later turned out to be under.
			t.s.AgentEnded(sp.ID, sp.StatusError, sp.StatusMessage, sp.End, exportedOf(sp))
			continue
		}
		t.s.Span(t.kept(sp))
	}
	t.others = nil
	if status == "" {
		switch {
		case t.root == nil:
			status, reason = delegation.StatusInterrupted, "the trace's root span never arrived: the program stopped before it ended"
		case t.root.StatusError:
			status, reason = delegation.StatusFailed, orDefault(t.root.StatusMessage, "the root span ended with an error")
		default:
			status = delegation.StatusDone
		}
	}
	if at.IsZero() {
		for _, sp := range t.spans {
			if sp.End.After(at) {
				at = sp.End
			}
		}
	}
	t.s.Finish(status, reason, t.files, at)
	t.ended = true
}

// Ended reports whether Close ran.
func (t *Trace) Ended() bool { return t.ended }

// kept is a span as span.received keeps it.
func (t *Trace) kept(sp *Span) delegation.SpanReceived {
	d := delegation.SpanReceived{SpanID: sp.ID, ParentSpanID: sp.Parent, Name: sp.Name,
		Kind: attrString(sp.Attrs, "openinference.span.kind"), StartedAt: sp.Start,
		DurationMS: sp.End.Sub(sp.Start).Milliseconds(), Status: "ok",
		Orphan: sp.Parent != "" && t.spans[sp.Parent] == nil}
	if d.Kind == "" {
		d.Kind = attrString(sp.Attrs, "gen_ai.operation.name")
	}
	if d.Kind == "" {
		d.Kind = strings.ToUpper(strings.TrimPrefix(sp.Kind.String(), "Span"))
	}
	if sp.StatusError {
		d.Status, d.Error = "error", sp.StatusMessage
	}
	if len(sp.Attrs) > 0 {
		d.Attributes = map[string]string{}
		for k, v := range sp.Attrs {
			s := attrText(v)
			if len(s) > MaxAttributeLen {
				cut := MaxAttributeLen
				for cut > 0 && s[cut]&0xC0 == 0x80 {
					cut--
				}
				s = s[:cut] + fmt.Sprintf("… (%d bytes in all)", len(s))
			}
			d.Attributes[k] = s
		}
	}
	return d
}

// ErrEnded is returned for spans of a trace whose session has ended.
var ErrEnded = errors.New("the trace's session has ended")
