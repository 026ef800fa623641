package ingest_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/trace"
)

// The inference as a recording endpoint uses it: requests and answers only,
// no tool spans, tool-call ids absent.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func user(s string) ingest.Message { return ingest.Message{Role: delegation.RoleUser, Content: s} }
func asst(s string, calls ...delegation.ToolCall) ingest.Message {
	return ingest.Message{Role: delegation.RoleAssistant, Content: s, ToolCalls: calls}
}
func toolMsg(s string) ingest.Message { return ingest.Message{Role: delegation.RoleTool, Content: s} }
func task(desc, typ string) delegation.ToolCall {
	args, _ := json.Marshal(map[string]string{"description": desc, "subagent_type": typ})
	return delegation.ToolCall{Name: "task", Args: args}
}

type recording struct {
	s    *ingest.Session
	sink *collect
	at   time.Time
}

func newRecording() *recording {
	sink := &collect{}
	return &recording{s: ingest.New(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink}), sink: sink, at: t0}
}

// call records a call that received in and answered out; it returns the
// agent it was placed on.
func (r *recording) call(system string, in []ingest.Message, out ingest.Message) ingest.AgentRef {
	r.at = r.at.Add(time.Second)
	turn := r.s.StartCall(ingest.CallInput{System: system, Input: in, At: r.at})
	r.at = r.at.Add(time.Second)
	turn.Finish(ingest.CallOutput{Output: &out, At: r.at})
	return turn.Agent()
}

func (r *recording) trace(t *testing.T) *trace.Trace {
	t.Helper()
	r.s.Finish(delegation.StatusDone, "", nil, r.at.Add(time.Second))
	return r.sink.build(t)
}

func TestInferFromRequestsAlone(t *testing.T) {
	r := newRecording()
	prompt := user("Find the order, then report it.")
	c1 := asst("", task("Look up order A-7731.", "researcher"), task("Summarize the above.", "forker"))
	if a := r.call("You are main.", []ingest.Message{prompt}, c1); a.ID != "main" {
		t.Fatalf("first call on %+v", a)
	}
	// The isolated child: its task alone.
	iso := r.call("You research.", []ingest.Message{user("Look up order A-7731.")}, asst("", delegation.ToolCall{Name: "ls", Args: json.RawMessage(`{"path":"/"}`)}))
	if iso.ParentID != "main" || iso.Mode != delegation.ModeIsolated || iso.Name != "researcher" || iso.TaskCallID == "" {
		t.Fatalf("isolated child = %+v", iso)
	}
	// The fork: the parent's history without the in-flight answer, then its task.
	fork := r.call("You are main.", []ingest.Message{prompt, user("You continue as a subagent.\n\nSummarize the above.")}, asst("A summary."))
	if fork.ParentID != "main" || fork.Mode != delegation.ModeFork || fork.Name != "forker" {
		t.Fatalf("fork child = %+v", fork)
	}
	// The isolated child goes on: its previous request, its answer, the result.
	again := r.call("You research.", []ingest.Message{user("Look up order A-7731."), asst("", delegation.ToolCall{Name: "ls", Args: json.RawMessage(`{"path": "/"}`)}), toolMsg("/orders.md")}, asst("Order A-7731 is late."))
	if again.ID != iso.ID {
		t.Fatalf("the child's second call went to %+v", again)
	}
	// The parent's next request holds both receipts, ids or not.
	last := r.call("You are main.", []ingest.Message{prompt, c1, toolMsg("Order A-7731 is late."), toolMsg("A summary.")}, asst("Done."))
	if last.ID != "main" {
		t.Fatalf("the parent's last call went to %+v", last)
	}
	tr := r.trace(t)
	lists := trace.Lists(tr)
	main := lists["main"]
	if got := fmt.Sprintf("%s %s %s", main[2].Kind, main[3].Kind, deref(main[2].ToolCallID)); got != "receipt receipt "+iso.TaskCallID {
		t.Errorf("receipts: %s", got)
	}
	var fin []delegation.DelegationFinished
	for _, ev := range tr.Events {
		if ev.Type == delegation.EventDelegationFinished {
			var d delegation.DelegationFinished
			_ = json.Unmarshal(ev.Data, &d)
			fin = append(fin, d)
		}
	}
	if len(fin) != 2 || fin[0].ChildID != iso.ID || fin[1].ChildID != fork.ID {
		t.Errorf("delegation.finished: %+v", fin)
	}
	var forkCall trace.ModelCall
	for _, c := range tr.ModelCalls {
		if c.AgentID == fork.ID {
			forkCall = c
		}
	}
	if got := fmt.Sprint(forkCall.Context); got != "[{main 0 1} {"+fork.ID+" 0 1}]" {
		t.Errorf("the fork's context = %s: the inherited prefix is the parent's range", got)
	}
	// What a prompt cache can serve, as the engine counts it: the fork's
	// first call begins with the parent's first request whole; the isolated
	// child's with nothing of it; the child's second call with its first.
	calls := map[string][]trace.ModelCall{}
	for _, c := range tr.ModelCalls {
		calls[c.AgentID] = append(calls[c.AgentID], c)
	}
	if got, want := forkCall.CachedPrefixTokens, calls["main"][0].InputTokens; got != want {
		t.Errorf("the fork's cached prefix = %d, want the parent's first input %d", got, want)
	}
	if got := calls[iso.ID][0].CachedPrefixTokens; got != 0 {
		t.Errorf("the isolated child's first cached prefix = %d, want 0", got)
	}
	if got, want := calls[iso.ID][1].CachedPrefixTokens, calls[iso.ID][0].InputTokens; got != want {
		t.Errorf("the isolated child's second cached prefix = %d, want %d", got, want)
	}
	for _, a := range tr.Agents {
		if a.Status != delegation.StatusDone {
			t.Errorf("agent %s is %s", a.ID, a.Status)
		}
	}
}

