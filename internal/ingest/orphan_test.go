package ingest_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
)

// genTrace builds GenAI spans by hand: a main agent that delegates "do X"
// to a helper, whose own model call was given a rephrased task (so its
// content alone does not say whose child it is) and says no agent name.
type genTrace struct {
	td    ptrace.Traces
	spans ptrace.SpanSlice
}

func newGenTrace() *genTrace {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "hand-made")
	return &genTrace{td: td, spans: rs.ScopeSpans().AppendEmpty().Spans()}
}

func sid(n byte) pcommon.SpanID { return pcommon.SpanID{0, 0, 0, 0, 0, 0, 0, n} }

func (g *genTrace) span(id, parent byte, name string, start, end int, attrs map[string]string) {
	sp := g.spans.AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(sid(id))
	if parent != 0 {
		sp.SetParentSpanID(sid(parent))
	}
	sp.SetName(name)
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(start) * time.Second)))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Duration(end) * time.Second)))
	for k, v := range attrs {
		sp.Attributes().PutStr(k, v)
	}
}

func msgs(v ...any) string { b, _ := json.Marshal(v); return string(b) }

func text(role, s string) map[string]any {
	return map[string]any{"role": role, "parts": []any{map[string]any{"type": "text", "content": s}}}
}

func delegatingTrace() []ingest.Span {
	g := newGenTrace()
	call := map[string]any{"role": "assistant", "parts": []any{map[string]any{"type": "tool_call", "id": "t1", "name": "task",
		"arguments": map[string]string{"description": "do X", "subagent_type": "helper"}}}}
	result := map[string]any{"role": "tool", "parts": []any{map[string]any{"type": "tool_call_response", "id": "t1", "response": "X done"}}}
	g.span(1, 0, "invoke_agent main", 0, 10, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "main"})
	g.span(2, 1, "chat m", 1, 2, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.input.messages": msgs(text("user", "go")),
		"gen_ai.output.messages": msgs(call)})
	g.span(3, 1, "execute_tool task", 3, 7, map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "task",
		"gen_ai.tool.call.id": "t1", "gen_ai.tool.call.result": "X done"})
	g.span(4, 3, "invoke_agent helper", 3, 6, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})
	g.span(5, 4, "chat m", 4, 5, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.input.messages": msgs(text("user", "Handle the thing called X.")),
		"gen_ai.output.messages": msgs(text("assistant", "X done"))})
	g.span(6, 1, "chat m", 8, 9, map[string]string{"gen_ai.operation.name": "chat",
		"gen_ai.input.messages": msgs(text("user", "go"), call, result), "gen_ai.output.messages": msgs(text("assistant", "ok"))})
	g.span(7, 9, "retrieve", 1, 2, map[string]string{"db.system": "none"}) // its parent never comes
	b := ingest.Group(g.td)
	return b.Traces[b.Order[0]]
}

func byID(spans []ingest.Span, ids ...byte) []ingest.Span {
	var out []ingest.Span
	for _, id := range ids {
		for _, sp := range spans {
			if sp.ID == sid(id).String() {
				out = append(out, sp)
			}
		}
	}
	return out
}

