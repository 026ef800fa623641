package view_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

func runTrace(t *testing.T, doc string) *trace.Trace {
	t.Helper()
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "s", Sink: delegation.SinkFunc(func(e delegation.Event) {
		if e.Seq > 0 {
			events = append(events, e)
		}
	})}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Build(trace.Meta{ID: "s"}, events)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// tree folds a trace and returns its tree.
func tree(t *testing.T, tr *trace.Trace) *view.Node {
	t.Helper()
	st, err := view.FromTrace(tr, view.BudgetOf(tr.Scenario))
	if err != nil {
		t.Fatal(err)
	}
	return st.Tree()
}

// receipt is the text of a child's receipt.
func receipt(tr *trace.Trace, n *view.Node) string {
	for _, m := range tr.Messages {
		if n.Delegation != nil && n.Delegation.Receipt != nil && m.ID == n.Delegation.Receipt.ID {
			return m.Content
		}
	}
	return ""
}

const fanOut = `{"name": "fan", "prompt": "go",
 "subagents": [{"name": "fk", "description": "d", "mode": "fork"}],
 "script": {
  "main": [
   {"content": "first", "tool_calls": [{"name": "write_file", "args": {"file_path": "/a.md", "content": "A-7731"}}]},
   {"tool_calls": [
     {"name": "task", "args": {"description": "one", "subagent_type": "general-purpose"}},
     {"name": "task", "args": {"description": "two", "subagent_type": "fk"}},
     {"name": "task", "args": {"description": "x", "subagent_type": "nobody"}}]},
   {"content": "done"}],
  "general-purpose": [[{"content": "r1"}]],
  "fk": [[{"content": "r2"}]]}}`

func TestTree(t *testing.T) {
	tr := runTrace(t, fanOut)
	root := tree(t, tr)
	if root.Agent.Name != "main" || len(root.Children) != 2 || len(root.Refused) != 1 {
		t.Fatalf("tree: %s with %d children, %d refused", root.Agent.Name, len(root.Children), len(root.Refused))
	}
	t.Run("own and subtree tokens are never double counted", func(t *testing.T) {
		sum := 0
		for _, c := range tr.ModelCalls {
			sum += c.InputTokens
		}
		if root.SubtreeTokens != sum {
			t.Fatalf("subtree %d, calls sum %d", root.SubtreeTokens, sum)
		}
		kids := 0
		for _, c := range root.Children {
			if c.SubtreeTokens != c.Agent.OwnTokens {
				t.Fatalf("a leaf's subtree %d != own %d", c.SubtreeTokens, c.Agent.OwnTokens)
			}
			kids += c.Agent.OwnTokens
		}
		if root.SubtreeTokens != root.Agent.OwnTokens+kids {
			t.Fatalf("subtree %d != own %d + children %d", root.SubtreeTokens, root.Agent.OwnTokens, kids)
		}
	})
	t.Run("each child carries its task, receipt and entry cost", func(t *testing.T) {
		gp, fk := root.Children[0].Agent, root.Children[1].Agent
		if gp.Task != "one" || receipt(tr, root.Children[0]) != "r1" || fk.Task != "two" || receipt(tr, root.Children[1]) != "r2" {
			t.Fatalf("children: %+v / %+v", gp, fk)
		}
		if gp.InheritedTokens != 0 || fk.InheritedTokens == 0 || fk.EntryTokens <= gp.EntryTokens-gp.InheritedTokens {
			t.Fatalf("entry: isolated %d (%d inherited), fork %d (%d inherited)", gp.EntryTokens, gp.InheritedTokens, fk.EntryTokens, fk.InheritedTokens)
		}
	})
	t.Run("a refused delegation is on its parent", func(t *testing.T) {
		if r := root.Refused[0]; r.Reason != delegation.RefusedUnknownType || r.SubagentType != "nobody" {
			t.Fatalf("refusal = %+v", r)
		}
	})
}

