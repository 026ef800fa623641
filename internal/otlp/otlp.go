// Package otlp writes a session's trace as an OTLP JSON document (the
// ExportTraceServiceRequest of OpenTelemetry's protocol, in its JSON
// encoding), for tracing tools.
//
// Spans follow the OpenTelemetry GenAI semantic conventions (invoke_agent,
// chat, execute_tool, gen_ai.* attributes), with OpenInference attributes
// beside them (openinference.span.kind, llm.*, input.value…) so that Arize
// Phoenix renders the session. What neither covers, the delegation itself,
// is in the delegation.* namespace.
//
// The shape: one trace per session. Each agent is an invoke_agent span; the
// main agent's is the root, and a child's hangs under the execute_tool span
// of the task call that started it. An agent's model calls (chat) and tool
// calls (execute_tool) are the children of its span. Events of the log that
// are not spans (delegation.refused, summarization, files.changed) are span
// events of their agent's span.
//
// The output is a function of the trace alone: ids are derived from the
// session id, and the same trace gives the same bytes.
package otlp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// ServiceName is the resource's service.name and the instrumentation
// scope's name; ScopeVersion is the scope's version.
const (
	ServiceName  = "delegation-studio"
	ScopeVersion = "1"
)

// Span kinds of OTLP's enum.
const (
	kindInternal = 1
	kindClient   = 3
)

// Status codes of OTLP's enum.
const (
	statusOK    = 1
	statusError = 2
)

// Export turns a session's trace into an OTLP JSON document
// (ExportTraceServiceRequest: {"resourceSpans":[…]}) following the
// OpenTelemetry GenAI semantic conventions, with OpenInference attributes
// beside them so Arize Phoenix renders it. The same trace always gives the
// same bytes.
func Export(t *trace.Trace) ([]byte, error) {
	if t == nil {
		return nil, errors.New("otlp: no trace to export")
	}
	x := newExporter(t)
	if err := x.index(); err != nil {
		return nil, err
	}
	spans := x.spans()
	doc := document{ResourceSpans: []resourceSpans{{
		Resource: resource{Attributes: []keyValue{
			str("service.name", ServiceName),
			str("session.id", t.Session.ID),
		}},
		ScopeSpans: []scopeSpans{{
			Scope: scope{Name: ServiceName, Version: ScopeVersion},
			Spans: spans,
		}},
	}}}
	return encode(doc)
}

// The OTLP JSON shape (opentelemetry-proto, JSON encoding: lowerCamelCase
// keys, 64-bit integers as decimal strings, ids as lowercase hex).

type document struct {
	ResourceSpans []resourceSpans `json:"resourceSpans"`
}

type resourceSpans struct {
	Resource   resource     `json:"resource"`
	ScopeSpans []scopeSpans `json:"scopeSpans"`
}

type resource struct {
	Attributes []keyValue `json:"attributes"`
}

type scopeSpans struct {
	Scope scope  `json:"scope"`
	Spans []span `json:"spans"`
}

type scope struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type span struct {
	TraceID           string      `json:"traceId"`
	SpanID            string      `json:"spanId"`
	ParentSpanID      string      `json:"parentSpanId,omitempty"`
	Name              string      `json:"name"`
	Kind              int         `json:"kind"`
	StartTimeUnixNano string      `json:"startTimeUnixNano"`
	EndTimeUnixNano   string      `json:"endTimeUnixNano"`
	Attributes        []keyValue  `json:"attributes"`
	Events            []spanEvent `json:"events,omitempty"`
	Status            *status     `json:"status,omitempty"`
}

type spanEvent struct {
	TimeUnixNano string     `json:"timeUnixNano"`
	Name         string     `json:"name"`
	Attributes   []keyValue `json:"attributes"`
}

type status struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

type anyValue struct {
	StringValue *string     `json:"stringValue,omitempty"`
	BoolValue   *bool       `json:"boolValue,omitempty"`
	IntValue    *string     `json:"intValue,omitempty"`
	DoubleValue *float64    `json:"doubleValue,omitempty"`
	ArrayValue  *arrayValue `json:"arrayValue,omitempty"`
}