func TestParallelSameTaskInCallOrder(t *testing.T) {
	r := newRecording()
	r.call("", []ingest.Message{user("Ask twice.")}, asst("", task("Roll a die.", "roller"), task("Roll a die.", "roller")))
	a := r.call("", []ingest.Message{user("Roll a die.")}, asst("4"))
	b := r.call("", []ingest.Message{user("Roll a die.")}, asst("2"))
	if a.ID == b.ID || a.TaskCallID == b.TaskCallID || a.Invocation != 0 || b.Invocation != 1 {
		t.Fatalf("two children of one message: %+v and %+v", a, b)
	}
	calls := map[string]int{}
	tr := r.trace(t)
	for _, m := range tr.Messages {
		if m.AgentID == "main" {
			for i, c := range m.ToolCalls {
				calls[c.ID] = i
			}
		}
	}
	if calls[a.TaskCallID] != 0 || calls[b.TaskCallID] != 1 {
		t.Errorf("the first child should take the first call: %v, %s, %s", calls, a.TaskCallID, b.TaskCallID)
	}
}

func TestUnexplainedCallIsShownUnattached(t *testing.T) {
	r := newRecording()
	r.call("", []ingest.Message{user("Hello.")}, asst("Hi."))
	p := r.s.Place(ingest.CallInput{Input: []ingest.Message{user("Something else entirely.")}})
	if !p.Unattached {
		t.Fatalf("placement = %+v", p)
	}
	if got := r.sink.events; len(got) == 0 || got[len(got)-1].Type != delegation.EventModelFinished {
		t.Fatal("Place must record nothing")
	}
	a := r.call("", []ingest.Message{user("Something else entirely.")}, asst("?"))
	if !a.Unattached || a.ParentID != "main" || a.TaskCallID != "" {
		t.Fatalf("unattached agent = %+v", a)
	}
}