func TestForkContext(t *testing.T) {
	tr := runTrace(t, fanOut)
	fk := tree(t, tr).Children[1]
	var call trace.ModelCall
	for _, c := range tr.ModelCalls {
		if c.AgentID == fk.Agent.ID {
			call = c
		}
	}
	msgs := trace.ContextOf(trace.Lists(tr), call)
	// The parent's prompt, its write call and result, then the fork's opening.
	if len(msgs) != 4 || msgs[0].Kind != "prompt" || msgs[3].Kind != "fork_preamble" {
		b, _ := json.Marshal(msgs)
		t.Fatalf("context = %s", b)
	}
	inherited, own := fk.Agent.History.Split(fk.Agent.ID)
	if len(inherited) != 1 || inherited[0].AgentID != "main" || inherited[0].Len() != 3 || len(own) != 1 {
		t.Fatalf("the fork's context in the fold: inherited %v, own %v; want main's three messages, then its own", inherited, own)
	}
}

// noteKinds runs a scenario and counts its session's notes by kind.
func noteKinds(t *testing.T, doc string) map[string]int {
	t.Helper()
	out := map[string]int{}
	tr := runTrace(t, doc)
	st, err := view.FromTrace(tr, view.BudgetOf(tr.Scenario))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Notes {
		out[n.Kind]++
	}
	return out
}

func TestNotes(t *testing.T) {
	kinds := func(doc string) map[string]int { return noteKinds(t, doc) }
	t.Run("a clean delegation has no notes", func(t *testing.T) {
		got := kinds(`{"name": "ok", "prompt": "go", "script": {
			"main": [{"tool_calls": [{"name": "task", "args": {"description": "Compute 6*7 and reply with the number.", "subagent_type": "general-purpose"}}]}, {"content": "It is 42."}],
			"general-purpose": [[{"content": "42"}]]}}`)
		if len(got) != 0 {
			t.Fatalf("notes = %v", got)
		}
	})
	t.Run("each likely mistake is pointed at", func(t *testing.T) {
		got := kinds(`{"name": "bad", "prompt": "go",
			"subagents": [{"name": "looper", "description": "d", "max_steps": 1}],
			"script": {
			"main": [
			  {"tool_calls": [{"name": "task", "args": {"description": "Report the order number above.", "subagent_type": "general-purpose"}}]},
			  {"tool_calls": [{"name": "task", "args": {"description": "Summarize /notes/plan.md for me.", "subagent_type": "general-purpose"}},
			                  {"name": "task", "args": {"description": "Check the tests pass.", "subagent_type": "general-purpose"}},
			                  {"name": "task", "args": {"description": "Loop.", "subagent_type": "looper"}}]},
			  {"content": ""}],
			"general-purpose": [[{"content": ""}], [{"content": "The plan has three phases."}], [{"content": "All tests pass."}]],
			"looper": [[{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}]]}}`)
		for _, k := range []string{"empty_receipt", "context_missing", "unsynthesized_fanout", "unused_receipt", "budget"} {
			if got[k] == 0 {
				t.Errorf("no %s note: %v", k, got)
			}
		}
		if got["context_missing"] != 2 {
			t.Errorf("context_missing = %d, want 2 (\"above\" and a path that is no file)", got["context_missing"])
		}
	})
	t.Run("a receipt quoted in CJK text is used", func(t *testing.T) {
		got := kinds(`{"name": "cjk", "prompt": "go", "script": {
			"main": [{"tool_calls": [{"name": "task", "args": {"description": "Compute six times seven.", "subagent_type": "general-purpose"}}]}, {"content": "结论：六乘七是 42。"}],
			"general-purpose": [[{"content": "子 Agent 的最终报告：结论是 42。"}]]}}`)
		if len(got) != 0 {
			t.Fatalf("notes = %v; want none: main quotes the receipt", got)
		}
	})
	t.Run("a task that carries what it points back at is no mistake", func(t *testing.T) {
		got := kinds(`{"name": "carried", "prompt": "go", "script": {
			"main": [{"tool_calls": [{"name": "task", "args": {"description": "Improve your previous draft:\n\nDelegation Studio runs agents and shows them.", "subagent_type": "general-purpose"}}]}, {"content": "The improved draft shows agents."}],
			"general-purpose": [[{"content": "Delegation Studio shows agents delegating."}]]}}`)
		if len(got) != 0 {
			t.Fatalf("notes = %v; want none", got)
		}
	})
	t.Run("a file the task asks the child to write is no missing context", func(t *testing.T) {
		got := kinds(`{"name": "writes", "prompt": "go", "script": {
			"main": [{"tool_calls": [{"name": "task", "args": {"description": "Write the plan to /plan.md.", "subagent_type": "general-purpose"}}]}, {"content": "The plan is in /plan.md."}],
			"general-purpose": [[{"tool_calls": [{"name": "write_file", "args": {"file_path": "/plan.md", "content": "1. ship"}}]}, {"content": "Wrote /plan.md."}]]}}`)
		if len(got) != 0 {
			t.Fatalf("notes = %v; want none", got)
		}
	})
	t.Run("words split CJK into pairs and keep file names", func(t *testing.T) {
		got := view.Words("结论是 42。See /config/a.toml, OK?")
		for _, w := range []string{"结论", "论是", "42", "config/a.toml", "config", "a.toml", "see", "ok"} {
			if !slices.Contains(got, w) {
				t.Errorf("Words = %q; want %q in it", got, w)
			}
		}
		if slices.Contains(got, "42。see") || slices.Contains(got, "是") {
			t.Errorf("Words = %q; punctuation must split, single CJK characters are no words", got)
		}
	})
}