type arrayValue struct {
	Values []anyValue `json:"values"`
}

func str(k, v string) keyValue { return keyValue{Key: k, Value: anyValue{StringValue: &v}} }

func integer(k string, v int64) keyValue {
	s := strconv.FormatInt(v, 10)
	return keyValue{Key: k, Value: anyValue{IntValue: &s}}
}

func boolean(k string, v bool) keyValue { return keyValue{Key: k, Value: anyValue{BoolValue: &v}} }

func double(k string, v float64) keyValue { return keyValue{Key: k, Value: anyValue{DoubleValue: &v}} }

func strList(k string, vs []string) keyValue {
	arr := &arrayValue{Values: make([]anyValue, len(vs))}
	for i := range vs {
		arr.Values[i] = anyValue{StringValue: &vs[i]}
	}
	return keyValue{Key: k, Value: anyValue{ArrayValue: arr}}
}

// encode writes compact JSON without HTML escaping, so message text stays
// readable in the document.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// jsonString encodes v as the JSON text of a string attribute.
func jsonString(v any) string {
	b, err := encode(v)
	if err != nil {
		return "null" // only our own plain values are encoded here
	}
	return string(b)
}

func unixNano(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// exporter holds a trace and what Export derives from it.
type exporter struct {
	t       *trace.Trace
	traceID string
	usedIDs map[string]bool

	agents   map[string]*trace.Agent
	lists    map[string][]*trace.Message // an agent's message list
	messages map[string]*trace.Message
	calls    []*callInfo
	callByID map[string]*callInfo
	tools    []*toolInfo
	toolsBy  map[string][]*toolInfo // by agent id + "\x00" + tool call id, in start order
	runs     map[string]*agentInfo
	end      time.Time // the trace's last moment: the end of what never finished

	provider string
	models   map[string]string // agent id → model name, "" when unknown

	own      map[string]int      // input tokens of each agent's own calls
	children map[string][]string // agent id → its children's ids
}

type agentInfo struct {
	start, end    time.Time
	started       bool
	finished      bool
	seq           int64
	receipt       string
	events        []spanEvent
	description   string // the task it was given (children)
	returned      []string
	heldBack      []string
	hasDelegation bool
	spanID        string
}

type callInfo struct {
	call          *trace.ModelCall
	start, end    time.Time
	seq           int64
	finished      bool
	summary       *trace.Message // the summary a summary call produced
	outputTokens  int
	reportedUsage *delegation.Usage
}

type toolInfo struct {
	agentID    string
	callID     string
	name       string
	args       json.RawMessage
	start, end time.Time
	seq        int64
	finished   bool
	isError    bool
	result     *trace.Message
	childID    string
	spanID     string
}

func newExporter(t *trace.Trace) *exporter {
	sum := sha256.Sum256([]byte(t.Session.ID))
	return &exporter{t: t, traceID: hex.EncodeToString(sum[:16]), usedIDs: map[string]bool{},
		agents: map[string]*trace.Agent{}, lists: map[string][]*trace.Message{},
		messages: map[string]*trace.Message{}, callByID: map[string]*callInfo{},
		toolsBy: map[string][]*toolInfo{}, runs: map[string]*agentInfo{}, models: map[string]string{}}
}

// spanID derives a span's id from the session id and a stable key: the
// first 8 bytes of sha256(session id/kind/local id), never zero, never
// repeated within the document.
func (x *exporter) spanID(kind, local string) string {
	key := x.t.Session.ID + "/" + kind + "/" + local
	for n := 0; ; n++ {
		k := key
		if n > 0 {
			k += "#" + strconv.Itoa(n)
		}
		sum := sha256.Sum256([]byte(k))
		id := hex.EncodeToString(sum[:8])
		if id != "0000000000000000" && !x.usedIDs[id] {
			x.usedIDs[id] = true
			return id
		}
	}
}

func toolKey(agentID, callID string) string { return agentID + "\x00" + callID }

// index reads the trace's agents, messages, calls and events into what the
// spans need.
func (x *exporter) index() error {
	t := x.t
	for i := range t.Agents {
		a := &t.Agents[i]
		x.agents[a.ID] = a
		x.runs[a.ID] = &agentInfo{}
	}
	for i := range t.Messages {
		m := &t.Messages[i]
		x.messages[m.ID] = m
		x.lists[m.AgentID] = append(x.lists[m.AgentID], m)
	}
	for i := range t.ModelCalls {
		c := &callInfo{call: &t.ModelCalls[i], reportedUsage: t.ModelCalls[i].Usage}
		x.calls = append(x.calls, c)
		x.callByID[c.call.ID] = c
	}
	x.readScenario()

	if t.Session.FinishedAt != nil {
		x.end = *t.Session.FinishedAt
	}
	lastSummaryCall := map[string]*callInfo{}
	for _, ev := range t.Events {
		if ev.At.After(x.end) {
			x.end = ev.At
		}
		run := x.runs[ev.AgentID]
		var err error
		switch ev.Type {
		case delegation.EventAgentStarted:
			if run != nil {
				run.start, run.started, run.seq = ev.At, true, ev.Seq
			}
		case delegation.EventAgentFinished:
			var d delegation.AgentFinished
			if err = json.Unmarshal(ev.Data, &d); err == nil && run != nil {
				run.end, run.finished, run.receipt = ev.At, true, d.Receipt
			}
		case delegation.EventModelStarted:
			var d struct {
				ModelCallID string `json:"model_call_id"`
				Call        *struct {
					ID string `json:"id"`
				} `json:"call"`
			}
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				id := d.ModelCallID
				if id == "" && d.Call != nil {
					id = d.Call.ID // the engine's own payload, before trace.Build
				}
				if c := x.callByID[id]; c != nil {
					c.start, c.seq = ev.At, ev.Seq
					if c.call.Purpose == string(delegation.PurposeSummary) {
						lastSummaryCall[ev.AgentID] = c
					}
				}
			}
		case delegation.EventModelFinished:
			var d delegation.ModelFinished
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				if c := x.callByID[d.ModelCallID]; c != nil {
					c.end, c.finished, c.outputTokens = ev.At, true, d.OutputTokens
					if d.Usage != nil {
						c.reportedUsage = d.Usage
					}
				}
			}
		case delegation.EventToolStarted:
			var d delegation.ToolStarted
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				ti := &toolInfo{agentID: ev.AgentID, callID: d.ToolCallID, name: d.Name, args: d.Args,
					start: ev.At, seq: ev.Seq}
				x.tools = append(x.tools, ti)
				k := toolKey(ev.AgentID, d.ToolCallID)
				x.toolsBy[k] = append(x.toolsBy[k], ti)
			}
		case delegation.EventToolFinished:
			var d delegation.ToolFinished
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				for _, ti := range x.toolsBy[toolKey(ev.AgentID, d.ToolCallID)] {
					if !ti.finished {
						ti.end, ti.finished, ti.isError = ev.At, true, d.IsError
						break
					}
				}
			}
		case delegation.EventDelegationStarted:
			var d delegation.DelegationStarted
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				if ts := x.toolsBy[toolKey(ev.AgentID, d.ToolCallID)]; len(ts) > 0 {
					ts[len(ts)-1].childID = d.ChildID
				}
				if child := x.runs[d.ChildID]; child != nil {
					child.description = d.Description
				}
			}
		case delegation.EventDelegationFinished:
			var d delegation.DelegationFinished
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				if child := x.runs[d.ChildID]; child != nil {
					child.returned, child.heldBack, child.hasDelegation = d.Returned, d.HeldBack, true
				}
			}
		case delegation.EventSummarization:
			var d struct {
				SummaryMessageID string              `json:"summary_message_id"`
				SummaryMessage   *delegation.Message `json:"summary_message"`
			}
			if err = json.Unmarshal(ev.Data, &d); err == nil {
				id := d.SummaryMessageID
				if id == "" && d.SummaryMessage != nil {
					id = d.SummaryMessage.ID
				}
				if c := lastSummaryCall[ev.AgentID]; c != nil && c.summary == nil {
					c.summary = x.messages[id]
				}
			}
			if err == nil && run != nil {
				run.events = append(run.events, eventOf(ev))
			}
		case delegation.EventDelegationRefused, delegation.EventFilesChanged:
			if run != nil {
				run.events = append(run.events, eventOf(ev))
			}
		}
		if err != nil {
			return errors.New("otlp: event " + strconv.FormatInt(ev.Seq, 10) + " (" + string(ev.Type) + "): " + err.Error())
		}
	}

	// Each tool call's arguments come from the assistant message that asked
	// for it (a trace's tool.started holds none: the message has them), and
	// its result from the tool message that answers it: each goes to the
	// first span of that agent and call id still without one (ids repeat
	// only when a script reuses them).
	argsGiven := map[*toolInfo]bool{}
	for i := range t.Messages {
		m := &t.Messages[i]
		switch {
		case m.Role == string(delegation.RoleAssistant):
			for _, c := range m.ToolCalls {
				for _, ti := range x.toolsBy[toolKey(m.AgentID, c.ID)] {
					if !argsGiven[ti] {
						argsGiven[ti] = true
						if len(c.Args) > 0 {
							ti.args = c.Args
						}
						break
					}
				}
			}
		case m.Role == string(delegation.RoleTool) && m.ToolCallID != nil:
			for _, ti := range x.toolsBy[toolKey(m.AgentID, *m.ToolCallID)] {
				if ti.result == nil {
					ti.result = m
					break
				}
			}
		}
	}
	return nil
}

