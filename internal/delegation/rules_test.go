package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The rules below are the ones that make the engine do what deepagents
// does (issue 15); each test names the section of spec/delegation.md.

func lsCall() ToolCall { return call("ls", map[string]string{"path": "/"}) }

func TestSection2MaxStepsDefault(t *testing.T) {
	t.Run("max_steps defaults to 4,999 model calls, for the main agent and every subagent", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "x", Description: "d"}}})
		if team.Main.MaxSteps != 4999 || team.Subagent("x").MaxSteps != 4999 || team.Subagent(GeneralPurposeName).MaxSteps != 4999 {
			t.Fatalf("max_steps = %d, %d, %d; want 4999 (deepagents' recursion_limit 9_999, two steps a turn)",
				team.Main.MaxSteps, team.Subagent("x").MaxSteps, team.Subagent(GeneralPurposeName).MaxSteps)
		}
	})
	t.Run("a child that needs 56 calls finishes, and so does a 200-step main agent", func(t *testing.T) {
		var child []fakeTurn
		for i := 0; i < 55; i++ {
			child = append(child, fakeTurn{calls: []ToolCall{lsCall()}})
		}
		child = append(child, fakeTurn{content: "found it"})
		var main []fakeTurn
		main = append(main, fakeTurn{calls: []ToolCall{task("search long", "general-purpose")}})
		for i := 0; i < 198; i++ {
			main = append(main, fakeTurn{calls: []ToolCall{lsCall()}})
		}
		main = append(main, fakeTurn{content: "done"})
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": main, "general-purpose#0": child}, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("status %s: %v", r.res.Status, r.res.Err)
		}
		if got := r.messages("main")[2]; got.IsError || got.Content != "found it" {
			t.Fatalf("receipt = %+v", got)
		}
		if got := len(r.modelCalls("main")); got != 200 {
			t.Fatalf("main made %d calls, want 200", got)
		}
	})
}

func TestSection3UnknownTaskArguments(t *testing.T) {
	invented := ToolCall{Name: TaskToolName, Args: json.RawMessage(`{"description":"look","subagent_type":"general-purpose","priority":"high","mode":"fork"}`)}
	turns := map[string][]fakeTurn{
		"main":              {{calls: []ToolCall{invented}}, {content: "ok"}},
		"general-purpose#0": {{content: "looked"}},
	}
	t.Run("an invented key is refused with an error that names it", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, turns, nil)
		got := r.messages("main")[2]
		if !got.IsError || !strings.Contains(got.Content, "not 'mode', 'priority'") || len(r.ofType(EventDelegationStarted)) != 0 {
			t.Fatalf("result = %+v", got)
		}
	})
	t.Run("under compat deepagents it is dropped, as deepagents' schema drops it", func(t *testing.T) {
		r := runSession(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}}, turns, nil)
		if got := r.messages("main")[2]; got.IsError || got.Content != "looked" {
			t.Fatalf("receipt = %+v", got)
		}
	})
}