func TestKeyGroupsCallsAndTrimmedHistoryContinues(t *testing.T) {
	r := newRecording()
	in := []ingest.Message{user("Long task."), asst("step 1"), user("go on")}
	r.call("", in[:1], asst("step 1"))
	r.call("", in, asst("step 2"))
	// The history was summarized: the next call begins like it, then differs.
	a := r.call("", []ingest.Message{user("Long task."), user("Summary: step 1 done."), asst("step 2"), user("finish")}, asst("done"))
	if a.ID != "main" {
		t.Fatalf("trimmed history went to %+v", a)
	}
	// A key names its agent whatever the content.
	k := ingest.Hint{Key: "span-7"}
	at := r.at.Add(time.Second)
	t1 := r.s.StartCall(ingest.CallInput{Hint: k, Input: []ingest.Message{user("x")}, At: at})
	t1.Finish(ingest.CallOutput{Output: &ingest.Message{Content: "y"}, At: at})
	t2 := r.s.StartCall(ingest.CallInput{Hint: k, Input: []ingest.Message{user("unrelated")}, At: at})
	t2.Finish(ingest.CallOutput{Output: &ingest.Message{Content: "z"}, At: at})
	if t1.Agent().ID != t2.Agent().ID {
		t.Errorf("one key, two agents: %s and %s", t1.Agent().ID, t2.Agent().ID)
	}
	tr := r.trace(t)
	c := tr.ModelCalls[2]
	if got := fmt.Sprint(c.Context); got != "[{main 0 1} {main 4 7}]" {
		t.Errorf("after the trim the context is %s: the shared head stays a range, the rest is new", got)
	}
}

func TestNestedRefusalInAFork(t *testing.T) {
	r := newRecording()
	prompt := user("Go.")
	c1 := asst("", task("Continue.", "forker"))
	r.call("", []ingest.Message{prompt}, c1)
	fork := r.call("", []ingest.Message{prompt, user("preamble\n\nContinue.")}, asst("", task("Again.", "forker")))
	if fork.Mode != delegation.ModeFork {
		t.Fatalf("fork = %+v", fork)
	}
	r.call("", []ingest.Message{prompt, user("preamble\n\nContinue."), asst("", task("Again.", "forker")),
		toolMsg(delegation.NestedRefusal)}, asst("Did it myself."))
	tr := r.trace(t)
	refused := 0
	for _, ev := range tr.Events {
		if ev.Type == delegation.EventDelegationRefused {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("%d delegation.refused, want 1", refused)
	}
}

func TestChildrenNumberedInCallOrder(t *testing.T) {
	r := newRecording()
	r.call("", []ingest.Message{user("Three at once.")}, asst("", task("Read a.", "reader"), task("Read b.", "reader"), task("Read c.", "reader")))
	// Their requests arrive in another order than the calls were made.
	c := r.call("", []ingest.Message{user("Read c.")}, asst("c"))
	a := r.call("", []ingest.Message{user("Read a.")}, asst("a"))
	b := r.call("", []ingest.Message{user("Read b.")}, asst("b"))
	if got := fmt.Sprint(a.Invocation, b.Invocation, c.Invocation); got != "0 1 2" {
		t.Errorf("invocations of a, b, c = %s, want 0 1 2: the n-th task call to a type is its n-th invocation (formats.md §1)", got)
	}
	if c.ID != "a1" {
		t.Errorf("the first child seen is %s, want a1: ids follow arrival", c.ID)
	}
}

func TestKnownModesTellTwinTasksApart(t *testing.T) {
	for _, forkFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("fork's request first: %v", forkFirst), func(t *testing.T) {
			sink := &collect{}
			s := ingest.New(ingest.Config{SessionID: "s1", Counter: wordCounter{}, Sink: sink,
				Modes: map[string]delegation.Mode{"iso": delegation.ModeIsolated, "fork": delegation.ModeFork}})
			prompt := user("Order A-7731 is late.")
			at := t0
			call := func(in []ingest.Message, out ingest.Message) ingest.AgentRef {
				at = at.Add(time.Second)
				turn := s.StartCall(ingest.CallInput{Input: in, At: at})
				turn.Finish(ingest.CallOutput{Output: &out, At: at})
				return turn.Agent()
			}
			call([]ingest.Message{prompt}, asst("", task("Report the order number above.", "iso"), task("Report the order number above.", "fork")))
			isoIn := []ingest.Message{user("Report the order number above.")}
			forkIn := []ingest.Message{prompt, user("preamble\n\nReport the order number above.")}
			var iso, fork ingest.AgentRef
			if forkFirst {
				fork = call(forkIn, asst("A-7731"))
				iso = call(isoIn, asst("I cannot see it."))
			} else {
				iso = call(isoIn, asst("I cannot see it."))
				fork = call(forkIn, asst("A-7731"))
			}
			if iso.Name != "iso" || iso.Mode != delegation.ModeIsolated || fork.Name != "fork" || fork.Mode != delegation.ModeFork {
				t.Errorf("iso = %s/%s, fork = %s/%s", iso.Name, iso.Mode, fork.Name, fork.Mode)
			}
		})
	}
}

