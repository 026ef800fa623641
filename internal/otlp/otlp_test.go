package otlp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// run plays a scenario and builds its trace.
func run(t testing.TB, doc []byte, id string) *trace.Trace {
	t.Helper()
	return runWith(t, doc, id, nil)
}

func runWith(t testing.TB, doc []byte, id string, model delegation.Model) *trace.Trace {
	t.Helper()
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	events := play(t, sc, id, model)
	tr, err := trace.Build(trace.Meta{ID: id, Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func play(t testing.TB, sc *scenario.Scenario, id string, model delegation.Model) []delegation.Event {
	t.Helper()
	var events []delegation.Event
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: id, Model: model,
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})}); err != nil {
		t.Fatal(err)
	}
	return events
}

func example(t testing.TB) *trace.Trace {
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

// doc is an export read back by the Collector's own decoders: the JSON
// through ptrace.JSONUnmarshaler and the protobuf through
// ptrace.ProtoUnmarshaler, which must agree.
type doc struct {
	json   []byte
	traces ptrace.Traces
	sum    otlp.Summary
	spans  []ptrace.Span
	byID   map[pcommon.SpanID]ptrace.Span
}

func export(t testing.TB, tr *trace.Trace, opts otlp.Options) doc {
	t.Helper()
	return exportSource(t, trace.SourceOf(tr), opts)
}

func exportSource(t testing.TB, src otlp.Source, opts otlp.Options) doc {
	t.Helper()
	var jb, pb bytes.Buffer
	sum, err := otlp.WriteJSON(&jb, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	psum, err := otlp.WriteProto(&pb, src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum != psum {
		t.Fatalf("the summaries differ: %+v and %+v", sum, psum)
	}
	fromJSON, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(jb.Bytes())
	if err != nil {
		t.Fatalf("the Collector cannot read the JSON: %v\n%s", err, jb.Bytes())
	}
	fromProto, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(pb.Bytes())
	if err != nil {
		t.Fatalf("the Collector cannot read the protobuf: %v", err)
	}
	d := doc{json: jb.Bytes(), traces: fromJSON, sum: sum, byID: map[pcommon.SpanID]ptrace.Span{}}
	d.spans = spansOf(fromJSON)
	// Both encodings carry the same spans (the protobuf in chunks of
	// resourceSpans): compared span by span, as the Collector encodes them.
	pspans := spansOf(fromProto)
	if len(pspans) != len(d.spans) {
		t.Fatalf("%d spans in the JSON, %d in the protobuf", len(d.spans), len(pspans))
	}
	for i := range pspans {
		if a, b := spanJSON(t, d.spans[i]), spanJSON(t, pspans[i]); a != b {
			t.Fatalf("span %d differs between the encodings:\njson:  %s\nproto: %s", i, a, b)
		}
	}
	for _, s := range d.spans {
		if _, dup := d.byID[s.SpanID()]; dup {
			t.Fatalf("span id %s twice", s.SpanID())
		}
		d.byID[s.SpanID()] = s
	}
	if sum.Spans != len(d.spans) {
		t.Fatalf("the summary says %d spans, the document has %d", sum.Spans, len(d.spans))
	}
	return d
}

func spansOf(td ptrace.Traces) []ptrace.Span {
	var out []ptrace.Span
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j)
			for k := 0; k < ss.Spans().Len(); k++ {
				out = append(out, ss.Spans().At(k))
			}
		}
	}
	return out
}

func spanJSON(t testing.TB, s ptrace.Span) string {
	t.Helper()
	td := ptrace.NewTraces()
	s.CopyTo(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty())
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func str(t testing.TB, s ptrace.Span, k string) string {
	t.Helper()
	v, ok := s.Attributes().Get(k)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		t.Fatalf("span %q: no string attribute %s", s.Name(), k)
	}
	return v.Str()
}

func num(t testing.TB, s ptrace.Span, k string) int {
	t.Helper()
	v, ok := s.Attributes().Get(k)
	if !ok || v.Type() != pcommon.ValueTypeInt {
		t.Fatalf("span %q: no int attribute %s", s.Name(), k)
	}
	return int(v.Int())
}