// TestOverwrittenNote: two agents changing one path in one step lose the
// earlier change, and a note says so; the same content written again
// loses nothing.
func TestOverwrittenNote(t *testing.T) {
	kinds := func(doc string) map[string]int { return noteKinds(t, doc) }
	// One step of main: its own write, then two children's; the second
	// child writes what the first did (nothing lost), and main's next
	// step writes the path again (another step).
	doc := func(second string) string {
		return `{"name": "clash", "prompt": "go", "agent": {"files_merge": "delta"}, "script": {
		"main": [
		  {"tool_calls": [{"name": "write_file", "args": {"file_path": "/x.md", "content": "main's"}},
		                  {"name": "task", "args": {"description": "Write /x.md.", "subagent_type": "general-purpose"}},
		                  {"name": "task", "args": {"description": "Write /x.md too.", "subagent_type": "general-purpose"}}]},
		  {"tool_calls": [{"name": "edit_file", "args": {"file_path": "/x.md", "old_string": "x", "new_string": "y"}}]},
		  {"content": "Done: /x.md holds the last write."}],
		"general-purpose": [
		  [{"tool_calls": [{"name": "write_file", "args": {"file_path": "/x.md", "content": "child's"}}]}, {"content": "Wrote /x.md."}],
		  [{"tool_calls": [{"name": "write_file", "args": {"file_path": "/x.md", "content": ` + second + `}}]}, {"content": "Wrote /x.md too."}]]}}`
	}
	if got := kinds(doc(`"child's"`)); got["overwritten"] != 1 {
		t.Errorf("main's write, then a child's: %d overwritten notes, want 1 (the second child wrote the same): %v", got["overwritten"], got)
	}
	if got := kinds(doc(`"another"`)); got["overwritten"] != 2 {
		t.Errorf("main's write, then two children's, each different: %d overwritten notes, want 2: %v", got["overwritten"], got)
	}
}

func TestDollars(t *testing.T) {
	for x, want := range map[float64]string{0: "$0", 12.345: "$12.35", 1: "$1.00", 0.5: "$0.500", 0.0123: "$0.0123", 0.00104: "$0.00104", 0.0000031: "$0.00000310"} {
		if got := view.Dollars(x); got != want {
			t.Errorf("Dollars(%v) = %s, want %s", x, got, want)
		}
	}
}