func TestActivityAndDeltas(t *testing.T) {
	r := newRecording()
	if act := r.s.Activity(); act.Open != 0 || act.MainAnswered {
		t.Fatalf("before any call: %+v", act)
	}
	turn := r.s.StartCall(ingest.CallInput{Input: []ingest.Message{user("Go.")}, At: t0})
	turn.Delta("Thinking ")
	if act := r.s.Activity(); act.Open != 1 {
		t.Errorf("a call in flight: %+v", act)
	}
	turn.Finish(ingest.CallOutput{Output: &ingest.Message{ToolCalls: []delegation.ToolCall{task("Do it.", "helper")}}, At: t0})
	if act := r.s.Activity(); act.Open != 0 || act.MainAnswered {
		t.Errorf("the main agent asked for a tool: %+v", act)
	}
	child := r.s.StartCall(ingest.CallInput{Input: []ingest.Message{user("Do it.")}, At: t0})
	child.Finish(ingest.CallOutput{Error: "upstream said 500", At: t0})
	r.call("", []ingest.Message{user("Go."), asst("", task("Do it.", "helper")), toolMsg("failed")}, asst("Done."))
	if act := r.s.Activity(); !act.MainAnswered || act.MainFailed != "" {
		t.Errorf("the main agent answered and its child's receipt came back: %+v", act)
	}
	last := r.s.StartCall(ingest.CallInput{Input: []ingest.Message{user("Go."), asst("", task("Do it.", "helper")), toolMsg("failed"), asst("Done."), user("Again?")}, At: t0})
	last.Finish(ingest.CallOutput{Error: "upstream said 500", At: t0})
	if act := r.s.Activity(); act.MainAnswered || act.MainFailed != "upstream said 500" {
		t.Errorf("the main agent's last call failed: %+v", act)
	}
	if n := len(r.sink.live); n != 1 || r.sink.live[0].Type != delegation.EventModelDelta {
		t.Errorf("live events: %+v", r.sink.live)
	}
	r.trace(t) // deltas are not in the stored log
}

// The third article's hand-built subagent tool: one argument, task, no
// subagent type. The delegation is found by --task-tool, its child is the
// call whose user message is that task, and it is general-purpose's.
func TestTaskArgumentAndNoTypeIsGeneralPurpose(t *testing.T) {
	sink := &collect{}
	s := ingest.New(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink, TaskTool: "subagent"})
	r := &recording{s: s, sink: sink, at: t0}
	prompt := user("Find where the config is read.")
	first := delegation.ToolCall{Name: "subagent", Args: json.RawMessage(`{"task":"List the files that read config.yaml."}`)}
	second := delegation.ToolCall{Name: "subagent", Args: json.RawMessage(`{"task":"Say which of them is the entry point."}`)}
	r.call("You are main.", []ingest.Message{prompt}, asst("", first))
	a := r.call("You explore.", []ingest.Message{user("List the files that read config.yaml.")}, asst("main.go and load.go."))
	if a.ParentID != "main" || a.Name != delegation.GeneralPurposeName || a.Mode != delegation.ModeIsolated || a.Invocation != 0 {
		t.Fatalf("the child = %+v, want general-purpose's first, isolated, under main", a)
	}
	r.call("You are main.", []ingest.Message{prompt, asst("", first), toolMsg("main.go and load.go.")}, asst("", second))
	b := r.call("You explore.", []ingest.Message{user("Say which of them is the entry point.")}, asst("main.go."))
	if b.Name != delegation.GeneralPurposeName || b.Invocation != 1 || b.ID == a.ID {
		t.Fatalf("the second child = %+v, want general-purpose's second", b)
	}
	r.call("You are main.", []ingest.Message{prompt, asst("", first), toolMsg("main.go and load.go."), asst("", second), toolMsg("main.go.")}, asst("main.go reads it."))
	tr := r.trace(t)
	var receipts int
	for _, m := range tr.Messages {
		if m.AgentID == "main" && m.Kind == string(delegation.KindReceipt) {
			receipts++
		}
	}
	if receipts != 2 {
		t.Fatalf("main holds %d receipts, want 2", receipts)
	}
}
