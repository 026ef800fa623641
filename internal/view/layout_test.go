package view_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
)

// teamScenario is a main agent that sends `fan` tasks in one message, then
// `rounds` more messages of one task each, and a refused one in the first.
func teamScenario(fan, rounds int, name string) string {
	var calls, kids []string
	for i := range fan {
		calls = append(calls, fmt.Sprintf(`{"name": "task", "args": {"description": "Research part %d of the payments service, carefully, and report what you found in one line.", "subagent_type": %q}}`, i, name))
		kids = append(kids, fmt.Sprintf(`[{"content": "part %d done"}]`, i))
	}
	calls = append(calls, `{"name": "task", "args": {"description": "x", "subagent_type": "nobody"}}`)
	turns := []string{`{"content": "at once", "tool_calls": [` + strings.Join(calls, ",") + `]}`}
	for i := range rounds {
		turns = append(turns, fmt.Sprintf(`{"content": "review %d", "tool_calls": [{"name": "task", "args": {"description": "Review round %d.", "subagent_type": "reviewer"}}]}`, i, i))
		kids = append(kids, fmt.Sprintf(`[{"content": "review %d done"}]`, i))
	}
	turns = append(turns, `{"content": "done"}`)
	var scripts []string
	scripts = append(scripts, `"main": [`+strings.Join(turns, ",")+`]`)
	scripts = append(scripts, fmt.Sprintf(`%q: [%s]`, name, strings.Join(kids[:fan], ",")))
	scripts = append(scripts, `"reviewer": [`+strings.Join(kids[fan:], ",")+`]`)
	return fmt.Sprintf(`{"name": "team", "prompt": "Study the payments service.",
 "agent": {"max_concurrency": 64},
 "subagents": [{"name": %q, "description": "d"}, {"name": "reviewer", "description": "d", "mode": "fork"}],
 "script": {%s}}`, name, strings.Join(scripts, ","))
}

func layoutOf(t *testing.T, doc string) view.TreeLayout {
	t.Helper()
	tr := runTrace(t, doc)
	return view.Layout(tree(t, tr), view.LayoutOptions{Selected: "a2", Prompt: "Study the payments service.", Words: english{}})
}

// english words the tree as the English catalogue does (web/templates
// tests that it does).
type english struct{}

func (english) Round(r view.PlacedRound) string {
	s := fmt.Sprintf("round %d", r.Number)
	if r.Parallel {
		s += fmt.Sprintf(" · %d at once", r.Members)
	}
	if r.Step > 0 {
		s += fmt.Sprintf(" · step %d", r.Step)
	}
	return s
}

func (english) NoTask() string { return "(no task)" }

func (english) Refused(n view.PlacedNode) (mark, why, askedBy string) {
	why = n.Reason
	switch n.Reason {
	case delegation.RefusedNested:
		why = "a subagent may not delegate"
	case delegation.RefusedUnknownType:
		why = "no subagent of that name"
	}
	return "refused", why, "asked by " + n.ParentID
}

// counters are an agent box's counters as the English page draws them.
func counters(n view.PlacedNode) (stats, tokens string) {
	calls := "1 call"
	if n.Calls != 1 {
		calls = view.Thousands(n.Calls) + " calls"
	}
	return n.Status + " · " + calls, view.CompactTokens(n.Tokens) + " tok"
}

func overlap(a, b view.PlacedNode) bool {
	return a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
}