func has(s ptrace.Span, k string) bool {
	_, ok := s.Attributes().Get(k)
	return ok
}

func op(t testing.TB, s ptrace.Span) string { return str(t, s, "gen_ai.operation.name") }

func (d doc) agent(t testing.TB, id string) ptrace.Span {
	t.Helper()
	for _, s := range d.spans {
		if v, ok := s.Attributes().Get("gen_ai.agent.id"); ok && v.Str() == id && op(t, s) == "invoke_agent" {
			return s
		}
	}
	t.Fatalf("no invoke_agent span for %s", id)
	return ptrace.Span{}
}

// chats returns an agent's chat spans in the order of their calls.
func (d doc) chats(t testing.TB, agentID string) []ptrace.Span {
	t.Helper()
	var out []ptrace.Span
	for _, s := range d.spans {
		if op(t, s) == "chat" && str(t, s, "delegation.agent_id") == agentID {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartTimestamp() < out[j].StartTimestamp() })
	return out
}

var hex32 = regexp.MustCompile(`"traceId":"[0-9a-f]{32}","spanId":"[0-9a-f]{16}"`)

// checkStructure checks what every export of a finished session holds.
func checkStructure(t *testing.T, tr *trace.Trace, d doc) {
	t.Helper()
	if d.traces.ResourceSpans().Len() != 1 {
		t.Fatalf("%d resourceSpans", d.traces.ResourceSpans().Len())
	}
	res := d.traces.ResourceSpans().At(0).Resource().Attributes()
	if v, _ := res.Get("service.name"); v.Str() != "delegation-studio" {
		t.Fatalf("service.name = %q", v.Str())
	}
	if v, _ := res.Get("session.id"); v.Str() != tr.Session.ID {
		t.Fatalf("resource session.id = %q", v.Str())
	}
	if n := strings.Count(string(d.json), `"traceId"`); n != len(d.spans) || len(hex32.FindAllIndex(d.json, -1)) != n {
		t.Fatal("ids are not lowercase hex of OTLP/JSON")
	}
	traceID := d.spans[0].TraceID()
	var roots []ptrace.Span
	for _, s := range d.spans {
		if s.TraceID() != traceID || s.TraceID().IsEmpty() {
			t.Fatalf("span %q: trace id %s", s.Name(), s.TraceID())
		}
		if s.ParentSpanID().IsEmpty() {
			roots = append(roots, s)
		} else if _, ok := d.byID[s.ParentSpanID()]; !ok {
			t.Fatalf("span %q: parent %s is not in the document", s.Name(), s.ParentSpanID())
		}
		if s.EndTimestamp() < s.StartTimestamp() || s.StartTimestamp() == 0 {
			t.Fatalf("span %q: start %d, end %d", s.Name(), s.StartTimestamp(), s.EndTimestamp())
		}
		if !has(s, "gen_ai.provider.name") && op(t, s) != "execute_tool" {
			t.Fatalf("span %q has no gen_ai.provider.name (required)", s.Name())
		}
		validateMessages(t, s)
	}
	if len(roots) != 1 {
		t.Fatalf("%d roots", len(roots))
	}
	if r := roots[0]; r.Name() != "invoke_agent main" || str(t, r, "gen_ai.agent.id") != "main" || r.Kind() != ptrace.SpanKindInternal {
		t.Fatalf("root = %q", r.Name())
	}
	// One span per agent, per model call, per tool call.
	count := map[string]int{}
	for _, s := range d.spans {
		count[op(t, s)]++
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
	// Usage tokens on chat spans, and only there; the scripted model's
	// count is our tokenizer's.
	calls := map[string]trace.ModelCall{}
	for _, c := range tr.ModelCalls {
		calls[c.ID] = c
	}
	for _, s := range d.spans {
		if op(t, s) != "chat" {
			if has(s, "gen_ai.usage.input_tokens") {
				t.Fatalf("span %q carries usage tokens", s.Name())
			}
			continue
		}
		if s.Kind() != ptrace.SpanKindClient {
			t.Fatalf("chat span %q: kind %v", s.Name(), s.Kind())
		}
		if got := str(t, s, "gen_ai.conversation.id"); got != tr.Session.ID {
			t.Fatalf("chat span conversation id %q", got)
		}
		if num(t, s, "gen_ai.usage.input_tokens") != num(t, s, "delegation.input_tokens") {
			t.Fatalf("chat span %q: a scripted call's usage is our count", s.Name())
		}
	}
}

// The official schemas of the GenAI message attributes (testdata).
var schemas = map[string]string{
	"gen_ai.input.messages":      "gen-ai-input-messages.json",
	"gen_ai.output.messages":     "gen-ai-output-messages.json",
	"gen_ai.system_instructions": "gen-ai-system-instructions.json",
}

var compiled = map[string]*jsonschema.Schema{}

func validateMessages(t testing.TB, s ptrace.Span) {
	t.Helper()
	if err := messageErrors(s); err != nil {
		t.Fatal(err)
	}
}

// messageErrors validates a span's GenAI message attributes against their
// schemas.
func messageErrors(s ptrace.Span) error {
	for attr, file := range schemas {
		v, ok := s.Attributes().Get(attr)
		if !ok {
			continue
		}
		sch := compiled[attr]
		if sch == nil {
			c := jsonschema.NewCompiler()
			c.DefaultDraft(jsonschema.Draft2020)
			f, err := os.Open(filepath.Join("testdata", "genai-schemas", file))
			if err != nil {
				return err
			}
			raw, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				return err
			}
			if err := c.AddResource(file, raw); err != nil {
				return err
			}
			if sch, err = c.Compile(file); err != nil {
				return err
			}
			compiled[attr] = sch
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(v.Str()))
		if err != nil {
			return fmt.Errorf("span %q: %s is not JSON: %v", s.Name(), attr, err)
		}
		if err := sch.Validate(inst); err != nil {
			return fmt.Errorf("span %q: %s does not follow its schema: %v\n%s", s.Name(), attr, err, v.Str())
		}
	}
	return nil
}