func TestSection4ToolsOfChildren(t *testing.T) {
	withTodos := append(DefaultTools(), WriteTodosToolName)
	t.Run("an isolated child without tools of its own gets the parent's, without task and write_todos", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Tools: withTodos}, Subagents: []Spec{{Name: "iso", Description: "d"}}})
		want := []string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"}
		for _, name := range []string{"iso", GeneralPurposeName} {
			if got := names(team.SubagentTools(name)); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: tools = %v, want %v", name, got, want)
			}
		}
	})
	t.Run("an isolated child that lists write_todos gets it", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Tools: withTodos}, Subagents: []Spec{{Name: "iso", Description: "d", Tools: []string{"read_file", WriteTodosToolName}}}})
		if got := names(team.SubagentTools("iso")); !reflect.DeepEqual(got, []string{"read_file", WriteTodosToolName}) {
			t.Fatalf("tools = %v", got)
		}
	})
	t.Run("a fork without tools gets the parent's unchanged, write_todos and task included", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Tools: withTodos}, Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork}}})
		if got := names(team.SubagentTools("fk")); !reflect.DeepEqual(got, withTodos) {
			t.Fatalf("tools = %v, want %v", got, withTodos)
		}
	})
	t.Run("a fork with tools of its own runs with them and task, and its prefix is not the parent's", func(t *testing.T) {
		ts := TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork, Tools: []string{"read_file", "grep"}}}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main": {{calls: []ToolCall{task("t", "fk")}}, {content: "ok"}},
			"fk#0": {{calls: []ToolCall{call("ls", map[string]string{"path": "/"})}}, {content: "done"}},
		}, nil)
		fk := r.childByName(t, "fk")
		first := r.model.requestsOf(fk.ID)[0]
		if got := first.tools; !reflect.DeepEqual(got, []string{"read_file", "grep", "task"}) {
			t.Fatalf("tools = %v", got)
		}
		parent := r.model.requestsOf("main")[0]
		if reflect.DeepEqual(first.toolDefs, parent.toolDefs) {
			t.Fatal("the fork's tools equal the parent's: the cache miss is not shown")
		}
		// It has no ls: a call of it is an unknown tool.
		if got := r.messages(fk.ID)[2]; !got.IsError || !strings.Contains(got.Content, "Unknown tool 'ls'") {
			t.Fatalf("ls result = %+v", got)
		}
		for _, c := range r.modelCalls(fk.ID) {
			if c.ToolTokens >= r.modelCalls("main")[0].ToolTokens {
				t.Fatalf("the fork's tool tokens %d are not its own smaller list's", c.ToolTokens)
			}
		}
	})
	t.Run("task listed in a fork's tools stays where it is listed", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork, Tools: []string{"task", "ls"}}}})
		if got := names(team.SubagentTools("fk")); !reflect.DeepEqual(got, []string{"task", "ls"}) {
			t.Fatalf("tools = %v", got)
		}
	})
}

func TestSection5ReceiptTrimsAsPythonDoes(t *testing.T) {
	t.Run("a trailing ideographic space is trimmed, as rstrip() trims it", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("t", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {{content: "结论是 42。\u3000\u00a0\u2029\x1f \n"}},
		}, nil)
		if got := r.messages("main")[2].Content; got != "结论是 42。" {
			t.Fatalf("receipt = %q", got)
		}
	})
	t.Run("white space is what Python's str.isspace() says it is", func(t *testing.T) {
		// [c for c in range(0x110000) if chr(c).isspace()], Python 3.
		python := []rune{0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
			0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
			0x2028, 0x2029, 0x202f, 0x205f, 0x3000}
		var ours []rune
		for r := rune(0); r <= 0x10ffff; r++ {
			if pyIsSpace(r) {
				ours = append(ours, r)
			}
		}
		if !reflect.DeepEqual(ours, python) {
			t.Fatalf("white space = %U, want %U", ours, python)
		}
	})
	t.Run("a message of white space only is no text: the walk goes on", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("t", "general-purpose")}}, {content: "ok"}},
			"general-purpose#0": {{content: "the answer", calls: []ToolCall{lsCall()}}, {content: "\u3000 \n"}},
		}, nil)
		if got := r.messages("main")[2].Content; got != "the answer" {
			t.Fatalf("receipt = %q", got)
		}
	})
}

// contextSizes are the input tokens of each model call of the main agent.
func contextSizes(t *testing.T, ts TeamSpec, turns map[string][]fakeTurn) []int {
	t.Helper()
	r := runSession(t, ts, turns, nil)
	var out []int
	for _, c := range r.modelCalls("main") {
		out = append(out, c.InputTokens)
	}
	return out
}