func TestLayout(t *testing.T) {
	l := layoutOf(t, teamScenario(3, 3, "researcher"))
	byID := map[string]view.PlacedNode{}
	var refused []view.PlacedNode
	for _, n := range l.Nodes {
		if n.AgentID == "" {
			refused = append(refused, n)
		} else {
			byID[n.AgentID] = n
		}
	}
	main := byID["main"]
	t.Run("main sits at the top left, where the tree's box opens", func(t *testing.T) {
		for _, n := range l.Nodes {
			if n.Y < main.Y || n.X < main.X {
				t.Fatalf("%s at (%d, %d) is above or left of main at (%d, %d)", n.Name, n.X, n.Y, main.X, main.Y)
			}
		}
	})
	t.Run("a fan-out stands side by side in one round", func(t *testing.T) {
		a1, a2, a3 := byID["a1"], byID["a2"], byID["a3"]
		if a1.Y != a2.Y || a2.Y != a3.Y || !(a1.X < a2.X && a2.X < a3.X) || a1.Round != 1 || a3.Round != 1 {
			t.Fatalf("fan-out: a1 (%d,%d) r%d, a2 (%d,%d), a3 (%d,%d) r%d; want one row, left to right, round 1", a1.X, a1.Y, a1.Round, a2.X, a2.Y, a3.X, a3.Y, a3.Round)
		}
		if len(refused) != 1 || refused[0].Y != a1.Y || refused[0].Round != 1 {
			t.Fatalf("the refused task call of the same message: %+v; want it in round 1 beside its siblings", refused)
		}
	})
	t.Run("later rounds are drawn one under the other, in time order", func(t *testing.T) {
		prev := byID["a1"]
		for i, id := range []string{"a4", "a5", "a6"} {
			n := byID[id]
			if n.Round != i+2 || n.X != byID["a1"].X || n.Y <= prev.Y+prev.H {
				t.Fatalf("%s: round %d at (%d, %d); want round %d below the previous round (y > %d), at its left edge x=%d", id, n.Round, n.X, n.Y, i+2, prev.Y+prev.H, byID["a1"].X)
			}
			prev = n
		}
		if len(l.Rounds) != 4 || !l.Rounds[0].Parallel || l.Rounds[1].Parallel || l.Rounds[0].Number != 1 || l.Rounds[0].Members != 4 || l.Rounds[0].Step < 1 || l.Rounds[3].Number != 4 ||
			l.Rounds[3].Step <= l.Rounds[2].Step {
			t.Fatalf("rounds: %+v", l.Rounds)
		}
	})
	t.Run("edges: a blocked one for the refusal, parallel ones for the fan-out", func(t *testing.T) {
		blocked, parallel := 0, 0
		for _, e := range l.Edges {
			if e.Blocked {
				blocked++
			}
			if e.Parallel {
				parallel++
			}
		}
		if blocked != 1 || parallel != 4 || len(l.Edges) != 7 {
			t.Fatalf("%d edges, %d blocked, %d parallel; want 7, 1, 4", len(l.Edges), blocked, parallel)
		}
	})
	t.Run("siblings read apart: id and task in the box and the name", func(t *testing.T) {
		seen := map[string]bool{}
		for _, n := range l.Nodes {
			who := n.AgentID
			if who == "" {
				who = n.ParentID + ":" + n.Name
			}
			if seen[who] {
				t.Fatalf("two boxes are %q", who)
			}
			seen[who] = true
			if n.AgentID != "" && !strings.HasPrefix(n.TaskText, n.AgentID+" · ") {
				t.Fatalf("box %s reads %q", n.AgentID, n.TaskText)
			}
		}
		if byID["a2"].Task != "Research part 1 of the payments service, carefully, and report what you found in one line." {
			t.Fatalf("a2 lacks its whole task (its name says it): %q", byID["a2"].Task)
		}
		if !byID["a2"].Selected || byID["a1"].Selected {
			t.Fatalf("selected: a2 %v, a1 %v", byID["a2"].Selected, byID["a1"].Selected)
		}
	})
	checkFits(t, l)
}