func TestTheSchemasCatchABadMessage(t *testing.T) {
	for attr, bad := range map[string]string{
		"gen_ai.output.messages":     `[{"role":"assistant","parts":[{"type":"text","content":"hi"}]}]`, // no finish_reason
		"gen_ai.input.messages":      `[{"role":"user","parts":"hi"}]`,
		"gen_ai.system_instructions": `[{"content":"Be brief."}]`, // a part without its type
	} {
		td := ptrace.NewTraces()
		s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetName("bad")
		s.Attributes().PutStr(attr, bad)
		if err := messageErrors(s); err == nil || !strings.Contains(err.Error(), "does not follow its schema") {
			t.Fatalf("%s %s: %v", attr, bad, err)
		}
	}
}

// checkChildren checks that each child hangs under its task call's span and
// that the span's result is the receipt.
func checkChildren(t *testing.T, tr *trace.Trace, d doc) {
	t.Helper()
	receipts := map[string]trace.Message{}
	for _, m := range tr.Messages {
		if m.Kind == string(delegation.KindReceipt) {
			receipts[m.AgentID+"/"+*m.ToolCallID] = m
		}
	}
	for _, a := range tr.Agents {
		s := d.agent(t, a.ID)
		if a.ParentID == nil {
			continue
		}
		tool, ok := d.byID[s.ParentSpanID()]
		if !ok || op(t, tool) != "execute_tool" || str(t, tool, "gen_ai.tool.name") != "task" ||
			str(t, tool, "gen_ai.tool.call.id") != *a.TaskCallID {
			t.Fatalf("agent %s: its parent span is not its task call %s", a.ID, *a.TaskCallID)
		}
		if p := d.agent(t, *a.ParentID); tool.ParentSpanID() != p.SpanID() {
			t.Fatalf("agent %s: its task span is not under its parent's span", a.ID)
		}
		receipt, ok := receipts[*a.ParentID+"/"+*a.TaskCallID]
		if !ok {
			t.Fatalf("agent %s: no receipt", a.ID)
		}
		if receipt.IsError {
			if tool.Status().Message() != receipt.Content {
				t.Fatalf("agent %s: failed task's status %q, receipt %q", a.ID, tool.Status().Message(), receipt.Content)
			}
		} else if got := str(t, tool, "gen_ai.tool.call.result"); got != receipt.Content {
			t.Fatalf("agent %s: task result %q, receipt %q", a.ID, got, receipt.Content)
		}
		if got := num(t, s, "delegation.receipt_tokens"); got != receipt.Tokens {
			t.Fatalf("agent %s: receipt_tokens %d, want %d", a.ID, got, receipt.Tokens)
		}
		if str(t, s, "delegation.mode") != *a.Mode || str(t, s, "delegation.status") != a.Status {
			t.Fatalf("agent %s: mode or status wrong", a.ID)
		}
	}
}

