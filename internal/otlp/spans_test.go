package otlp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

func TestExample(t *testing.T) {
	tr := example(t)
	d := export(t, tr, otlp.Options{})
	checkStructure(t, tr, d)
	checkChildren(t, tr, d)
	main, child := d.agent(t, "main"), d.agent(t, "a1")

	t.Run("the agents' spans carry the conventions' attributes and the delegation", func(t *testing.T) {
		if has(main, "delegation.mode") {
			t.Fatal("the main agent has a mode")
		}
		if main.Status().Code() != ptrace.StatusCodeOk || child.Status().Code() != ptrace.StatusCodeOk {
			t.Fatalf("statuses %v, %v", main.Status().Code(), child.Status().Code())
		}
		if got := str(t, child, "gen_ai.provider.name"); got != "scripted" {
			t.Fatalf("provider %q", got)
		}
		if got := str(t, child, "gen_ai.agent.description"); got != "Reports facts back" {
			t.Fatalf("the child's description %q is not its spec's", got)
		}
		if str(t, main, "gen_ai.conversation.id") != "s1" || str(t, child, "gen_ai.conversation.id") != "s1" {
			t.Fatal("gen_ai.conversation.id is the session")
		}
		var sys []map[string]any
		if err := json.Unmarshal([]byte(str(t, child, "gen_ai.system_instructions")), &sys); err != nil || sys[0]["content"] != "Answer briefly." {
			t.Fatalf("the child's system instructions: %v %v", sys, err)
		}
		own := map[string]int{}
		for _, c := range tr.ModelCalls {
			own[c.AgentID] += c.InputTokens
		}
		if num(t, main, "delegation.own_tokens") != own["main"] || num(t, main, "delegation.subtree_tokens") != own["main"]+own["a1"] ||
			num(t, child, "delegation.subtree_tokens") != own["a1"] {
			t.Fatalf("tokens: own %v", own)
		}
		if got, want := num(t, child, "delegation.inherited_messages"), d.firstContext(t, tr, "a1")[0].Len(); got != want || got == 0 {
			t.Fatalf("inherited_messages %d, want %d", got, want)
		}
		for _, k := range []string{"openinference.span.kind", "input.value", "llm.input_messages.0.message.role"} {
			for _, s := range d.spans {
				if has(s, k) {
					t.Fatalf("span %q has OpenInference's %s, not asked for", s.Name(), k)
				}
			}
		}
	})

	t.Run("a scripted call is a plain chat", func(t *testing.T) {
		for _, s := range d.chats(t, "main") {
			if s.Name() != "chat" || has(s, "gen_ai.request.model") || has(s, "server.address") || has(s, "gen_ai.request.stream") {
				t.Fatalf("scripted chat span %q", s.Name())
			}
		}
	})

	t.Run("the fork child's first call holds its own message and names what it inherited", func(t *testing.T) {
		first := d.chats(t, "a1")[0]
		msgs := inputsOf(t, first)
		if len(msgs) != 1 || msgs[0].Role != "user" || !strings.Contains(msgs[0].Parts[0]["content"].(string), "Report the order number above.") {
			t.Fatalf("the child's first input: %+v", msgs)
		}
		ranges := rangesOf(t, first, "delegation.context_ranges")
		n := num(t, child, "delegation.inherited_messages")
		if ranges[0].AgentID != "main" || ranges[0].Len() != n || num(t, first, "delegation.input_messages") != n+1 {
			t.Fatalf("ranges %+v, inherited %d", ranges, n)
		}
		if str(t, first, "delegation.inputs") != "new" || !has(first, "gen_ai.system_instructions") {
			t.Fatal("by default a chat span holds the new messages, and an agent's first call its system prompt")
		}
		for _, later := range d.chats(t, "main")[1:] {
			if has(later, "gen_ai.system_instructions") {
				t.Fatal("the system prompt is written once per agent, on its first call")
			}
		}
		var out []map[string]any
		if err := json.Unmarshal([]byte(str(t, first, "gen_ai.output.messages")), &out); err != nil || out[0]["finish_reason"] != "stop" {
			t.Fatalf("output messages %v %v", out, err)
		}
		if reasons, _ := first.Attributes().Get("gen_ai.response.finish_reasons"); reasons.Slice().Len() != 1 || reasons.Slice().At(0).Str() != "stop" {
			t.Fatalf("finish reasons %v", reasons.AsRaw())
		}
	})

	t.Run("asked, the fork child's first call holds the parent's messages before its own", func(t *testing.T) {
		full := export(t, tr, otlp.Options{Inputs: otlp.InputsFull})
		first := full.chats(t, "a1")[0]
		msgs := inputsOf(t, first)
		var parent []trace.Message
		for _, m := range tr.Messages {
			if m.AgentID == "main" {
				parent = append(parent, m)
			}
		}
		n := num(t, full.agent(t, "a1"), "delegation.inherited_messages")
		if len(msgs) != n+1 || has(first, "delegation.inputs_cut") {
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
		var sys []map[string]any
		if err := json.Unmarshal([]byte(str(t, first, "gen_ai.system_instructions")), &sys); err != nil || sys[0]["content"] != "Answer briefly." {
			t.Fatalf("system instructions: %v %v", sys, err)
		}
		if num(t, first, "delegation.inherited_tokens") == 0 {
			t.Fatal("a fork's first call inherits tokens")
		}
	})

	t.Run("tool spans are the agent's, with description, arguments and result", func(t *testing.T) {
		for _, s := range d.spans {
			if op(t, s) != "execute_tool" || str(t, s, "gen_ai.tool.name") != "write_file" {
				continue
			}
			if s.ParentSpanID() != main.SpanID() || s.Kind() != ptrace.SpanKindInternal {
				t.Fatalf("write_file span %q", s.Name())
			}
			if !strings.Contains(str(t, s, "gen_ai.tool.description"), "file") {
				t.Fatalf("description %q", str(t, s, "gen_ai.tool.description"))
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(str(t, s, "gen_ai.tool.call.arguments")), &args); err != nil || args["file_path"] != "/order.md" {
				t.Fatalf("arguments: %v %v", args, err)
			}
			if !strings.Contains(str(t, s, "gen_ai.tool.call.result"), "/order.md") {
				t.Fatalf("result %q", str(t, s, "gen_ai.tool.call.result"))
			}
			return
		}
		t.Fatal("no write_file span")
	})

	t.Run("a file change is an event of the call that made it", func(t *testing.T) {
		for _, s := range d.spans {
			events := map[string]int{}
			for i := 0; i < s.Events().Len(); i++ {
				events[s.Events().At(i).Name()]++
			}
			switch {
			case op(t, s) == "execute_tool" && str(t, s, "gen_ai.tool.name") == "write_file":
				if events["files.changed"] != 1 {
					t.Fatalf("write_file span events %v", events)
				}
			case events["files.changed"] > 0:
				t.Fatalf("span %q has files.changed events %v", s.Name(), events)
			}
		}
	})

	t.Run("the same trace gives the same bytes", func(t *testing.T) {
		if again := export(t, tr, otlp.Options{}); !bytes.Equal(d.json, again.json) {
			t.Fatal("two exports differ")
		}
		// The trace as written and read back gives the same document too:
		// the export depends on nothing but the trace.
		raw, err := json.Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		var back trace.Trace
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if third := export(t, &back, otlp.Options{}); !bytes.Equal(d.json, third.json) {
			t.Fatalf("the re-read trace exports differently:\n%s\n%s", d.json, third.json)
		}
	})
}

// firstContext is the context of an agent's first model call.
func (d doc) firstContext(t testing.TB, tr *trace.Trace, agentID string) []delegation.Range {
	t.Helper()
	for _, c := range tr.ModelCalls {
		if c.AgentID == agentID {
			return c.Context
		}
	}
	t.Fatalf("no call of %s", agentID)
	return nil
}

// TestEachInputOnce: over an agent's chat spans, the new messages are each
// message its calls received, once, in order; the export holds no whole
// context twice.
func TestEachInputOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   *trace.Trace
	}{
		{"order-number", example(t)},
		{"fan-out", run(t, []byte(fanOut), "s2")},
		{"summarizing", run(t, []byte(summarizing), "s3")},
		{"long", run(t, longScenario(40), "s5")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := export(t, tc.tr, otlp.Options{})
			checkStructure(t, tc.tr, d)
			lists := map[string][]trace.Message{}
			for _, m := range tc.tr.Messages {
				lists[m.AgentID] = append(lists[m.AgentID], m)
			}
			received := map[string]map[int]bool{} // agent → own messages some call received
			for _, c := range tc.tr.ModelCalls {
				if received[c.AgentID] == nil {
					received[c.AgentID] = map[int]bool{}
				}
				for _, r := range c.Context {
					if r.AgentID == c.AgentID {
						for i := r.From; i < r.To; i++ {
							received[c.AgentID][i] = true
						}
					}
				}
			}
			for _, a := range tc.tr.Agents {
				shown := map[int]int{}
				for _, s := range d.chats(t, a.ID) {
					msgs := inputsOf(t, s)
					k := 0
					for _, r := range rangesOf(t, s, "delegation.new_ranges") {
						for i := r.From; i < r.To; i++ {
							shown[i]++
							m := lists[a.ID][i]
							if k >= len(msgs) || msgs[k].Role != m.Role {
								t.Fatalf("%s: the new ranges %v do not match the messages shown", a.ID, rangesOf(t, s, "delegation.new_ranges"))
							}
							k++
						}
					}
					if k != len(msgs) || num(t, s, "delegation.shown_messages") != k {
						t.Fatalf("%s: %d messages shown, %d named by the new ranges", a.ID, len(msgs), k)
					}
				}
				for i := range received[a.ID] {
					if shown[i] != 1 {
						t.Fatalf("%s: message %d is shown %d times as an input", a.ID, i, shown[i])
					}
				}
				for i := range shown {
					if !received[a.ID][i] {
						t.Fatalf("%s: message %d shown though no call received it", a.ID, i)
					}
				}
			}
		})
	}
}