// checkFits: no two boxes overlap, no round label runs into a box, every
// line fits its box by its measured width, and the tree fits its size.
func checkFits(t *testing.T, l view.TreeLayout) {
	t.Helper()
	for i, a := range l.Nodes {
		for _, b := range l.Nodes[i+1:] {
			if overlap(a, b) {
				t.Fatalf("%s (%d,%d %dx%d) and %s (%d,%d %dx%d) overlap", a.Name, a.X, a.Y, a.W, a.H, b.Name, b.X, b.Y, b.W, b.H)
			}
		}
		if a.X+a.W > l.Width || a.Y+a.H > l.Height {
			t.Fatalf("%s is outside %dx%d", a.Name, l.Width, l.Height)
		}
		inner := float64(a.W - 20)
		mode := 0.0
		if a.Mode != "" {
			mode = view.TextWidth(a.Mode, 12, false) + 8
		}
		if a.AgentID == "" {
			mode = view.TextWidth("refused", 12, false) + 8
		}
		if w := view.TextWidth(a.NameText, 13, true) + mode; w > inner+0.01 {
			t.Fatalf("%s: name and mode are %.1f px in a box of %.1f", a.Name, w, inner)
		}
		if w := view.TextWidth(a.TaskText, 12, false); w > inner+0.01 {
			t.Fatalf("%s: the task line is %.1f px in a box of %.1f", a.Name, w, inner)
		}
		if a.AgentID == "" {
			_, why, asked := english{}.Refused(a)
			if w := max(view.TextWidth(why, 12, false), view.TextWidth(asked, 12, false)); w > inner+0.01 && a.W < 300 {
				t.Fatalf("%s: the refusal's lines are %.1f px in a box of %.1f", a.Name, w, inner)
			}
			continue
		}
		stats, tokens := counters(a)
		if w := view.TextWidth(stats, 11, false) + 8 + view.TextWidth(tokens, 11, false); w > inner+0.01 {
			t.Fatalf("%s: the counters are %.1f px in a box of %.1f", a.Name, w, inner)
		}
	}
	for _, r := range l.Rounds {
		text := english{}.Round(r)
		if w := view.TextWidth(text, 12, false); float64(r.W) < w {
			t.Fatalf("round label %q is %.1f px, given %d", text, w, r.W)
		}
		for _, n := range l.Nodes {
			box := view.PlacedNode{X: r.X, Y: r.Y - 12, W: r.W, H: 15}
			if overlap(box, n) {
				t.Fatalf("round label %q runs into %s", text, n.Name)
			}
		}
		if r.X+r.W > l.Width {
			t.Fatalf("round label %q is past the tree's width", text)
		}
	}
}

func TestLayoutAtScale(t *testing.T) {
	t.Run("fifty children wrap into rows within the width, main first", func(t *testing.T) {
		l := layoutOf(t, teamScenario(50, 2, "researcher"))
		if l.Width > view.DefaultTreeWidth {
			t.Fatalf("the tree is %d px wide; want at most %d", l.Width, view.DefaultTreeWidth)
		}
		rows := map[int]int{}
		for _, n := range l.Nodes {
			if n.Round == 1 {
				rows[n.Y]++
			}
		}
		if len(rows) < 2 {
			t.Fatalf("the fan-out of 51 task calls stands in %d row(s)", len(rows))
		}
		if l.Nodes[0].AgentID != "main" || l.Nodes[0].X != 12 || l.Nodes[0].Y != 12 {
			t.Fatalf("first box %+v; want main at (12, 12)", l.Nodes[0])
		}
		checkFits(t, l)
	})
	t.Run("a long name is cut, its mode still shown", func(t *testing.T) {
		l := layoutOf(t, teamScenario(2, 1, "security-reviewer-for-payments-service-and-refunds-and-chargebacks"))
		checkFits(t, l)
		for _, n := range l.Nodes {
			if n.AgentID == "a1" {
				if !strings.HasSuffix(n.NameText, "…") || n.Mode != "isolated" || n.Name != "security-reviewer-for-payments-service-and-refunds-and-chargebacks" {
					t.Fatalf("a1 reads %q (mode %q), named %q", n.NameText, n.Mode, n.Name)
				}
				return
			}
		}
		t.Fatal("no a1")
	})
}
