package otlp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// A mirror of the OTLP JSON shape (opentelemetry-proto's JSON encoding),
// written from the protocol, not from the exporter: decoding with
// DisallowUnknownFields catches a misspelt key.
type mDoc struct {
	ResourceSpans []mResourceSpans `json:"resourceSpans"`
}

type mResourceSpans struct {
	Resource   mResource     `json:"resource"`
	ScopeSpans []mScopeSpans `json:"scopeSpans"`
}

type mResource struct {
	Attributes []mKeyValue `json:"attributes"`
}

type mScopeSpans struct {
	Scope mScope  `json:"scope"`
	Spans []mSpan `json:"spans"`
}

type mScope struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type mSpan struct {
	TraceID           string      `json:"traceId"`
	SpanID            string      `json:"spanId"`
	ParentSpanID      string      `json:"parentSpanId,omitempty"`
	Name              string      `json:"name"`
	Kind              int         `json:"kind"`
	StartTimeUnixNano string      `json:"startTimeUnixNano"`
	EndTimeUnixNano   string      `json:"endTimeUnixNano"`
	Attributes        []mKeyValue `json:"attributes"`
	Events            []mEvent    `json:"events,omitempty"`
	Status            *mStatus    `json:"status,omitempty"`
}

type mEvent struct {
	TimeUnixNano string      `json:"timeUnixNano"`
	Name         string      `json:"name"`
	Attributes   []mKeyValue `json:"attributes"`
}

type mStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message,omitempty"`
}

type mKeyValue struct {
	Key   string    `json:"key"`
	Value mAnyValue `json:"value"`
}

// mAnyValue holds one of OTLP's value kinds; intValue is a 64-bit integer,
// hence a decimal string in JSON.
type mAnyValue struct {
	StringValue *string      `json:"stringValue,omitempty"`
	BoolValue   *bool        `json:"boolValue,omitempty"`
	IntValue    *string      `json:"intValue,omitempty"`
	DoubleValue *float64     `json:"doubleValue,omitempty"`
	ArrayValue  *mArrayValue `json:"arrayValue,omitempty"`
}

type mArrayValue struct {
	Values []mAnyValue `json:"values"`
}