func TestSection7SummarizationLikeDeepagents(t *testing.T) {
	step := func(i int) fakeTurn {
		return fakeTurn{content: fmt.Sprintf("step %d", i), calls: []ToolCall{call("write_file", map[string]string{"file_path": fmt.Sprintf("/f%d.md", i), "content": "x"})}}
	}
	three := map[string][]fakeTurn{"main": {step(0), step(1), {content: "done"}}}
	t.Run("it is on by default, at 170,000 tokens keeping 6 messages", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: []Spec{{Name: "x", Description: "d"}}})
		want := Summarization{MaxTokens: 170000, KeepMessages: 6}
		if team.Main.Summarization != want || team.Subagent("x").Summarization != want {
			t.Fatalf("summarization = %+v, %+v", team.Main.Summarization, team.Subagent("x").Summarization)
		}
	})
	t.Run("it triggers when the context reaches the threshold, not only past it", func(t *testing.T) {
		sizes := contextSizes(t, TeamSpec{}, three)
		at := sizes[2] // the third call's context, exactly
		for _, c := range []struct {
			max  int
			want int
		}{{at, 1}, {at + 1, 0}} {
			r := runSession(t, TeamSpec{Main: MainSpec{Summarization: Summarization{MaxTokens: c.max, KeepMessages: 1}}}, three, nil)
			if got := len(r.ofType(EventSummarization)); got != c.want {
				t.Errorf("threshold %d with a context of %d: %d summarizations, want %d", c.max, at, got, c.want)
			}
		}
	})
	t.Run("each agent has its own threshold; a child does not inherit its parent's", func(t *testing.T) {
		turns := map[string][]fakeTurn{
			"main":    {{calls: []ToolCall{task("a", "plain"), task("b", "tight")}}, {content: "ok"}},
			"plain#0": {step(0), step(1), {content: "p"}},
			"tight#0": {step(0), step(1), {content: "t"}},
		}
		ts := TeamSpec{Main: MainSpec{Summarization: Summarization{MaxTokens: 1, KeepMessages: 1}},
			Subagents: []Spec{{Name: "plain", Description: "d"}, {Name: "tight", Description: "d", Summarization: Summarization{MaxTokens: 1, KeepMessages: 1}}}}
		r := runSession(t, ts, turns, nil)
		by := map[string]int{}
		for _, e := range r.ofType(EventSummarization) {
			by[e.AgentID]++
		}
		if by["main"] == 0 || by[r.childByName(t, "plain").ID] != 0 || by[r.childByName(t, "tight").ID] == 0 {
			t.Fatalf("summarizations by agent = %v", by)
		}
	})
	t.Run("the summary call uses none of the agent's max_steps", func(t *testing.T) {
		r := runSession(t, TeamSpec{Main: MainSpec{MaxSteps: 3, Summarization: Summarization{MaxTokens: 1, KeepMessages: 1}}}, three, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("status %s: %v", r.res.Status, r.res.Err)
		}
		var turnsN, sums int
		for _, c := range r.modelCalls("main") {
			if c.Purpose == PurposeSummary {
				sums++
			} else {
				turnsN++
			}
		}
		if turnsN != 3 || sums == 0 {
			t.Fatalf("%d turns and %d summary calls, want 3 turns and some summaries", turnsN, sums)
		}
	})
	t.Run("cutoff_index counts the raw messages, summaries left out, after a second summary too", func(t *testing.T) {
		var turns []fakeTurn
		for i := 0; i < 6; i++ {
			turns = append(turns, step(i))
		}
		turns = append(turns, fakeTurn{content: "done"})
		r := runSession(t, TeamSpec{Main: MainSpec{Summarization: Summarization{MaxTokens: 1, KeepMessages: 2}}}, map[string][]fakeTurn{"main": turns}, nil)
		sums := r.ofType(EventSummarization)
		if len(sums) < 2 {
			t.Fatalf("%d summarizations, want two or more", len(sums))
		}
		var raw []Message
		for _, m := range r.messages("main") {
			if m.Kind != KindSummary {
				raw = append(raw, m)
			}
		}
		calls := r.modelCalls("main")
		for i, e := range sums {
			var s Summarized
			_ = json.Unmarshal(e.Data, &s)
			// The next turn after this summary sees [summary] + raw[cutoff:] (up to its own time).
			var next ModelCall
			for _, c := range calls {
				if c.Purpose == PurposeTurn && c.MessageTokens > 0 && firstOfContext(r, c).ID == s.SummaryMessage.ID {
					next = c
					break
				}
			}
			ctx := contextMessages(r, next)
			if len(ctx) < 2 || ctx[0].ID != s.SummaryMessage.ID {
				t.Fatalf("summary %d: the next call's context = %v", i, ids(ctx))
			}
			if got, want := ctx[1].ID, raw[s.CutoffIndex].ID; got != want {
				t.Fatalf("summary %d: cutoff_index %d names %s in the raw list, but the kept tail starts at %s", i, s.CutoffIndex, want, got)
			}
		}
	})
}