// TestEvictionsCounted: a prompt over 200,000 characters goes to a file
// (delegation.md §12); main's economics count it, and every call that reads
// the pointer (main's two and its fork's one, which inherits it) counts
// the tokens it did not read; a snapshot keeps the count going.
func TestEvictionsCounted(t *testing.T) {
	prompt, _ := json.Marshal(strings.Repeat("a line of the log\n", 12000))
	tr := runTrace(t, `{"name": "big", "prompt": `+string(prompt)+`,
 "subagents": [{"name": "fk", "description": "d", "mode": "fork"}],
 "script": {"main": [{"tool_calls": [{"name": "task", "args": {"description": "look", "subagent_type": "fk"}}]}, {"content": "done"}],
  "fk": [[{"content": "seen"}]]}}`)
	st, err := view.FromTrace(tr, 0)
	if err != nil {
		t.Fatal(err)
	}
	main := st.Agent("main")
	ev := main.Evicted
	if ev.Messages != 1 || ev.Tokens < 40000 || ev.PointerTokens == 0 || ev.PointerTokens > 400 {
		t.Fatalf("main's evictions: %+v", ev)
	}
	saved := ev.Tokens - ev.PointerTokens
	if ev.Calls != 2 || ev.Saved != 2*saved {
		t.Fatalf("main's calls saved %+v, want 2 calls of %d", ev, saved)
	}
	var fork *view.Agent
	for _, a := range st.Agents {
		if a.Name == "fk" {
			fork = a
		}
	}
	if fork.Evicted.Messages != 0 || fork.Evicted.Calls != 1 || fork.Evicted.Saved != saved {
		t.Fatalf("the fork's reading of the inherited pointer: %+v", fork.Evicted)
	}
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := view.Restore(b)
	if err != nil || len(back.Agent("main").EvictedRefs) != 1 {
		t.Fatalf("restored: %v", err)
	}
}

// TestReceiptEvictionCounted: a child's receipt over 80,000 characters goes
// to a file (delegation.md §12); its delegation counts what that kept out
// of the parent: the receipt's tokens, its pointer's, and the tokens each
// of the parent's later calls did not read. A receipt that stays whole
// counts nothing.
func TestReceiptEvictionCounted(t *testing.T) {
	report, _ := json.Marshal(strings.Repeat("Finding: the cache was cold.\n", 3000))
	tr := runTrace(t, `{"name": "big", "prompt": "p",
 "subagents": [{"name": "r", "description": "d"}, {"name": "s", "description": "d"}],
 "script": {"main": [{"tool_calls": [{"name": "task", "args": {"description": "all", "subagent_type": "r"}}, {"name": "task", "args": {"description": "some", "subagent_type": "s"}}]},
   {"content": "reading", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "done"}],
  "r": [[{"content": `+string(report)+`}]], "s": [[{"content": "short"}]]}}`)
	st, err := view.FromTrace(tr, 0)
	if err != nil {
		t.Fatal(err)
	}
	var big, small *view.Delegation
	for _, d := range st.Delegations {
		switch st.Agent(d.ChildID).Name {
		case "r":
			big = d
		case "s":
			small = d
		}
	}
	ev, ok := st.ReceiptEvicted(big)
	if !ok || ev.Tokens < 20000 || ev.PointerTokens != big.Receipt.Tokens || ev.PointerTokens > ev.Tokens/10 {
		t.Fatalf("the big receipt's eviction: %+v (%v)", ev, ok)
	}
	if big.LaterCalls != 2 || ev.Calls != 2 || ev.Saved != 2*(ev.Tokens-ev.PointerTokens) {
		t.Fatalf("the parent's %d later calls saved %+v, want 2 calls of %d", big.LaterCalls, ev, ev.Tokens-ev.PointerTokens)
	}
	if ev, ok := st.ReceiptEvicted(small); ok {
		t.Fatalf("a whole receipt counted as evicted: %+v", ev)
	}
}