func TestInputCap(t *testing.T) {
	tr := run(t, longScenario(30), "s6")
	const limit = 1500
	d := export(t, tr, otlp.Options{Inputs: otlp.InputsFull, InputCap: limit})
	cut := 0
	for _, s := range d.chats(t, "main") {
		in := str(t, s, "gen_ai.input.messages")
		total, shown := num(t, s, "delegation.input_messages"), num(t, s, "delegation.shown_messages")
		if !has(s, "delegation.inputs_cut") {
			if shown != total {
				t.Fatalf("an uncut input shows %d of %d messages", shown, total)
			}
			continue
		}
		cut++
		if len(in) > limit || shown >= total || num(t, s, "delegation.inputs_omitted_messages") != total-shown ||
			num(t, s, "delegation.inputs_cap_bytes") != limit {
			t.Fatalf("a cut input of %d bytes shows %d of %d messages", len(in), shown, total)
		}
		// The newest messages are the ones kept.
		msgs := inputsOf(t, s)
		if last := msgs[len(msgs)-1]; last.Role != "tool" {
			t.Fatalf("the last message kept is a %s's, not the newest (the tool result)", last.Role)
		}
	}
	if cut == 0 {
		t.Fatal("no input reached the cap")
	}
	t.Run("a newest message past the cap is cut to fit, and says so", func(t *testing.T) {
		d := export(t, tr, otlp.Options{Inputs: otlp.InputsFull, InputCap: 40})
		for _, s := range d.chats(t, "main")[1:] {
			msgs := inputsOf(t, s)
			if len(msgs) != 1 || !has(s, "delegation.inputs_cut") {
				t.Fatalf("%d messages kept within 40 bytes", len(msgs))
			}
		}
	})
}