func TestSection7ForkCutoffCountsItsInheritedHistory(t *testing.T) {
	// The fork's raw list is what deepagents copies into its state: the
	// parent's effective history, then the fork's own messages.
	ts := TeamSpec{Subagents: []Spec{{Name: "fk", Description: "d", Mode: ModeFork, Summarization: Summarization{MaxTokens: 1, KeepMessages: 1}}}}
	r := runSession(t, ts, map[string][]fakeTurn{
		"main": {{calls: []ToolCall{lsCall()}}, {calls: []ToolCall{task("t", "fk")}}, {content: "ok"}},
		"fk#0": {{calls: []ToolCall{lsCall()}}, {content: "done"}},
	}, nil)
	fk := r.childByName(t, "fk")
	inherited := r.modelCalls(fk.ID)[0].Context[0].Len() // prompt, ls call, its result
	for _, e := range r.ofType(EventSummarization) {
		if e.AgentID != fk.ID {
			continue
		}
		var s Summarized
		_ = json.Unmarshal(e.Data, &s)
		if s.CutoffIndex < inherited {
			t.Fatalf("cutoff_index %d: it should count the %d inherited messages first", s.CutoffIndex, inherited)
		}
		return
	}
	t.Fatal("the fork never summarized")
}

func firstOfContext(r *run, c ModelCall) Message {
	ctx := contextMessages(r, c)
	if len(ctx) == 0 {
		return Message{}
	}
	return ctx[0]
}

func contextMessages(r *run, c ModelCall) []Message {
	var out []Message
	for _, rg := range c.Context {
		out = append(out, r.messages(rg.AgentID)[rg.From:rg.To]...)
	}
	return out
}

func ids(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestSection8SameMessageState(t *testing.T) {
	write := func(p, c string) ToolCall { return call("write_file", map[string]string{"file_path": p, "content": c}) }
	read := func(p string) ToolCall { return call("read_file", map[string]string{"file_path": p}) }
	edit := func(p, o, n string) ToolCall {
		return call("edit_file", map[string]string{"file_path": p, "old_string": o, "new_string": n})
	}
	t.Run("a read_file beside a write_file of the same file does not see the write", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {
			{calls: []ToolCall{write("/a.md", "hello"), read("/a.md")}},
			{calls: []ToolCall{read("/a.md")}},
			{content: "done"},
		}}, nil)
		msgs := r.messages("main")
		if got := msgs[3]; !got.IsError || !strings.Contains(got.Content, "not found") {
			t.Fatalf("the read in the same message = %+v, want not found", got)
		}
		if got := msgs[5]; got.IsError || !strings.Contains(got.Content, "hello") {
			t.Fatalf("the read in the next message = %+v", got)
		}
	})
	t.Run("changes are applied in call order: both edits read the old file, the later one wins", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {
			{calls: []ToolCall{edit("/c.md", "v1", "v2"), edit("/c.md", "v1", "v3")}},
			{content: "done"},
		}}, map[string]string{"/c.md": "v1"})
		if got := r.res.Files["/c.md"]; got != "v3" {
			t.Fatalf("/c.md = %q, want v3", got)
		}
		var order []string
		for _, e := range r.ofType(EventFilesChanged) {
			var d FilesChanged
			_ = json.Unmarshal(e.Data, &d)
			for _, ch := range d.Changes {
				order = append(order, ch.Content)
			}
		}
		if !reflect.DeepEqual(order, []string{"v2", "v3"}) {
			t.Fatalf("files.changed in order %v, want v2 then v3", order)
		}
	})
	snapshotBeside := func(calls []ToolCall) string {
		ts := TeamSpec{Main: MainSpec{FilesMerge: MergeSnapshot}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":              {{calls: calls}, {content: "done"}},
			"general-purpose#0": {{content: "looked"}},
		}, map[string]string{"/c.md": "v1"})
		return r.res.Files["/c.md"]
	}
	t.Run("under snapshot, the parent's edit after a task call survives the child's stale map", func(t *testing.T) {
		if got := snapshotBeside([]ToolCall{task("look", "general-purpose"), edit("/c.md", "v1", "v2")}); got != "v2" {
			t.Fatalf("/c.md = %q, want the parent's v2", got)
		}
	})
	t.Run("under snapshot, the parent's edit before a task call is lost to it", func(t *testing.T) {
		if got := snapshotBeside([]ToolCall{edit("/c.md", "v1", "v2"), task("look", "general-purpose")}); got != "v1" {
			t.Fatalf("/c.md = %q, want the child's stale v1", got)
		}
	})
	t.Run("a child starts from the state before the message, not from its siblings' tools", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{write("/new.md", "x"), task("look", "general-purpose")}}, {content: "done"}},
			"general-purpose#0": {{calls: []ToolCall{read("/new.md")}}, {content: "looked"}},
		}, nil)
		child := r.childByName(t, "general-purpose")
		if got := r.messages(child.ID)[2]; !got.IsError {
			t.Fatalf("the child read %q: it saw a write of its own message", got.Content)
		}
	})
}