// inputsOf decodes a span's gen_ai.input.messages.
func inputsOf(t testing.TB, s ptrace.Span) []struct {
	Role  string           `json:"role"`
	Parts []map[string]any `json:"parts"`
} {
	t.Helper()
	var msgs []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	}
	if err := json.Unmarshal([]byte(str(t, s, "gen_ai.input.messages")), &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func rangesOf(t testing.TB, s ptrace.Span, attr string) []delegation.Range {
	t.Helper()
	var rs []delegation.Range
	if err := json.Unmarshal([]byte(str(t, s, attr)), &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestCachedPrefixAndCost(t *testing.T) {
	raw, err := os.ReadFile("../../examples/order-number.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	m["pricing"] = map[string]any{"input": 2.5, "cached_input": 1.25, "output": 10}
	raw, _ = json.Marshal(m)
	tr := run(t, raw, "s1")
	d := export(t, tr, otlp.Options{OpenInference: true})
	total := 0.0
	for i, c := range d.chats(t, "main") {
		call := tr.ModelCalls[0]
		for _, x := range tr.ModelCalls {
			if x.AgentID == "main" && x.Index == i {
				call = x
			}
		}
		if got := num(t, c, "delegation.cached_prefix_tokens"); got != call.CachedPrefixTokens {
			t.Fatalf("chat %d: cached prefix %d, want %d", i, got, call.CachedPrefixTokens)
		}
		if call.CachedPrefixTokens > 0 && num(t, c, "gen_ai.usage.cache_read.input_tokens") != call.CachedPrefixTokens {
			t.Fatalf("chat %d: the scripted provider's cache read is not its estimate", i)
		}
		v, ok := c.Attributes().Get("gen_ai.usage.cost")
		if !ok || v.Type() != pcommon.ValueTypeDouble || v.Double() != call.Cost.Total {
			t.Fatalf("chat %d: gen_ai.usage.cost = %v, want %v", i, v.AsRaw(), call.Cost.Total)
		}
		if w, ok := c.Attributes().Get("llm.cost.total"); !ok || w.Double() != call.Cost.Total {
			t.Fatalf("chat %d: llm.cost.total = %v", i, w.AsRaw())
		}
		if str(t, c, "delegation.cost.basis") != "estimate" {
			t.Fatalf("chat %d: basis", i)
		}
	}
	for _, c := range tr.ModelCalls {
		total += c.Cost.Total
	}
	main := d.agent(t, "main")
	v, ok := main.Attributes().Get("delegation.subtree_cost")
	if !ok || fmt.Sprintf("%.12f", v.Double()) != fmt.Sprintf("%.12f", total) {
		t.Fatalf("main's subtree cost = %v, want %v", v.AsRaw(), total)
	}
	if num(t, main, "delegation.subtree_cached_tokens") <= num(t, main, "delegation.own_cached_tokens")-1 {
		t.Fatal("subtree cached tokens below own")
	}
}