func attrs(kvs []mKeyValue) map[string]mAnyValue {
	out := map[string]mAnyValue{}
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

func (s mSpan) attr(k string) (mAnyValue, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return mAnyValue{}, false
}

func (s mSpan) str(t *testing.T, k string) string {
	t.Helper()
	v, ok := s.attr(k)
	if !ok || v.StringValue == nil {
		t.Fatalf("span %q: no string attribute %s", s.Name, k)
	}
	return *v.StringValue
}

func (s mSpan) int(t *testing.T, k string) int {
	t.Helper()
	v, ok := s.attr(k)
	if !ok || v.IntValue == nil {
		t.Fatalf("span %q: no int attribute %s", s.Name, k)
	}
	n, err := strconv.Atoi(*v.IntValue)
	if err != nil {
		t.Fatalf("span %q: %s = %q is not a decimal integer", s.Name, k, *v.IntValue)
	}
	return n
}

// run plays a scenario and builds its trace.
func run(t *testing.T, doc []byte, id string) *trace.Trace {
	t.Helper()
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: id,
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Build(trace.Meta{ID: id, Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func example(t *testing.T) *trace.Trace {
	t.Helper()
	doc, err := os.ReadFile("../../examples/order-number.json")
	if err != nil {
		t.Fatal(err)
	}
	return run(t, doc, "s1")
}

// fanOut sends two tasks to isolated general-purpose children, one to a
// type that does not exist, and one to a subagent whose step limit ends it
// before it answers.
const fanOut = `{
  "name": "fan-out",
  "prompt": "Survey the files, in parallel.",
  "files": {"/a.md": "alpha", "/b.md": "beta"},
  "subagents": [
    {"name": "hasty", "description": "Gives up quickly", "system_prompt": "Be quick.", "max_steps": 1}
  ],
  "script": {
    "main": [
      {"tool_calls": [
        {"name": "task", "args": {"description": "Count the files under /.", "subagent_type": "general-purpose"}},
        {"name": "task", "args": {"description": "Read /a.md and report it.", "subagent_type": "general-purpose"}},
        {"name": "task", "args": {"description": "Research the files.", "subagent_type": "researcher"}},
        {"name": "task", "args": {"description": "List the files.", "subagent_type": "hasty"}}
      ]},
      {"content": "Two files; /a.md says alpha."}
    ],
    "general-purpose": [
      [{"content": "There are 2 files."}],
      [{"tool_calls": [{"name": "read_file", "args": {"file_path": "/a.md"}}]}, {"content": "/a.md says alpha."}]
    ],
    "hasty": [
      [{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}]
    ]
  }
}`

// summarizing folds the main agent's history before its second turn.
const summarizing = `{
  "name": "summarizing",
  "prompt": "Look around, then answer.",
  "files": {"/a.md": "alpha"},
  "agent": {"summarization": {"max_tokens": 1, "keep_messages": 1}},
  "script": {
    "main": [
      {"tool_calls": [{"name": "ls", "args": {"path": "/"}}]},
      {"summary": "The user asked me to look around; I listed /."},
      {"content": "Done."}
    ]
  }
}`

// fits reads a document strictly into the mirror: no unknown key, and,
// since encoding/json matches keys case-insensitively, the mirror encoded
// again must give the same document (a key in the wrong case, or a value the
// mirror would lose, shows as a difference).
func fits(b []byte) (mDoc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d mDoc
	if err := dec.Decode(&d); err != nil {
		return d, err
	}
	if dec.More() {
		return d, errors.New("trailing data after the document")
	}
	again, err := json.Marshal(d)
	if err != nil {
		return d, err
	}
	var want, got any
	if err := json.Unmarshal(b, &want); err != nil {
		return d, err
	}
	if err := json.Unmarshal(again, &got); err != nil {
		return d, err
	}
	if !reflect.DeepEqual(want, got) {
		return d, fmt.Errorf("the document changes through the mirror:\n%s\n---\n%s", b, again)
	}
	return d, nil
}

func decode(t *testing.T, b []byte) mDoc {
	t.Helper()
	d, err := fits(b)
	if err != nil {
		t.Fatalf("the export does not fit the OTLP shape: %v", err)
	}
	return d
}

func export(t *testing.T, tr *trace.Trace) ([]byte, mDoc) {
	t.Helper()
	b, err := otlp.Export(tr)
	if err != nil {
		t.Fatal(err)
	}
	return b, decode(t, b)
}

func TestRoundTripThroughTheOTLPShape(t *testing.T) {
	traces := []*trace.Trace{example(t), run(t, []byte(fanOut), "s2"), run(t, []byte(summarizing), "s3")}
	for _, tr := range traces {
		t.Run(tr.Session.Name, func(t *testing.T) {
			b, err := otlp.Export(tr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fits(b); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("the check catches a misspelt key", func(t *testing.T) {
		good := `{"resourceSpans":[{"resource":{"attributes":[]},"scopeSpans":[{"scope":{"name":"x","version":"1"},"spans":[{"traceId":"ab","spanId":"cd","name":"n","kind":1,"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"k","value":{"intValue":"3"}}]}]}]}]}`
		if _, err := fits([]byte(good)); err != nil {
			t.Fatalf("a good document: %v", err)
		}
		for _, bad := range []struct{ from, to string }{
			{`"spanId"`, `"span_id"`},          // unknown
			{`"traceId"`, `"traceID"`},         // wrong case
			{`"intValue":"3"`, `"intValue":3`}, // a 64-bit integer as a number
			{`"kind":1`, `"kind":"SPAN_KIND_INTERNAL"`},
		} {
			doc := strings.Replace(good, bad.from, bad.to, 1)
			if _, err := fits([]byte(doc)); err == nil {
				t.Errorf("%s → %s: not caught", bad.from, bad.to)
			}
		}
	})
}

var (
	hex32   = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hex16   = regexp.MustCompile(`^[0-9a-f]{16}$`)
	decimal = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
)

// checkStructure checks what every export must hold and returns the spans
// by id.
func checkStructure(t *testing.T, tr *trace.Trace, d mDoc) map[string]mSpan {
	t.Helper()
	rs := d.ResourceSpans
	if len(rs) != 1 || len(rs[0].ScopeSpans) != 1 {
		t.Fatalf("want one resourceSpans with one scopeSpans")
	}
	res := attrs(rs[0].Resource.Attributes)
	if v := res["service.name"].StringValue; v == nil || *v != "delegation-studio" {
		t.Fatalf("service.name = %v", v)
	}
	if v := res["session.id"].StringValue; v == nil || *v != tr.Session.ID {
		t.Fatalf("resource session.id = %v", v)
	}
	if sc := rs[0].ScopeSpans[0].Scope; sc.Name != "delegation-studio" || sc.Version != "1" {
		t.Fatalf("scope = %+v", sc)
	}
	spans := rs[0].ScopeSpans[0].Spans
	byID := map[string]mSpan{}
	traceID := ""
	var roots []mSpan
	for _, s := range spans {
		if !hex32.MatchString(s.TraceID) || s.TraceID == strings.Repeat("0", 32) {
			t.Fatalf("span %q: traceId %q", s.Name, s.TraceID)
		}
		if traceID == "" {
			traceID = s.TraceID
		} else if s.TraceID != traceID {
			t.Fatalf("two trace ids: %s and %s", traceID, s.TraceID)
		}
		if !hex16.MatchString(s.SpanID) {
			t.Fatalf("span %q: spanId %q", s.Name, s.SpanID)
		}
		if _, dup := byID[s.SpanID]; dup {
			t.Fatalf("span id %s twice", s.SpanID)
		}
		byID[s.SpanID] = s
		if s.ParentSpanID == "" {
			roots = append(roots, s)
		}
		if !decimal.MatchString(s.StartTimeUnixNano) || !decimal.MatchString(s.EndTimeUnixNano) {
			t.Fatalf("span %q: times %q, %q", s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano)
		}
		start, _ := strconv.ParseInt(s.StartTimeUnixNano, 10, 64)
		end, _ := strconv.ParseInt(s.EndTimeUnixNano, 10, 64)
		if end < start || start <= 0 {
			t.Fatalf("span %q: start %d, end %d", s.Name, start, end)
		}
		for _, ev := range s.Events {
			if !decimal.MatchString(ev.TimeUnixNano) {
				t.Fatalf("event %q: time %q", ev.Name, ev.TimeUnixNano)
			}
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.IntValue; v != nil && !regexp.MustCompile(`^-?[0-9]+$`).MatchString(*v) {
				t.Fatalf("span %q: %s intValue %q", s.Name, kv.Key, *v)
			}
		}
	}
	for _, s := range spans {
		if s.ParentSpanID != "" {
			if _, ok := byID[s.ParentSpanID]; !ok {
				t.Fatalf("span %q: parent %s is not in the document", s.Name, s.ParentSpanID)
			}
		}
	}
	if len(roots) != 1 {
		t.Fatalf("%d roots", len(roots))
	}
	if r := roots[0]; r.Name != "invoke_agent main" || r.str(t, "gen_ai.agent.id") != "main" ||
		r.str(t, "gen_ai.operation.name") != "invoke_agent" || r.Kind != 1 {
		t.Fatalf("root = %+v", r)
	}

	// One span per agent, per model call, per tool call.
	count := map[string]int{}
	for _, s := range spans {
		count[s.str(t, "gen_ai.operation.name")]++
	}
	tools := 0
	for _, ev := range tr.Events {
		if ev.Type == delegation.EventToolStarted {
			tools++
		}
	}
	if count["invoke_agent"] != len(tr.Agents) || count["chat"] != len(tr.ModelCalls) || count["execute_tool"] != tools {
		t.Fatalf("spans by operation %v; agents %d, calls %d, tools %d", count, len(tr.Agents), len(tr.ModelCalls), tools)
	}

	// Usage tokens on chat spans, and only there.
	calls := map[string]trace.ModelCall{}
	for _, c := range tr.ModelCalls {
		calls[c.ID] = c
	}
	messages := map[string]trace.Message{}
	for _, m := range tr.Messages {
		messages[m.ID] = m
	}
	chats := 0
	for _, s := range spans {
		_, in := s.attr("gen_ai.usage.input_tokens")
		_, out := s.attr("gen_ai.usage.output_tokens")
		if s.str(t, "gen_ai.operation.name") != "chat" {
			if in || out {
				t.Fatalf("span %q carries usage tokens", s.Name)
			}
			continue
		}
		if s.Kind != 3 || s.str(t, "openinference.span.kind") != "LLM" {
			t.Fatalf("chat span %q: kind %d", s.Name, s.Kind)
		}
		// Match the span to its call by its input tokens and ranges.
		var ranges []delegation.Range
		if err := json.Unmarshal([]byte(s.str(t, "delegation.context_ranges")), &ranges); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, c := range tr.ModelCalls {
			if c.Purpose != s.str(t, "delegation.purpose") || !reflect.DeepEqual(c.Context, ranges) ||
				c.InputTokens != s.int(t, "gen_ai.usage.input_tokens") {
				continue
			}
			if c.OutputMessageID == nil || messages[*c.OutputMessageID].Tokens == s.int(t, "gen_ai.usage.output_tokens") {
				found = true
			}
		}
		if !found {
			t.Fatalf("chat span with ranges %v matches no model call in input and output tokens", ranges)
		}
		if s.int(t, "llm.token_count.prompt") != s.int(t, "gen_ai.usage.input_tokens") ||
			s.int(t, "llm.token_count.completion") != s.int(t, "gen_ai.usage.output_tokens") {
			t.Fatalf("chat span %q: OpenInference counts differ from the GenAI ones", s.Name)
		}
		var msgs []map[string]any
		if err := json.Unmarshal([]byte(s.str(t, "gen_ai.input.messages")), &msgs); err != nil || len(msgs) == 0 {
			t.Fatalf("gen_ai.input.messages: %v, %d messages", err, len(msgs))
		}
		chats++
	}
	if chats != len(tr.ModelCalls) {
		t.Fatalf("%d chat spans for %d calls", chats, len(tr.ModelCalls))
	}
	return byID
}

// agentSpan finds an agent's invoke_agent span.
func agentSpan(t *testing.T, spans map[string]mSpan, id string) mSpan {
	t.Helper()
	for _, s := range spans {
		if v, ok := s.attr("gen_ai.agent.id"); ok && *v.StringValue == id && s.str(t, "gen_ai.operation.name") == "invoke_agent" {
			return s
		}
	}
	t.Fatalf("no invoke_agent span for %s", id)
	return mSpan{}
}

// checkChildren checks that each child hangs under its task call's span and
// that the span's result is the receipt.
func checkChildren(t *testing.T, tr *trace.Trace, spans map[string]mSpan) {
	t.Helper()
	receipts := map[string]trace.Message{}
	for _, m := range tr.Messages {
		if m.Kind == string(delegation.KindReceipt) {
			receipts[m.AgentID+"/"+*m.ToolCallID] = m
		}
	}
	for _, a := range tr.Agents {
		s := agentSpan(t, spans, a.ID)
		if a.ParentID == nil {
			continue
		}
		tool, ok := spans[s.ParentSpanID]
		if !ok || tool.str(t, "gen_ai.operation.name") != "execute_tool" || tool.str(t, "gen_ai.tool.name") != "task" ||
			tool.str(t, "gen_ai.tool.call.id") != *a.TaskCallID {
			t.Fatalf("agent %s: parent span %+v is not its task call %s", a.ID, tool, *a.TaskCallID)
		}
		if p := agentSpan(t, spans, *a.ParentID); tool.ParentSpanID != p.SpanID {
			t.Fatalf("agent %s: its task span is not under its parent's span", a.ID)
		}
		receipt, ok := receipts[*a.ParentID+"/"+*a.TaskCallID]
		if !ok {
			t.Fatalf("agent %s: no receipt", a.ID)
		}
		if got := tool.str(t, "gen_ai.tool.call.result"); got != receipt.Content {
			t.Fatalf("agent %s: task result %q, receipt %q", a.ID, got, receipt.Content)
		}
		if got := s.int(t, "delegation.receipt_tokens"); got != receipt.Tokens {
			t.Fatalf("agent %s: receipt_tokens %d, want %d", a.ID, got, receipt.Tokens)
		}
		if s.str(t, "delegation.mode") != *a.Mode || s.str(t, "delegation.status") != a.Status {
			t.Fatalf("agent %s: mode or status wrong", a.ID)
		}
	}
}

func TestExample(t *testing.T) {
	tr := example(t)
	b, d := export(t, tr)
	spans := checkStructure(t, tr, d)
	checkChildren(t, tr, spans)

	main := agentSpan(t, spans, "main")
	child := agentSpan(t, spans, "a1")
	t.Run("the agents' spans carry the delegation", func(t *testing.T) {
		if _, ok := main.attr("delegation.mode"); ok {
			t.Fatal("the main agent has a mode")
		}
		if main.Status == nil || main.Status.Code != 1 || child.Status == nil || child.Status.Code != 1 {
			t.Fatalf("statuses %+v, %+v", main.Status, child.Status)
		}
		if child.str(t, "openinference.span.kind") != "AGENT" || child.Kind != 1 || child.str(t, "session.id") != "s1" {
			t.Fatalf("child span %+v", child)
		}
		own := map[string]int{}
		for _, c := range tr.ModelCalls {
			own[c.AgentID] += c.InputTokens
		}
		if main.int(t, "delegation.own_tokens") != own["main"] || main.int(t, "delegation.subtree_tokens") != own["main"]+own["a1"] ||
			child.int(t, "delegation.subtree_tokens") != own["a1"] {
			t.Fatalf("tokens: own %v", own)
		}
		var firstChildCall trace.ModelCall
		for _, c := range tr.ModelCalls {
			if c.AgentID == "a1" {
				firstChildCall = c
				break
			}
		}
		if got, want := child.int(t, "delegation.inherited_messages"), firstChildCall.Context[0].Len(); got != want || got == 0 {
			t.Fatalf("inherited_messages %d, want %d", got, want)
		}
	})

	t.Run("the fork child's first call begins with its parent's messages", func(t *testing.T) {
		var first mSpan
		for _, s := range spans {
			if s.ParentSpanID == child.SpanID && s.str(t, "gen_ai.operation.name") == "chat" {
				if first.SpanID == "" || s.StartTimeUnixNano < first.StartTimeUnixNano {
					first = s
				}
			}
		}
		var msgs []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		}
		if err := json.Unmarshal([]byte(first.str(t, "gen_ai.input.messages")), &msgs); err != nil {
			t.Fatal(err)
		}
		var parent []trace.Message
		for _, m := range tr.Messages {
			if m.AgentID == "main" {
				parent = append(parent, m)
			}
		}
		n := child.int(t, "delegation.inherited_messages")
		if len(msgs) != n+1 {
			t.Fatalf("%d input messages, want %d inherited and the preamble", len(msgs), n)
		}
		for i := 0; i < n; i++ {
			m, p := msgs[i], parent[i]
			if m.Role != p.Role {
				t.Fatalf("message %d: role %s, parent's %s", i, m.Role, p.Role)
			}
			switch {
			case p.Role == "tool":
				if m.Parts[0]["type"] != "tool_call_response" || m.Parts[0]["response"] != p.Content || m.Parts[0]["id"] != *p.ToolCallID {
					t.Fatalf("message %d: %v", i, m.Parts)
				}
			case len(p.ToolCalls) > 0:
				part := m.Parts[len(m.Parts)-1]
				args, _ := part["arguments"].(map[string]any)
				if part["type"] != "tool_call" || part["name"] != p.ToolCalls[0].Name || part["id"] != p.ToolCalls[0].ID || args == nil {
					t.Fatalf("message %d: %v", i, m.Parts)
				}
			default:
				if m.Parts[0]["type"] != "text" || m.Parts[0]["content"] != p.Content {
					t.Fatalf("message %d: %v", i, m.Parts)
				}
			}
		}
		if last := msgs[n]; last.Role != "user" || !strings.Contains(last.Parts[0]["content"].(string), "Report the order number above.") {
			t.Fatalf("the child's own message: %+v", last)
		}
		var sys []map[string]any
		if err := json.Unmarshal([]byte(first.str(t, "gen_ai.system_instructions")), &sys); err != nil || sys[0]["content"] != "Answer briefly." {
			t.Fatalf("system instructions: %v %v", sys, err)
		}
		if first.int(t, "delegation.inherited_tokens") == 0 {
			t.Fatal("a fork's first call inherits tokens")
		}
		var out []map[string]any
		if err := json.Unmarshal([]byte(first.str(t, "gen_ai.output.messages")), &out); err != nil || out[0]["finish_reason"] != "stop" {
			t.Fatalf("output messages %v %v", out, err)
		}
	})

	t.Run("tool spans are the agent's, with arguments and result", func(t *testing.T) {
		for _, s := range spans {
			if s.str(t, "gen_ai.operation.name") != "execute_tool" || s.str(t, "gen_ai.tool.name") != "write_file" {
				continue
			}
			if s.ParentSpanID != main.SpanID || s.Kind != 1 || s.str(t, "openinference.span.kind") != "TOOL" {
				t.Fatalf("write_file span %+v", s)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(s.str(t, "gen_ai.tool.call.arguments")), &args); err != nil || args["file_path"] != "/order.md" {
				t.Fatalf("arguments: %v %v", args, err)
			}
			if !strings.Contains(s.str(t, "gen_ai.tool.call.result"), "/order.md") {
				t.Fatalf("result %q", s.str(t, "gen_ai.tool.call.result"))
			}
			return
		}
		t.Fatal("no write_file span")
	})

	t.Run("the same trace gives the same bytes", func(t *testing.T) {
		again, _ := export(t, tr)
		if !bytes.Equal(b, again) {
			t.Fatal("two exports differ")
		}
		// The trace as written and read back gives the same document too:
		// the export depends on nothing but the trace.
		doc, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var back trace.Trace
		if err := json.Unmarshal(doc, &back); err != nil {
			t.Fatal(err)
		}
		third, _ := export(t, &back)
		if !bytes.Equal(b, third) {
			t.Fatalf("the re-read trace exports differently:\n%s\n%s", b, third)
		}
		// A tool call's arguments are its assistant message's: whether
		// tool.started repeats them or not changes nothing.
		for i, ev := range back.Events {
			if ev.Type == delegation.EventToolStarted {
				var d delegation.ToolStarted
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				back.Events[i].Data, _ = json.Marshal(map[string]string{"tool_call_id": d.ToolCallID, "name": d.Name})
			}
		}
		fourth, _ := export(t, &back)
		if !bytes.Equal(b, fourth) {
			t.Fatal("the export depends on tool.started's arguments")
		}
	})
}

func TestFanOut(t *testing.T) {
	tr := run(t, []byte(fanOut), "s2")
	b, d := export(t, tr)
	spans := checkStructure(t, tr, d)
	checkChildren(t, tr, spans)
	main := agentSpan(t, spans, "main")

	byName := map[string][]trace.Agent{}
	for _, a := range tr.Agents {
		byName[a.Name] = append(byName[a.Name], a)
	}
	if len(byName["general-purpose"]) != 2 || len(byName["hasty"]) != 1 || len(tr.Agents) != 4 {
		t.Fatalf("agents %+v", tr.Agents)
	}

	t.Run("isolated children inherit nothing and see only their task", func(t *testing.T) {
		for _, a := range byName["general-purpose"] {
			s := agentSpan(t, spans, a.ID)
			if s.str(t, "delegation.mode") != "isolated" || s.int(t, "delegation.inherited_messages") != 0 {
				t.Fatalf("%s: %+v", a.ID, s)
			}
			if s.Status == nil || s.Status.Code != 1 {
				t.Fatalf("%s: status %+v", a.ID, s.Status)
			}
			for _, c := range spans {
				if c.ParentSpanID != s.SpanID || c.str(t, "gen_ai.operation.name") != "chat" {
					continue
				}
				var msgs []struct {
					Role  string           `json:"role"`
					Parts []map[string]any `json:"parts"`
				}
				if err := json.Unmarshal([]byte(c.str(t, "gen_ai.input.messages")), &msgs); err != nil {
					t.Fatal(err)
				}
				if msgs[0].Role != "user" || msgs[0].Parts[0]["content"] != s.str(t, "input.value") {
					t.Fatalf("%s: first message %+v, task %q", a.ID, msgs[0], s.str(t, "input.value"))
				}
			}
		}
	})

	t.Run("the refusal is a span event of the main agent", func(t *testing.T) {
		var found bool
		for _, ev := range main.Events {
			if ev.Name != "delegation.refused" {
				continue
			}
			at := attrs(ev.Attributes)
			if *at["reason"].StringValue != "unknown_type" || *at["subagent_type"].StringValue != "researcher" ||
				!strings.Contains(*at["message"].StringValue, "researcher") || at["tool_call_id"].StringValue == nil {
				t.Fatalf("refusal event %+v", at)
			}
			found = true
		}
		if !found {
			t.Fatalf("no delegation.refused event on %+v", main.Events)
		}
		// Its task call is a tool span with the refusal as its result, and
		// it started no agent.
		for _, s := range spans {
			if s.str(t, "gen_ai.operation.name") == "execute_tool" && strings.Contains(s.str(t, "gen_ai.tool.call.arguments"), "researcher") {
				if !strings.Contains(s.str(t, "gen_ai.tool.call.result"), "does not exist") {
					t.Fatalf("refused call's result %q", s.str(t, "gen_ai.tool.call.result"))
				}
				for _, c := range spans {
					if c.ParentSpanID == s.SpanID {
						t.Fatalf("a refused task call has a child span %q", c.Name)
					}
				}
				return
			}
		}
		t.Fatal("no span for the refused call")
	})

	t.Run("a failed child has status ERROR, and so has its task call", func(t *testing.T) {
		a := byName["hasty"][0]
		s := agentSpan(t, spans, a.ID)
		if a.Status != "failed" || s.Status == nil || s.Status.Code != 2 || !strings.Contains(s.Status.Message, "step limit") {
			t.Fatalf("status %+v (agent %s: %s)", s.Status, a.Status, a.Error)
		}
		if s.str(t, "delegation.status") != "failed" {
			t.Fatal("delegation.status")
		}
		tool := spans[s.ParentSpanID]
		if tool.Status == nil || tool.Status.Code != 2 || !strings.Contains(tool.str(t, "gen_ai.tool.call.result"), "failed") {
			t.Fatalf("task span status %+v", tool.Status)
		}
		// The main agent did not fail.
		if main.Status == nil || main.Status.Code != 1 {
			t.Fatalf("main status %+v", main.Status)
		}
	})

	t.Run("subtree tokens count every call once", func(t *testing.T) {
		total := 0
		for _, c := range tr.ModelCalls {
			total += c.InputTokens
		}
		if got := main.int(t, "delegation.subtree_tokens"); got != total {
			t.Fatalf("subtree %d, total %d", got, total)
		}
	})

	t.Run("tool spans are ordered by time and end after they start", func(t *testing.T) {
		var last int64
		for _, s := range d.ResourceSpans[0].ScopeSpans[0].Spans {
			if s.ParentSpanID != main.SpanID {
				continue
			}
			start, _ := strconv.ParseInt(s.StartTimeUnixNano, 10, 64)
			if start < last {
				t.Fatalf("span %q starts before its previous sibling", s.Name)
			}
			last = start
		}
	})

	again, _ := export(t, tr)
	if !bytes.Equal(b, again) {
		t.Fatal("two exports differ")
	}
}

func TestSummarization(t *testing.T) {
	tr := run(t, []byte(summarizing), "s3")
	_, d := export(t, tr)
	spans := checkStructure(t, tr, d)
	main := agentSpan(t, spans, "main")

	var event *mEvent
	for i, ev := range main.Events {
		if ev.Name == "summarization" {
			event = &main.Events[i]
		}
	}
	if event == nil {
		t.Fatalf("no summarization event: %+v", main.Events)
	}
	at := attrs(event.Attributes)
	if at["summary_message_id"].StringValue == nil || at["cutoff_index"].IntValue == nil || at["folded_messages"].IntValue == nil {
		t.Fatalf("summarization attributes %+v", at)
	}

	var summary mSpan
	for _, s := range spans {
		if v, ok := s.attr("delegation.purpose"); ok && *v.StringValue == "summary" {
			summary = s
		}
	}
	if summary.SpanID == "" {
		t.Fatal("no chat span for the summary call")
	}
	var out []struct {
		Parts []map[string]any `json:"parts"`
	}
	if err := json.Unmarshal([]byte(summary.str(t, "gen_ai.output.messages")), &out); err != nil ||
		!strings.Contains(out[0].Parts[0]["content"].(string), "I listed /.") {
		t.Fatalf("summary output %v %v", out, err)
	}
	if summary.int(t, "gen_ai.usage.output_tokens") == 0 {
		t.Fatal("the summary's tokens are its output")
	}
}

func TestNoTrace(t *testing.T) {
	if _, err := otlp.Export(nil); err == nil {
		t.Fatal("want an error")
	}
}

func TestCutShort(t *testing.T) {
	doc, err := os.ReadFile("../../examples/order-number.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "s4",
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})}); err != nil {
		t.Fatal(err)
	}
	// Keep the log up to the child's first model call: the call, the
	// child, its task call and the main agent are all still open.
	var cut []delegation.Event
	for _, e := range events {
		cut = append(cut, e)
		if e.Type == delegation.EventModelStarted && e.AgentID == "a1" {
			break
		}
	}
	tr, err := trace.Build(trace.Meta{ID: "s4", Status: delegation.StatusInterrupted, Scenario: sc.Raw}, cut)
	if err != nil {
		t.Fatal(err)
	}
	_, d := export(t, tr)
	spans := checkStructure(t, tr, d)
	last := cut[len(cut)-1].At.UnixNano()
	open := 0
	for _, s := range spans {
		if s.Status != nil {
			continue
		}
		open++
		if end, _ := strconv.ParseInt(s.EndTimeUnixNano, 10, 64); end != last {
			t.Fatalf("open span %q ends at %d, not with the log at %d", s.Name, end, last)
		}
	}
	if open != 4 { // main, its task call, the child, the child's call
		t.Fatalf("%d open spans, want 4", open)
	}
	child := agentSpan(t, spans, "a1")
	if spans[child.ParentSpanID].str(t, "gen_ai.tool.name") != "task" {
		t.Fatal("the open child is not under its task call")
	}
	if _, ok := child.attr("output.value"); ok {
		t.Fatal("an open agent has no output yet")
	}
}