func TestOpenInferenceWhenAsked(t *testing.T) {
	tr := example(t)
	d := export(t, tr, otlp.Options{OpenInference: true})
	checkStructure(t, tr, d)
	kinds := map[string]string{"invoke_agent": "AGENT", "chat": "LLM", "execute_tool": "TOOL"}
	for _, s := range d.spans {
		if got := str(t, s, "openinference.span.kind"); got != kinds[op(t, s)] {
			t.Fatalf("span %q: openinference.span.kind %q", s.Name(), got)
		}
		if str(t, s, "session.id") != "s1" {
			t.Fatalf("span %q: session.id", s.Name())
		}
		if op(t, s) == "chat" {
			if num(t, s, "llm.token_count.prompt") != num(t, s, "gen_ai.usage.input_tokens") {
				t.Fatalf("chat span %q: OpenInference's counts differ from the GenAI ones", s.Name())
			}
			// The flattened messages are those gen_ai.input.messages holds.
			n := len(inputsOf(t, s))
			if !has(s, "llm.input_messages."+itoa(n-1)+".message.role") || has(s, "llm.input_messages."+itoa(n)+".message.role") {
				t.Fatalf("chat span %q: flattened messages do not match its %d inputs", s.Name(), n)
			}
		}
	}
	child := d.agent(t, "a1")
	if str(t, child, "input.value") != "Report the order number above." || str(t, child, "graph.node.parent_id") != "main" {
		t.Fatalf("the child's OpenInference attributes")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestFanOut(t *testing.T) {
	tr := run(t, []byte(fanOut), "s2")
	d := export(t, tr, otlp.Options{})
	checkStructure(t, tr, d)
	checkChildren(t, tr, d)
	main := d.agent(t, "main")

	byName := map[string][]trace.Agent{}
	for _, a := range tr.Agents {
		byName[a.Name] = append(byName[a.Name], a)
	}
	if len(byName["general-purpose"]) != 2 || len(byName["hasty"]) != 1 || len(tr.Agents) != 4 {
		t.Fatalf("agents %+v", tr.Agents)
	}

	t.Run("isolated children inherit nothing and see only their task", func(t *testing.T) {
		for _, a := range byName["general-purpose"] {
			s := d.agent(t, a.ID)
			if str(t, s, "delegation.mode") != "isolated" || num(t, s, "delegation.inherited_messages") != 0 {
				t.Fatalf("%s: mode %q", a.ID, str(t, s, "delegation.mode"))
			}
			if !strings.HasPrefix(str(t, s, "gen_ai.agent.description"), "General-purpose") || s.Status().Code() != ptrace.StatusCodeOk {
				t.Fatalf("%s: status %v", a.ID, s.Status().Code())
			}
			var task []map[string]any
			_ = json.Unmarshal([]byte(str(t, s, "gen_ai.input.messages")), &task)
			first := inputsOf(t, d.chats(t, a.ID)[0])
			if first[0].Role != "user" || first[0].Parts[0]["content"] != task[0]["parts"].([]any)[0].(map[string]any)["content"] {
				t.Fatalf("%s: first message %+v, task %v", a.ID, first[0], task)
			}
		}
	})

	t.Run("the refusal is a span event of the main agent", func(t *testing.T) {
		found := false
		for i := 0; i < main.Events().Len(); i++ {
			ev := main.Events().At(i)
			if ev.Name() != "delegation.refused" {
				continue
			}
			at := ev.Attributes()
			reason, _ := at.Get("reason")
			typ, _ := at.Get("subagent_type")
			msg, _ := at.Get("message")
			if reason.Str() != "unknown_type" || typ.Str() != "researcher" || !strings.Contains(msg.Str(), "researcher") {
				t.Fatalf("refusal event %v", at.AsRaw())
			}
			found = true
		}
		if !found {
			t.Fatal("no delegation.refused event")
		}
		for _, s := range d.spans {
			if op(t, s) == "execute_tool" && strings.Contains(str(t, s, "gen_ai.tool.call.arguments"), "researcher") {
				if !strings.Contains(str(t, s, "gen_ai.tool.call.result"), "does not exist") || str(t, s, "delegation.result_kind") != "refusal" {
					t.Fatalf("refused call's result %q", str(t, s, "gen_ai.tool.call.result"))
				}
				for _, c := range d.spans {
					if c.ParentSpanID() == s.SpanID() {
						t.Fatalf("a refused task call has a child span %q", c.Name())
					}
				}
				return
			}
		}
		t.Fatal("no span for the refused call")
	})

	t.Run("a failed child has status ERROR, and so has its task call", func(t *testing.T) {
		a := byName["hasty"][0]
		s := d.agent(t, a.ID)
		if a.Status != "failed" || s.Status().Code() != ptrace.StatusCodeError || !strings.Contains(s.Status().Message(), "step limit") {
			t.Fatalf("status %v %q (agent %s: %s)", s.Status().Code(), s.Status().Message(), a.Status, a.Error)
		}
		if str(t, s, "delegation.status") != "failed" || str(t, s, "error.type") != "agent_failed" {
			t.Fatal("delegation.status or error.type")
		}
		tool := d.byID[s.ParentSpanID()]
		if tool.Status().Code() != ptrace.StatusCodeError || !strings.Contains(tool.Status().Message(), "failed") || has(tool, "gen_ai.tool.call.result") {
			t.Fatalf("task span status %v %q", tool.Status().Code(), tool.Status().Message())
		}
		if main.Status().Code() != ptrace.StatusCodeOk {
			t.Fatalf("main status %v", main.Status().Code())
		}
	})

	t.Run("subtree tokens count every call once", func(t *testing.T) {
		total := 0
		for _, c := range tr.ModelCalls {
			total += c.InputTokens
		}
		if got := num(t, main, "delegation.subtree_tokens"); got != total {
			t.Fatalf("subtree %d, total %d", got, total)
		}
	})
}

func TestSummarization(t *testing.T) {
	tr := run(t, []byte(summarizing), "s3")
	d := export(t, tr, otlp.Options{})
	checkStructure(t, tr, d)
	main := d.agent(t, "main")
	var event ptrace.SpanEvent
	found := false
	for i := 0; i < main.Events().Len(); i++ {
		if ev := main.Events().At(i); ev.Name() == "summarization" {
			event, found = ev, true
		}
	}
	if !found {
		t.Fatal("no summarization event")
	}
	for _, k := range []string{"summary_message_id", "cutoff_index", "folded_messages"} {
		if _, ok := event.Attributes().Get(k); !ok {
			t.Fatalf("summarization event without %s: %v", k, event.Attributes().AsRaw())
		}
	}
	var summary ptrace.Span
	for _, s := range d.chats(t, "main") {
		if str(t, s, "delegation.purpose") == "summary" {
			summary = s
		}
	}
	var out []struct {
		Parts []map[string]any `json:"parts"`
	}
	if err := json.Unmarshal([]byte(str(t, summary, "gen_ai.output.messages")), &out); err != nil ||
		!strings.Contains(out[0].Parts[0]["content"].(string), "I listed /.") {
		t.Fatalf("summary output %v %v", out, err)
	}
	if num(t, summary, "gen_ai.usage.output_tokens") == 0 {
		t.Fatal("the summary's tokens are its output")
	}
	if summary.Events().Len() != 1 || summary.Events().At(0).Name() != "files.changed" {
		t.Fatal("the history written to a file is an event of the summary call")
	}
	// The turn after it shows the summary as new, and not the messages it folded.
	chats := d.chats(t, "main")
	last := inputsOf(t, chats[len(chats)-1])
	if !strings.Contains(last[0].Parts[0]["content"].(string), "[Summary of the conversation so far.") {
		t.Fatalf("the turn after the summary: %+v", last)
	}
}

func TestNoSource(t *testing.T) {
	if _, err := otlp.WriteJSON(&bytes.Buffer{}, nil, otlp.Options{}); err == nil {
		t.Fatal("want an error")
	}
}

// cut plays the example and keeps its log up to the child's first model
// call: the call, the child, its task call and the main agent are open.
func cut(t *testing.T, status string) (*trace.Trace, []delegation.Event, *scenario.Scenario) {
	t.Helper()
	sc, err := scenario.Parse(mustRead(t, "../../examples/order-number.json"))
	if err != nil {
		t.Fatal(err)
	}
	events := play(t, sc, "s4", nil)
	var part []delegation.Event
	for _, e := range events {
		part = append(part, e)
		if e.Type == delegation.EventModelStarted && e.AgentID == "a1" {
			break
		}
	}
	tr, err := trace.Build(trace.Meta{ID: "s4", Status: status, Scenario: sc.Raw}, part)
	if err != nil {
		t.Fatal(err)
	}
	return tr, events, sc
}

func TestCutShort(t *testing.T) {
	tr, _, _ := cut(t, delegation.StatusInterrupted)
	d := export(t, tr, otlp.Options{})
	checkStructure(t, tr, d)
	last := tr.Events[len(tr.Events)-1].At.UnixNano()
	open := 0
	for _, s := range d.spans {
		if s.Status().Code() != ptrace.StatusCodeUnset {
			continue
		}
		open++
		if int64(s.EndTimestamp()) != last {
			t.Fatalf("open span %q ends at %d, not with the log at %d", s.Name(), s.EndTimestamp(), last)
		}
	}
	if open != 4 { // main, its task call, the child, the child's call
		t.Fatalf("%d open spans, want 4", open)
	}
	child := d.agent(t, "a1")
	if str(t, d.byID[child.ParentSpanID()], "gen_ai.tool.name") != "task" {
		t.Fatal("the open child is not under its task call")
	}
	if has(child, "gen_ai.output.messages") {
		t.Fatal("an open agent has no output yet")
	}
}

// TestRunningSession: a running session's export holds only its finished
// spans; one After its last seq, once the session ended, holds the rest;
// together they are the whole export, each span once and as it is there.
func TestRunningSession(t *testing.T) {
	part, events, sc := cut(t, "")
	early := export(t, part, otlp.Options{})
	if !early.sum.Running || early.sum.Open != 4 || early.sum.LastSeq != part.Events[len(part.Events)-1].Seq {
		t.Fatalf("summary %+v", early.sum)
	}
	for _, s := range early.spans {
		if s.Status().Code() == ptrace.StatusCodeUnset {
			t.Fatalf("a running session's export holds the unfinished span %q", s.Name())
		}
	}
	whole, err := trace.Build(trace.Meta{ID: "s4", Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	all := export(t, whole, otlp.Options{})
	rest := export(t, whole, otlp.Options{After: early.sum.LastSeq})
	if rest.sum.Sent != len(early.spans) || len(early.spans)+len(rest.spans) != len(all.spans) {
		t.Fatalf("%d spans early, %d after, %d in all (%d left as sent)", len(early.spans), len(rest.spans), len(all.spans), rest.sum.Sent)
	}
	seen := map[pcommon.SpanID]bool{}
	for _, part := range []doc{early, rest} {
		for _, s := range part.spans {
			if seen[s.SpanID()] {
				t.Fatalf("span %q sent twice", s.Name())
			}
			seen[s.SpanID()] = true
			if spanJSON(t, s) != spanJSON(t, all.byID[s.SpanID()]) {
				t.Fatalf("span %q differs from the whole export's:\n%s\n%s", s.Name(), spanJSON(t, s), spanJSON(t, all.byID[s.SpanID()]))
			}
		}
	}
	if again := export(t, whole, otlp.Options{After: all.sum.LastSeq}); len(again.spans) != 0 {
		t.Fatalf("an export after the end sends %d spans", len(again.spans))
	}
}

// endpointModel answers like an OpenAI-compatible endpoint that reports
// usage: once, with text.
type endpointModel struct{}

func (endpointModel) Generate(context.Context, *delegation.Request) (*delegation.Response, error) {
	return &delegation.Response{Content: "Hello.", Reasoning: "They asked for a greeting.",
		Usage: &delegation.Usage{PromptTokens: 321, CompletionTokens: 7, CachedTokens: 256, ReasoningTokens: 5}}, nil
}

func TestEndpointCalls(t *testing.T) {
	doc := []byte(`{"name": "remote", "description": "Greets.", "prompt": "Say hello.",
		"model": {"provider": "openai", "model": "gpt-4.1-mini", "base_url": "http://127.0.0.1:8080/v1", "temperature": 0.2, "max_tokens": 300}}`)
	tr := runWith(t, doc, "s7", endpointModel{})
	d := export(t, tr, otlp.Options{})
	checkChildren(t, tr, d)
	chat := d.chats(t, "main")[0]
	if chat.Name() != "chat gpt-4.1-mini" || str(t, chat, "gen_ai.provider.name") != "openai" || str(t, chat, "gen_ai.request.model") != "gpt-4.1-mini" {
		t.Fatalf("chat span %q", chat.Name())
	}
	if str(t, chat, "server.address") != "127.0.0.1" || num(t, chat, "server.port") != 8080 {
		t.Fatalf("server %q:%d", str(t, chat, "server.address"), num(t, chat, "server.port"))
	}
	if v, _ := chat.Attributes().Get("gen_ai.request.stream"); !v.Bool() {
		t.Fatal("the adapter streams: gen_ai.request.stream")
	}
	if v, _ := chat.Attributes().Get("gen_ai.request.temperature"); v.Double() != 0.2 || num(t, chat, "gen_ai.request.max_tokens") != 300 {
		t.Fatal("the agent's request settings: temperature, max_tokens")
	}
	t.Run("a call that does not stream says nothing of it", func(t *testing.T) {
		doc := []byte(`{"name": "remote", "prompt": "Say hello.",
			"model": {"provider": "openai", "model": "gpt-4.1-mini", "stream": false}}`)
		d := export(t, runWith(t, doc, "s9", endpointModel{}), otlp.Options{})
		chat := d.chats(t, "main")[0]
		if has(chat, "gen_ai.request.stream") || str(t, chat, "server.address") != "api.openai.com" || num(t, chat, "server.port") != 443 {
			t.Fatalf("chat span %q", chat.Name())
		}
	})
	if num(t, chat, "gen_ai.usage.input_tokens") != 321 || num(t, chat, "gen_ai.usage.output_tokens") != 7 ||
		num(t, chat, "gen_ai.usage.cache_read.input_tokens") != 256 || num(t, chat, "gen_ai.usage.reasoning.output_tokens") != 5 {
		t.Fatal("gen_ai.usage is what the endpoint reported, cached and reasoning tokens included")
	}
	if out := str(t, chat, "gen_ai.output.messages"); !strings.Contains(out, `"parts":[{"type":"reasoning","content":"They asked for a greeting."},{"type":"text","content":"Hello."}]`) {
		t.Fatalf("the reasoning is its own part, first: %s", out)
	}
	if num(t, chat, "delegation.input_tokens") == 321 || num(t, chat, "delegation.input_tokens") != tr.ModelCalls[0].InputTokens {
		t.Fatal("delegation.input_tokens is our count")
	}
	if main := d.agent(t, "main"); str(t, main, "gen_ai.agent.description") != "Greets." || str(t, main, "gen_ai.request.model") != "gpt-4.1-mini" {
		t.Fatal("the main agent's description is the scenario's")
	}
	validateMessages(t, chat)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// longScenario is the benchmarks' scenario: a main agent of n tool-call
// steps, then an isolated child of n/4.
func longScenario(n int) []byte { return benchdata.LongScenario(n, max(n/4, 2)) }

// anthropicReply answers as the Anthropic adapter reports: the prompt
// cache's reads and writes.
type anthropicReply struct{}

func (anthropicReply) Generate(context.Context, *delegation.Request) (*delegation.Response, error) {
	return &delegation.Response{Content: "Hello.",
		Usage: &delegation.Usage{PromptTokens: 400, CompletionTokens: 7, CachedTokens: 256, CacheCreationTokens: 64}}, nil
}

func TestAnthropicCalls(t *testing.T) {
	doc := []byte(`{"name": "remote", "prompt": "Say hello.",
		"model": {"provider": "anthropic", "model": "claude-sonnet-4-5", "stream": false}}`)
	d := export(t, runWith(t, doc, "s11", anthropicReply{}), otlp.Options{})
	chat := d.chats(t, "main")[0]
	if str(t, chat, "gen_ai.provider.name") != "anthropic" || str(t, chat, "gen_ai.request.model") != "claude-sonnet-4-5" {
		t.Fatalf("chat span %q: provider %q", chat.Name(), str(t, chat, "gen_ai.provider.name"))
	}
	if num(t, chat, "gen_ai.usage.cache_read.input_tokens") != 256 || num(t, chat, "gen_ai.usage.cache_creation.input_tokens") != 64 {
		t.Fatal("the cache's reads and writes")
	}
	t.Run("the cache writes' cost, exported and imported back", cacheWriteCostRoundTrips)
	// OpenInference's names for them, which the import reads back.
	oi := export(t, runWith(t, doc, "s12", anthropicReply{}), otlp.Options{OpenInference: true}).chats(t, "main")[0]
	if num(t, oi, "llm.token_count.prompt_details.cache_read") != 256 || num(t, oi, "llm.token_count.prompt_details.cache_write") != 64 {
		t.Fatal("the cache's reads and writes, in OpenInference's names")
	}
}

// cacheWriteCostRoundTrips: an Anthropic call's cost of writing the cache
// (64 tokens at claude-sonnet-4's $3.75 a million, the price table's) is on
// its chat span as delegation.cost.cache_write and in OpenInference's
// llm.cost.prompt, and the session imported back costs it the same, from the
// exported price and usage.
func cacheWriteCostRoundTrips(t *testing.T) {
	doc := []byte(`{"name": "remote", "prompt": "Say hello.",
		"model": {"provider": "anthropic", "model": "claude-sonnet-4-20250514", "stream": false}}`)
	tr := runWith(t, doc, "s13", anthropicReply{})
	c := tr.ModelCalls[0].Cost
	if c == nil || math.Abs(c.CacheWrite-64*3.75/1e6) > 1e-12 {
		t.Fatalf("the call's cost %+v: want 64 tokens written at $3.75 a million", c)
	}
	chat := export(t, tr, otlp.Options{OpenInference: true}).chats(t, "main")[0]
	if v, ok := chat.Attributes().Get("delegation.cost.cache_write"); !ok {
		t.Fatal("no delegation.cost.cache_write on the chat span")
	} else if v.Double() != c.CacheWrite {
		t.Fatalf("delegation.cost.cache_write = %v, want %v", v.Double(), c.CacheWrite)
	}
	if v, _ := chat.Attributes().Get("llm.cost.prompt"); math.Abs(v.Double()-(c.Input+c.CachedInput+c.CacheWrite)) > 1e-12 {
		t.Fatalf("llm.cost.prompt = %v: the cache writes are input too (%+v)", v.AsRaw(), c)
	}
	var js strings.Builder
	if _, err := otlp.WriteJSON(&js, trace.SourceOf(tr), otlp.Options{}); err != nil {
		t.Fatal(err)
	}
	back, err := session.OTLPTraces([]byte(js.String()), session.FormatOTLPJSON)
	if err != nil || len(back) != 1 || len(back[0].ModelCalls) != 1 {
		t.Fatalf("import: %v, %d sessions", err, len(back))
	}
	if got := back[0].ModelCalls[0].Cost; got == nil || *got != *c {
		t.Fatalf("imported back the call costs %+v, exported %+v", got, c)
	}
}

// TestFromElsewhereNeverScripted: a received or recorded session's export
// names the provider its origin says, else "unknown" — never the scripted
// model, which tells an import the usage is the studio's own count and
// would drop what the endpoint reported. Its calls carry the usage the
// endpoint reported and none of our count, and none of the scenario's
// endpoint or request settings: our engine made none of them. The log's
// endpoint is written whole.
func TestFromElsewhereNeverScripted(t *testing.T) {
	remote := []byte(`{"name": "remote", "prompt": "Say hello.",
		"model": {"provider": "openai", "model": "gpt-4.1-mini", "base_url": "http://127.0.0.1:8080/v1", "temperature": 0.2}}`)
	for _, tc := range []struct {
		name   string
		tr     *trace.Trace
		origin delegation.Origin
		want   string
	}{
		{"recorded through /v1/messages", example(t), delegation.Origin{Kind: delegation.OriginProxy, Provider: "anthropic"}, "anthropic"},
		{"received, naming none", example(t), delegation.Origin{Kind: delegation.OriginOTLP}, "unknown"},
		{"received from our scripted export", example(t), delegation.Origin{Kind: delegation.OriginOTLP, Provider: "scripted"}, "unknown"},
		{"recorded, a scenario beside it", runWith(t, remote, "s12", endpointModel{}), delegation.Origin{Kind: delegation.OriginProxy, Provider: "openai"}, "openai"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := tc.tr
			tr.Session.Origin = &tc.origin
			tr.ModelCalls[0].Usage = &delegation.Usage{PromptTokens: 41, CompletionTokens: 3}
			editFirst(t, tr, delegation.EventAgentStarted, func(d map[string]any) {
				d["endpoint"] = "https://user:secret@llm.example:8443/v1?key=sk-1#x"
			})
			d := export(t, tr, otlp.Options{OpenInference: true})
			for _, sp := range d.spans {
				for _, key := range []string{"gen_ai.provider.name", "llm.provider"} {
					if has(sp, key) && str(t, sp, key) != tc.want {
						t.Errorf("span %q: %s %q, want %q", sp.Name(), key, str(t, sp, key), tc.want)
					}
				}
			}
			for i, chat := range d.chats(t, "main") {
				reported := has(chat, "gen_ai.usage.input_tokens") || has(chat, "llm.token_count.prompt")
				if i == 0 && (num(t, chat, "gen_ai.usage.input_tokens") != 41 || num(t, chat, "gen_ai.usage.output_tokens") != 3) {
					t.Errorf("call 0: the endpoint's usage is lost: %s", spanJSON(t, chat))
				}
				if i > 0 && reported {
					t.Errorf("call %d: usage no endpoint reported: %s", i, spanJSON(t, chat))
				}
				if has(chat, "gen_ai.request.stream") || has(chat, "gen_ai.request.temperature") {
					t.Errorf("call %d: request settings our engine did not send", i)
				}
				if str(t, chat, "server.address") != "llm.example" || num(t, chat, "server.port") != 8443 ||
					str(t, chat, "delegation.endpoint") != "https://llm.example:8443/v1" {
					t.Errorf("call %d: the log's endpoint: %s", i, spanJSON(t, chat))
				}
			}
		})
	}
}

// editFirst changes the data of a trace's first event of a type, as if it
// had been logged so.
func editFirst(t *testing.T, tr *trace.Trace, typ delegation.EventType, edit func(map[string]any)) {
	t.Helper()
	for i, ev := range tr.Events {
		if ev.Type != typ {
			continue
		}
		if err := ev.Encode(); err != nil {
			t.Fatal(err)
		}
		var d map[string]any
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		tr.Events[i].Data, tr.Events[i].Payload = b, nil
		return
	}
	t.Fatalf("no %s event", typ)
}