// readScenario finds the provider and each agent's model in the scenario as
// run: a subagent's own model, else its parent's; the main agent's
// agent.model, else model.model.
func (x *exporter) readScenario() {
	var sc struct {
		Agent *struct {
			Model string `json:"model"`
		} `json:"agent"`
		Subagents []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"subagents"`
		Model *struct {
			Provider string `json:"provider"`
			Model    string `json:"model"`
		} `json:"model"`
	}
	_ = json.Unmarshal(x.t.Scenario, &sc) // a scenario we cannot read names no model
	x.provider = "scripted"
	mainModel := ""
	if sc.Model != nil {
		if sc.Model.Provider != "" {
			x.provider = sc.Model.Provider
		}
		mainModel = sc.Model.Model
	}
	if sc.Agent != nil && sc.Agent.Model != "" {
		mainModel = sc.Agent.Model
	}
	own := map[string]string{}
	for _, s := range sc.Subagents {
		own[s.Name] = s.Model
	}
	var modelOf func(a *trace.Agent, depth int) string
	modelOf = func(a *trace.Agent, depth int) string {
		if a.ParentID == nil || depth > len(x.t.Agents) {
			return mainModel
		}
		if m := own[a.Name]; m != "" {
			return m
		}
		if p := x.agents[*a.ParentID]; p != nil {
			return modelOf(p, depth+1)
		}
		return mainModel
	}
	for i := range x.t.Agents {
		a := &x.t.Agents[i]
		x.models[a.ID] = modelOf(a, 0)
	}
}

// eventOf makes a span event of a log event: its type, and its data's
// top-level fields as attributes, in key order.
func eventOf(ev delegation.Event) spanEvent {
	out := spanEvent{TimeUnixNano: unixNano(ev.At), Name: string(ev.Type), Attributes: []keyValue{}}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(ev.Data))
	dec.UseNumber()
	if dec.Decode(&fields) != nil {
		return out
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if kv, ok := attributeOf(k, fields[k]); ok {
			out.Attributes = append(out.Attributes, kv)
		}
	}
	return out
}

// attributeOf turns a JSON value into an attribute: strings, integers,
// numbers and booleans as themselves, lists and objects as their JSON text.
// Null is left out.
func attributeOf(k string, raw json.RawMessage) (keyValue, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return keyValue{}, false
	}
	switch v := v.(type) {
	case nil:
		return keyValue{}, false
	case string:
		return str(k, v), true
	case bool:
		return boolean(k, v), true
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return integer(k, n), true
		}
		f, _ := v.Float64()
		return double(k, f), true
	default:
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			return keyValue{}, false
		}
		return str(k, b.String()), true
	}
}

// timesOf returns a span's start and end, the end never before the start;
// what never ended ends with the trace.
func (x *exporter) timesOf(start, end time.Time, finished bool) (string, string) {
	if !finished {
		end = x.end
	}
	if end.Before(start) {
		end = start
	}
	return unixNano(start), unixNano(end)
}

// spans builds every span, ordered by the log event that started it.
func (x *exporter) spans() []span {
	type ordered struct {
		seq int64
		s   span
	}
	var out []ordered

	// Ids first: a child's span needs its task call's.
	for _, a := range x.t.Agents {
		x.runs[a.ID].spanID = x.spanID("agent", a.ID)
	}
	seen := map[string]int{}
	for _, ti := range x.tools {
		local := ti.agentID + "/" + ti.callID
		if n := seen[local]; n > 0 {
			local += "#" + strconv.Itoa(n)
		}
		seen[ti.agentID+"/"+ti.callID]++
		ti.spanID = x.spanID("tool", local)
	}

	for i := range x.t.Agents {
		a := &x.t.Agents[i]
		out = append(out, ordered{x.runs[a.ID].seq, x.agentSpan(a)})
	}
	for _, c := range x.calls {
		out = append(out, ordered{c.seq, x.chatSpan(c)})
	}
	for _, ti := range x.tools {
		out = append(out, ordered{ti.seq, x.toolSpan(ti)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	spans := make([]span, len(out))
	for i, o := range out {
		spans[i] = o.s
	}
	return spans
}

// taskSpan is the execute_tool span of the task call that started a child.
func (x *exporter) taskSpan(a *trace.Agent) *toolInfo {
	if a.ParentID == nil || a.TaskCallID == nil {
		return nil
	}
	for _, ti := range x.toolsBy[toolKey(*a.ParentID, *a.TaskCallID)] {
		if ti.childID == a.ID {
			return ti
		}
	}
	ts := x.toolsBy[toolKey(*a.ParentID, *a.TaskCallID)]
	if len(ts) == 1 {
		return ts[0]
	}
	return nil
}

func (x *exporter) agentSpan(a *trace.Agent) span {
	run := x.runs[a.ID]
	s := span{TraceID: x.traceID, SpanID: run.spanID, Name: "invoke_agent " + a.Name, Kind: kindInternal}
	if a.ParentID != nil {
		if ti := x.taskSpan(a); ti != nil {
			s.ParentSpanID = ti.spanID
		} else if p := x.runs[*a.ParentID]; p != nil {
			s.ParentSpanID = p.spanID
		}
	}
	start := run.start
	if !run.started {
		start = x.t.Session.CreatedAt
	}
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.timesOf(start, run.end, run.finished)

	own, subtree := x.tokens(a.ID)
	attrs := []keyValue{
		str("gen_ai.operation.name", "invoke_agent"),
		str("gen_ai.agent.name", a.Name),
		str("gen_ai.agent.id", a.ID),
		str("openinference.span.kind", "AGENT"),
		str("agent.name", a.Name),
		str("graph.node.id", a.ID),
	}
	if a.ParentID != nil {
		attrs = append(attrs, str("graph.node.parent_id", *a.ParentID))
	}
	attrs = append(attrs, str("session.id", x.t.Session.ID))
	if m := x.models[a.ID]; m != "" {
		attrs = append(attrs, str("gen_ai.request.model", m))
	}
	if a.SystemPrompt != "" {
		attrs = append(attrs, str("gen_ai.system_instructions", systemInstructions(a.SystemPrompt)))
	}
	input := x.t.Session.Prompt
	if a.ParentID != nil {
		input = run.description
	}
	attrs = append(attrs, str("input.value", input), str("input.mime_type", "text/plain"))
	if run.finished {
		attrs = append(attrs, str("output.value", run.receipt), str("output.mime_type", "text/plain"))
	}
	if a.Mode != nil {
		attrs = append(attrs, str("delegation.mode", *a.Mode))
	}
	if a.ParentID != nil {
		attrs = append(attrs, integer("delegation.inherited_messages", int64(x.inheritedMessages(a.ID))))
		if ti := x.taskSpan(a); ti != nil && ti.result != nil {
			attrs = append(attrs, integer("delegation.receipt_tokens", int64(ti.result.Tokens)))
		}
	}
	attrs = append(attrs,
		integer("delegation.own_tokens", int64(own)),
		integer("delegation.subtree_tokens", int64(subtree)),
		str("delegation.status", a.Status),
		integer("delegation.steps", int64(a.Steps)),
		integer("delegation.invocation", int64(a.Invocation)),
	)
	if run.hasDelegation {
		attrs = append(attrs, strList("delegation.returned", nonNil(run.returned)),
			strList("delegation.held_back", nonNil(run.heldBack)))
	}
	switch a.Status {
	case delegation.StatusFailed:
		attrs = append(attrs, str("error.type", "agent_failed"))
		s.Status = &status{Code: statusError, Message: a.Error}
	case delegation.StatusDone:
		s.Status = &status{Code: statusOK}
	}
	s.Attributes = attrs
	s.Events = run.events
	return s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// tokens returns the input tokens of an agent's own model calls, and of its
// subtree's: its own and its descendants', each call counted once.
func (x *exporter) tokens(agentID string) (own, subtree int) {
	if x.own == nil {
		x.own = map[string]int{}
		x.children = map[string][]string{}
		for _, c := range x.calls {
			x.own[c.call.AgentID] += c.call.InputTokens
		}
		for _, a := range x.t.Agents {
			if a.ParentID != nil {
				x.children[*a.ParentID] = append(x.children[*a.ParentID], a.ID)
			}
		}
	}
	visited := map[string]bool{} // guards a malformed trace's cycle
	var walk func(id string) int
	walk = func(id string) int {
		if visited[id] {
			return 0
		}
		visited[id] = true
		n := x.own[id]
		for _, c := range x.children[id] {
			n += walk(c)
		}
		return n
	}
	return x.own[agentID], walk(agentID)
}

// inheritedMessages counts the messages of an agent's first model call that
// are not its own: what a fork inherited from its parent.
func (x *exporter) inheritedMessages(agentID string) int {
	for _, c := range x.calls {
		if c.call.AgentID != agentID {
			continue
		}
		n := 0
		for _, r := range c.call.Context {
			if r.AgentID != agentID {
				n += r.Len()
			}
		}
		return n
	}
	return 0
}

// resolve returns the messages a call's context names.
func (x *exporter) resolve(ranges []delegation.Range) []*trace.Message {
	var out []*trace.Message
	for _, r := range ranges {
		list := x.lists[r.AgentID]
		from, to := max(r.From, 0), min(r.To, len(list))
		if from < to {
			out = append(out, list[from:to]...)
		}
	}
	return out
}

func (x *exporter) chatSpan(c *callInfo) span {
	call := c.call
	model := x.models[call.AgentID]
	name := model
	if name == "" {
		name = "scripted"
	}
	s := span{TraceID: x.traceID, SpanID: x.spanID("chat", call.ID), Name: "chat " + name, Kind: kindClient}
	if run := x.runs[call.AgentID]; run != nil {
		s.ParentSpanID = run.spanID
	}
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.timesOf(c.start, c.end, c.finished)

	var output *trace.Message
	if call.OutputMessageID != nil {
		output = x.messages[*call.OutputMessageID]
	}
	outputTokens := c.outputTokens
	if output != nil {
		outputTokens = output.Tokens
	} else if c.summary != nil {
		outputTokens = c.summary.Tokens
	}
	inputs := x.resolve(call.Context)

	attrs := []keyValue{
		str("gen_ai.operation.name", "chat"),
		str("gen_ai.provider.name", x.provider),
	}
	if model != "" {
		attrs = append(attrs, str("gen_ai.request.model", model))
	}
	attrs = append(attrs,
		integer("gen_ai.usage.input_tokens", int64(call.InputTokens)),
		integer("gen_ai.usage.output_tokens", int64(outputTokens)),
	)
	gen := make([]genMessage, len(inputs))
	for i, m := range inputs {
		gen[i] = genMessageOf(m)
	}
	attrs = append(attrs, str("gen_ai.input.messages", jsonString(gen)))
	switch {
	case output != nil:
		out := genMessageOf(output)
		if output.Reasoning != "" {
			// The model's thinking is its own part, first, as it came; it
			// is output only: the model never receives it back.
			out.Parts = append([]any{textPart{Type: "reasoning", Content: output.Reasoning}}, out.Parts...)
		}
		out.FinishReason = "stop"
		if len(output.ToolCalls) > 0 {
			out.FinishReason = "tool_call"
		}
		attrs = append(attrs, str("gen_ai.output.messages", jsonString([]genMessage{out})))
	case c.summary != nil:
		out := genMessage{Role: "assistant", Parts: []any{textPart{Type: "text", Content: c.summary.Content}}, FinishReason: "stop"}
		attrs = append(attrs, str("gen_ai.output.messages", jsonString([]genMessage{out})))
	}
	if call.SystemPrompt != "" {
		attrs = append(attrs, str("gen_ai.system_instructions", systemInstructions(call.SystemPrompt)))
	}

	// OpenInference, for Phoenix.
	attrs = append(attrs, str("openinference.span.kind", "LLM"), str("session.id", x.t.Session.ID))
	if model != "" {
		attrs = append(attrs, str("llm.model_name", model))
	}
	attrs = append(attrs, str("llm.provider", x.provider),
		integer("llm.token_count.prompt", int64(call.InputTokens)),
		integer("llm.token_count.completion", int64(outputTokens)),
		integer("llm.token_count.total", int64(call.InputTokens+outputTokens)),
	)
	i := 0
	if call.SystemPrompt != "" {
		attrs = append(attrs, str("llm.input_messages.0.message.role", "system"),
			str("llm.input_messages.0.message.content", call.SystemPrompt))
		i = 1
	}
	for _, m := range inputs {
		attrs = append(attrs, oiMessage("llm.input_messages."+strconv.Itoa(i)+".", m.Role, m.Content, m.ToolCalls, m.ToolCallID)...)
		i++
	}
	switch {
	case output != nil:
		attrs = append(attrs, oiMessage("llm.output_messages.0.", output.Role, output.Content, output.ToolCalls, nil)...)
		if output.Content != "" {
			attrs = append(attrs, str("output.value", output.Content), str("output.mime_type", "text/plain"))
		}
	case c.summary != nil:
		attrs = append(attrs, oiMessage("llm.output_messages.0.", "assistant", c.summary.Content, nil, nil)...)
		attrs = append(attrs, str("output.value", c.summary.Content), str("output.mime_type", "text/plain"))
	}

	attrs = append(attrs,
		str("delegation.purpose", call.Purpose),
		str("delegation.context_ranges", jsonString(nonNilRanges(call.Context))),
		integer("delegation.inherited_tokens", int64(call.InheritedTokens)),
		integer("delegation.system_tokens", int64(call.SystemTokens)),
		integer("delegation.tool_tokens", int64(call.ToolTokens)),
		integer("delegation.message_tokens", int64(call.MessageTokens)),
	)
	if u := c.reportedUsage; u != nil {
		attrs = append(attrs, integer("delegation.reported_input_tokens", int64(u.PromptTokens)),
			integer("delegation.reported_output_tokens", int64(u.CompletionTokens)))
		if u.CachedTokens > 0 {
			attrs = append(attrs, integer("gen_ai.usage.cache_read.input_tokens", int64(u.CachedTokens)),
				integer("llm.token_count.prompt_details.cache_read", int64(u.CachedTokens)))
		}
		if u.ReasoningTokens > 0 {
			attrs = append(attrs, integer("gen_ai.usage.reasoning.output_tokens", int64(u.ReasoningTokens)),
				integer("llm.token_count.completion_details.reasoning", int64(u.ReasoningTokens)))
		}
	}
	switch {
	case call.Error != "":
		attrs = append(attrs, str("error.type", "model_error"))
		s.Status = &status{Code: statusError, Message: call.Error}
	case c.finished:
		s.Status = &status{Code: statusOK}
	}
	s.Attributes = attrs
	return s
}

func nonNilRanges(rs []delegation.Range) []delegation.Range {
	if rs == nil {
		return []delegation.Range{}
	}
	return rs
}

func (x *exporter) toolSpan(ti *toolInfo) span {
	s := span{TraceID: x.traceID, SpanID: ti.spanID, Name: "execute_tool " + ti.name, Kind: kindInternal}
	if run := x.runs[ti.agentID]; run != nil {
		s.ParentSpanID = run.spanID
	}
	s.StartTimeUnixNano, s.EndTimeUnixNano = x.timesOf(ti.start, ti.end, ti.finished)
	args := argsText(ti.args)
	attrs := []keyValue{
		str("gen_ai.operation.name", "execute_tool"),
		str("gen_ai.tool.name", ti.name),
		str("gen_ai.tool.call.id", ti.callID),
		str("gen_ai.tool.type", "function"),
		str("gen_ai.tool.call.arguments", args),
	}
	if ti.result != nil {
		attrs = append(attrs, str("gen_ai.tool.call.result", ti.result.Content))
	}
	attrs = append(attrs,
		str("openinference.span.kind", "TOOL"),
		str("session.id", x.t.Session.ID),
		str("tool.name", ti.name),
		str("input.value", args), str("input.mime_type", "application/json"),
	)
	if ti.result != nil {
		attrs = append(attrs, str("output.value", ti.result.Content), str("output.mime_type", "text/plain"))
		if ti.result.Kind != "" {
			attrs = append(attrs, str("delegation.result_kind", ti.result.Kind))
		}
	}
	if ti.childID != "" {
		attrs = append(attrs, str("delegation.child_id", ti.childID))
	}
	isError := ti.isError || (ti.result != nil && ti.result.IsError)
	switch {
	case isError:
		attrs = append(attrs, str("error.type", "tool_error"))
		msg := ""
		if ti.result != nil {
			msg = ti.result.Content
		}
		s.Status = &status{Code: statusError, Message: msg}
	case ti.finished:
		s.Status = &status{Code: statusOK}
	}
	s.Attributes = attrs
	return s
}

// argsText is a tool call's arguments as compact JSON text.
func argsText(raw json.RawMessage) string {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		if len(raw) == 0 {
			return "{}"
		}
		return string(raw)
	}
	return b.String()
}

// The GenAI conventions' message format (gen_ai.input.messages,
// gen_ai.output.messages, gen_ai.system_instructions).

type genMessage struct {
	Role         string `json:"role"`
	Parts        []any  `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type textPart struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

type toolCallPart struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

type toolResponsePart struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Response string `json:"response"`
}

func systemInstructions(prompt string) string {
	return jsonString([]textPart{{Type: "text", Content: prompt}})
}

// genMessageOf writes a message in the GenAI format: text as a text part,
// each tool call as a tool_call part, a tool result as role "tool" with a
// tool_call_response part.
func genMessageOf(m *trace.Message) genMessage {
	out := genMessage{Role: m.Role, Parts: []any{}}
	if m.Role == string(delegation.RoleTool) {
		id := ""
		if m.ToolCallID != nil {
			id = *m.ToolCallID
		}
		out.Parts = append(out.Parts, toolResponsePart{Type: "tool_call_response", ID: id, Response: m.Content})
		return out
	}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		out.Parts = append(out.Parts, textPart{Type: "text", Content: m.Content})
	}
	for _, c := range m.ToolCalls {
		text := argsText(c.Args)
		var args any = json.RawMessage(text)
		if !json.Valid([]byte(text)) {
			args = text // not JSON: kept as the text it is
		}
		out.Parts = append(out.Parts, toolCallPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: args})
	}
	return out
}

// oiMessage writes a message as OpenInference's flattened attributes under
// prefix (e.g. "llm.input_messages.3.").
func oiMessage(prefix, role, content string, calls []delegation.ToolCall, toolCallID *string) []keyValue {
	out := []keyValue{str(prefix+"message.role", role)}
	if content != "" || len(calls) == 0 {
		out = append(out, str(prefix+"message.content", content))
	}
	if toolCallID != nil {
		out = append(out, str(prefix+"message.tool_call_id", *toolCallID))
	}
	for k, c := range calls {
		p := prefix + "message.tool_calls." + strconv.Itoa(k) + ".tool_call."
		out = append(out, str(p+"id", c.ID), str(p+"function.name", c.Name),
			str(p+"function.arguments", argsText(c.Args)))
	}
	return out
}