func TestSection9CompatDeepagents(t *testing.T) {
	t.Run("a child's failure fails its parent and the session, and cancels its siblings", func(t *testing.T) {
		ts := TeamSpec{Main: MainSpec{Compat: CompatDeepagents}, Subagents: []Spec{
			{Name: "bad", Description: "d"}, {Name: "slow", Description: "d"},
		}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":   {{calls: []ToolCall{task("a", "bad"), task("b", "slow")}}, {content: "never"}},
			"bad#0":  {{err: errors.New("503 upstream unavailable")}},
			"slow#0": {{content: "too late", delay: 10 * time.Second}},
		}, nil)
		if r.res.Status != StatusFailed || !strings.Contains(r.res.Err.Error(), "subagent 'bad' failed") {
			t.Fatalf("session %s: %v", r.res.Status, r.res.Err)
		}
		fins := map[string]AgentFinished{}
		for _, e := range r.ofType(EventAgentFinished) {
			var d AgentFinished
			_ = json.Unmarshal(e.Data, &d)
			fins[e.AgentID] = d
		}
		slow := fins[r.childByName(t, "slow").ID]
		if slow.Status != StatusFailed || !strings.Contains(slow.Error, "its sibling 'bad' failed") {
			t.Fatalf("the sibling finished %+v, want cancelled", slow)
		}
		for _, m := range r.messages("main") {
			if m.Role == RoleTool {
				t.Fatalf("a result entered the parent: %+v", m)
			}
		}
	})
	t.Run("without compat the same failure stays in the child", func(t *testing.T) {
		ts := TeamSpec{Subagents: []Spec{{Name: "bad", Description: "d"}}}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":  {{calls: []ToolCall{task("a", "bad")}}, {content: "carried on"}},
			"bad#0": {{err: errors.New("503")}},
		}, nil)
		if r.res.Status != StatusDone {
			t.Fatalf("session %s", r.res.Status)
		}
	})
	t.Run("task calls are not capped", func(t *testing.T) {
		var inFlight, peak atomic.Int32
		gate := make(chan struct{})
		m := ModelFunc(func(ctx context.Context, req *Request) (*Response, error) {
			if req.Caller.Name == "main" {
				if len(req.Messages) == 1 {
					var calls []ToolCall
					for i := 0; i < 12; i++ {
						calls = append(calls, task(fmt.Sprint(i), "general-purpose"))
					}
					return &Response{ToolCalls: calls}, nil
				}
				return &Response{Content: "ok"}, nil
			}
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if n == 12 {
				close(gate)
			}
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &Response{Content: "x"}, nil
		})
		team := mustTeam(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}})
		res := New(Config{Team: team, Model: m, Counter: wordCounter{}}).Run(context.Background(), "go")
		if res.Status != StatusDone || peak.Load() != 12 {
			t.Fatalf("status %s, peak %d, want all 12 at once", res.Status, peak.Load())
		}
	})
	t.Run("it merges whole file maps", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}})
		if team.Main.FilesMerge != MergeSnapshot || team.Main.MaxConcurrency != 0 {
			t.Fatalf("files_merge %s, max_concurrency %d", team.Main.FilesMerge, team.Main.MaxConcurrency)
		}
	})
	t.Run("a setting it switches, set the other way, is an error at its field", func(t *testing.T) {
		_, err := BuildTeam(TeamSpec{Main: MainSpec{Compat: CompatDeepagents, FilesMerge: MergeDelta, MaxConcurrency: 2}})
		var fe FieldErrors
		if !errors.As(err, &fe) || len(fe) != 2 || fe[0].Field != "agent.files_merge" || fe[1].Field != "agent.max_concurrency" {
			t.Fatalf("err = %v", err)
		}
		_, err = BuildTeam(TeamSpec{Main: MainSpec{Compat: "langgraph"}})
		if !errors.As(err, &fe) || fe[0].Field != "agent.compat" || !strings.Contains(fe[0].Message, "'deepagents'") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSection10StructuredToolIsRequired(t *testing.T) {
	findings := `{"title":"Findings","type":"object","properties":{"findings":{"type":"string"}},"required":["findings"]}`
	ts := TeamSpec{Subagents: []Spec{{Name: "analyst", Description: "d", ResponseFormat: json.RawMessage(findings)}}}
	good := ToolCall{Name: "Findings", Args: json.RawMessage(`{"findings":"3 leads"}`)}
	t.Run("a plain-text answer ends the child, and its text is the receipt, as in deepagents", func(t *testing.T) {
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":      {{calls: []ToolCall{task("analyse", "analyst")}}, {content: "ok"}},
			"analyst#0": {{content: "Here are my findings.  \n"}, {calls: []ToolCall{good}}},
		}, nil)
		child := r.childByName(t, "analyst")
		if got := r.messages("main")[2]; got.IsError || got.Content != "Here are my findings." {
			t.Fatalf("receipt = %+v", got)
		}
		if n := len(r.modelCalls(child.ID)); n != 1 {
			t.Fatalf("%d calls: the child was nudged to try again", n)
		}
	})
	t.Run("two structured calls in one message each get an error, and the next try ends the child", func(t *testing.T) {
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":      {{calls: []ToolCall{task("analyse", "analyst")}}, {content: "ok"}},
			"analyst#0": {{calls: []ToolCall{good, good}}, {calls: []ToolCall{good}}},
		}, nil)
		child := r.childByName(t, "analyst")
		msgs := r.messages(child.ID)
		if !msgs[2].IsError || !msgs[3].IsError || !strings.Contains(msgs[2].Content, "2 calls of Findings") {
			t.Fatalf("results = %+v, %+v", msgs[2], msgs[3])
		}
		if got := r.messages("main")[2]; got.IsError || got.Content != `{"findings":"3 leads"}` {
			t.Fatalf("receipt = %+v", got)
		}
	})
	t.Run("the request says the tool call is required", func(t *testing.T) {
		var got []string
		m := ModelFunc(func(ctx context.Context, req *Request) (*Response, error) {
			got = append(got, req.Caller.Name+":"+req.ToolChoice)
			if req.Caller.Name == "main" {
				if len(req.Messages) == 1 {
					return &Response{ToolCalls: []ToolCall{task("analyse", "analyst")}}, nil
				}
				return &Response{Content: "ok"}, nil
			}
			return &Response{ToolCalls: []ToolCall{good}}, nil
		})
		res := New(Config{Team: mustTeam(t, ts), Model: m, Counter: wordCounter{}}).Run(context.Background(), "go")
		if want := []string{"main:", "analyst:required", "main:"}; res.Status != StatusDone || !reflect.DeepEqual(got, want) {
			t.Fatalf("status %s, tool choices %v, want %v", res.Status, got, want)
		}
	})
}