func TestSpanWaitsForItsParent(t *testing.T) {
	spans := delegatingTrace()
	sink := &collect{}
	tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
	tr.Add(byID(spans, 2))
	tr.Add(byID(spans, 5)) // the helper's call: nothing says whose it is yet
	agents := func() int {
		n := 0
		for _, ev := range sink.events {
			if ev.Type == delegation.EventAgentStarted {
				n++
			}
		}
		return n
	}
	if n := agents(); n != 1 {
		t.Fatalf("%d agents before the helper's span arrived; its call should wait", n)
	}
	tr.Add(byID(spans, 4)) // its agent span: a helper, under a span still to come
	tr.Add(byID(spans, 3, 6, 7, 1))
	if tr.Complete() {
		t.Error("a span's parent never came: the trace is not complete")
	}
	tr.Close("", "", time.Time{})
	got := sink.build(t)
	var helper *struct{ parent, mode, task string }
	for _, a := range got.Agents {
		if a.Name == "helper" {
			helper = &struct{ parent, mode, task string }{deref(a.ParentID), deref(a.Mode), deref(a.TaskCallID)}
		}
	}
	if helper == nil || *helper != (struct{ parent, mode, task string }{"main", "isolated", "t1"}) {
		t.Fatalf("helper = %+v; agents %+v", helper, got.Agents)
	}
	orphans := 0
	for _, ev := range got.Events {
		if ev.Type == delegation.EventSpanReceived {
			var d delegation.SpanReceived
			_ = json.Unmarshal(ev.Data, &d)
			if d.Orphan && d.Name == "retrieve" {
				orphans++
			}
		}
	}
	if orphans != 1 {
		t.Errorf("the span whose parent never came should be kept as an orphan")
	}
}

func TestSpanWhoseParentNeverComes(t *testing.T) {
	spans := delegatingTrace()
	sink := &collect{}
	tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
	tr.Add(byID(spans, 2, 5, 6)) // neither the agent spans nor the tool span ever arrive
	if tr.Complete() {
		t.Fatal("complete without its root")
	}
	tr.Close("", "", time.Time{})
	got := sink.build(t)
	if got.Session.Status != delegation.StatusInterrupted {
		t.Errorf("status = %s: a trace whose root never came did not end", got.Session.Status)
	}
	var names []string
	for _, a := range got.Agents {
		names = append(names, fmt.Sprintf("%s:%s:%s", a.Name, deref(a.ParentID), deref(a.TaskCallID)))
	}
	// The helper's call is shown, on an agent of its own: nothing tied it
	// to the task call.
	if fmt.Sprint(names) != "[main:-:- unattached:main:-]" {
		t.Errorf("agents = %v", names)
	}
}

// TestReceivedResponseKeptAsSent: what a received chat span says of its
// response (gen_ai.response.id, .model, .finish_reasons) is what its call
// records, as sent; a span that says none of it records none.
func TestReceivedResponseKeptAsSent(t *testing.T) {
	g := newGenTrace()
	g.span(1, 0, "invoke_agent main", 0, 10, map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "main"})
	g.span(2, 1, "chat gpt-x", 1, 2, map[string]string{"gen_ai.operation.name": "chat", "gen_ai.input.messages": msgs(text("user", "go")),
		"gen_ai.output.messages": msgs(text("assistant", "ok")), "gen_ai.response.id": "chatcmpl-Q1", "gen_ai.response.model": "gpt-x-2026"})
	g.spans.At(1).Attributes().PutEmptySlice("gen_ai.response.finish_reasons").AppendEmpty().SetStr("tool_calls")
	g.span(3, 1, "chat gpt-x", 3, 4, map[string]string{"gen_ai.operation.name": "chat",
		"gen_ai.input.messages": msgs(text("user", "go"), text("assistant", "ok"), text("user", "again")), "gen_ai.output.messages": msgs(text("assistant", "ok"))})
	b := ingest.Group(g.td)
	sink := &collect{}
	tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
	tr.Add(b.Traces[b.Order[0]])
	tr.Close("", "", time.Time{})
	got := sink.build(t)
	if len(got.ModelCalls) != 2 {
		t.Fatalf("%d calls, want 2", len(got.ModelCalls))
	}
	if r := got.ModelCalls[0].Response; r == nil || *r != (delegation.ResponseMeta{ID: "chatcmpl-Q1", Model: "gpt-x-2026", FinishReason: "tool_calls"}) {
		t.Errorf("the first call's response: %+v", r)
	}
	if r := got.ModelCalls[1].Response; r != nil {
		t.Errorf("a span that says nothing of its response recorded %+v", r)
	}
}