func TestSection11ToolDefinitionsAsDeepagentsCountsThem(t *testing.T) {
	r := runSession(t, TeamSpec{}, map[string][]fakeTurn{"main": {{content: "hi"}}}, nil)
	call := r.modelCalls("main")[0]
	for i, d := range mustTeam(t, TeamSpec{}).MainTools() {
		if got, want := call.Tools[i].Tokens, (wordCounter{}).Count(ToolJSON(d)); got != want {
			t.Errorf("%s costs %d, want the count of its ToolJSON, %d", d.Name, got, want)
		}
	}
	j := ToolJSON(mustTeam(t, TeamSpec{}).MainTools()[0])
	if !strings.HasPrefix(j, `{"type": "function", "function": {"name": "ls", "description": "`) {
		t.Fatalf("ToolJSON = %s", j)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(j), &v); err != nil {
		t.Fatalf("ToolJSON is not JSON: %v", err)
	}
}

func TestSection2MaxStepsReachChildren(t *testing.T) {
	var busy []fakeTurn
	for i := 0; i < 6; i++ {
		busy = append(busy, fakeTurn{calls: []ToolCall{lsCall()}})
	}
	busy = append(busy, fakeTurn{content: "found it"})
	ts := TeamSpec{Main: MainSpec{MaxSteps: 3}, Subagents: []Spec{{Name: "own", Description: "d", MaxSteps: 10}}}
	t.Run("a child without max_steps of its own has the main agent's", func(t *testing.T) {
		team := mustTeam(t, ts)
		if got := team.Subagent(GeneralPurposeName).MaxSteps; got != 3 {
			t.Fatalf("general-purpose max_steps = %d, want the main agent's 3 (deepagents passes recursionLimit to the child)", got)
		}
		if got := team.Subagent("own").MaxSteps; got != 10 {
			t.Fatalf("own max_steps = %d, want its own 10", got)
		}
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":              {{calls: []ToolCall{task("search long", GeneralPurposeName)}}, {content: "done"}},
			"general-purpose#0": busy,
		}, nil)
		gp := r.childByName(t, GeneralPurposeName)
		if n := len(r.modelCalls(gp.ID)); n != 3 {
			t.Fatalf("the child made %d model calls, want 3", n)
		}
		if got := r.messages("main")[2]; !got.IsError || !strings.Contains(got.Content, "step limit of 3") {
			t.Fatalf("receipt = %+v", got)
		}
	})
	t.Run("a child's own max_steps wins", func(t *testing.T) {
		r := runSession(t, ts, map[string][]fakeTurn{
			"main":  {{calls: []ToolCall{task("search long", "own")}}, {content: "done"}},
			"own#0": busy,
		}, nil)
		if got := r.messages("main")[2]; got.IsError || got.Content != "found it" {
			t.Fatalf("receipt = %+v", got)
		}
	})
}

func TestSection4ToolsUnderCompatAddToTheFilesystemTools(t *testing.T) {
	fs := []string{"ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"}
	specs := []Spec{
		{Name: "reader", Description: "d", Tools: []string{"read_file"}},
		{Name: "planner", Description: "d", Tools: []string{WriteTodosToolName, "grep"}},
		{Name: "fk", Description: "d", Mode: ModeFork, Tools: []string{"task", "ls"}},
		{Name: "bare", Description: "d", Tools: []string{}},
	}
	t.Run("ours: a spec's tools are the child's whole set", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Subagents: specs})
		if got := names(team.SubagentTools("reader")); !reflect.DeepEqual(got, []string{"read_file"}) {
			t.Fatalf("reader: %v", got)
		}
	})
	t.Run("compat: the filesystem tools always, what the spec lists added", func(t *testing.T) {
		team := mustTeam(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}, Subagents: specs})
		want := map[string][]string{
			"reader":  fs,
			"planner": append(slices.Clone(fs), WriteTodosToolName),
			"fk":      append(slices.Clone(fs), TaskToolName),
			"bare":    fs,
		}
		for name, w := range want {
			if got := names(team.SubagentTools(name)); !reflect.DeepEqual(got, w) {
				t.Errorf("%s: tools = %v, want %v", name, got, w)
			}
		}
	})
}

func TestSection3EmptyDescription(t *testing.T) {
	empty := task("", GeneralPurposeName)
	turns := map[string][]fakeTurn{
		"main":              {{calls: []ToolCall{empty}}, {content: "ok"}},
		"general-purpose#0": {{content: "Nothing to do."}},
	}
	t.Run("ours: an empty description is refused", func(t *testing.T) {
		r := runSession(t, TeamSpec{}, turns, nil)
		if got := r.messages("main")[2]; !got.IsError || !strings.Contains(got.Content, "missing description") || len(r.ofType(EventDelegationStarted)) != 0 {
			t.Fatalf("result = %+v", got)
		}
	})
	t.Run("compat: a child starts with an empty message, as in deepagents", func(t *testing.T) {
		r := runSession(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}}, turns, nil)
		gp := r.childByName(t, GeneralPurposeName)
		first := r.model.requestsOf(gp.ID)[0]
		if len(first.messages) != 1 || first.messages[0].Role != RoleUser || first.messages[0].Content != "" {
			t.Fatalf("the child's first call got %+v", first.messages)
		}
		if got := r.messages("main")[2]; got.IsError || got.Content != "Nothing to do." {
			t.Fatalf("receipt = %+v", got)
		}
	})
	t.Run("compat: a missing description still fails, as deepagents' schema does", func(t *testing.T) {
		missing := ToolCall{Name: TaskToolName, Args: json.RawMessage(`{"subagent_type":"general-purpose"}`)}
		r := runSession(t, TeamSpec{Main: MainSpec{Compat: CompatDeepagents}}, map[string][]fakeTurn{
			"main": {{calls: []ToolCall{missing}}, {content: "ok"}},
		}, nil)
		if got := r.messages("main")[2]; !got.IsError || !strings.Contains(got.Content, "missing description") {
			t.Fatalf("result = %+v", got)
		}
	})
}
