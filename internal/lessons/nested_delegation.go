package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var nestedDelegation = lessonDef{
	name:    "nested-delegation",
	title:   "A subagent cannot delegate further",
	article: "Article 1 (the task tool), §5",
	description: "Article 1 (the task tool), §5: two ways a child is kept from delegating again. Look at the " +
		"tools: the isolated helper has seven, no task, so it cannot even try; the fork has all eight, calls " +
		"task, and gets a fixed refusal it reads before doing the job itself. The parent never sees the attempt.",
	table: nestedDelegationTable,
	claims: []claim{
		{"has seven, no task", "helper", "tools"},
		{"has all eight", "forker", "tools"},
	},
}

func nestedDelegationTable(r runs) (Table, error) {
	v := r.view("nested-delegation")
	iso, err := oneChild(v, "helper")
	if err != nil {
		return Table{}, err
	}
	fork, err := oneChild(v, "forker")
	if err != nil {
		return Table{}, err
	}
	refused := events[delegation.DelegationRefused](v, delegation.EventDelegationRefused)
	attempts := func(a trace.Agent) (n int, results []trace.Message) {
		for _, m := range v.list(a.ID) {
			for _, tc := range m.ToolCalls {
				if tc.Name == delegation.TaskToolName {
					n++
					for _, x := range v.list(a.ID) {
						if x.ToolCallID != nil && *x.ToolCallID == tc.ID {
							results = append(results, x)
						}
					}
				}
			}
		}
		return n, results
	}
	isoN, _ := attempts(iso.child)
	forkN, forkResults := attempts(fork.child)
	inParent := 0
	for _, m := range v.list(fork.main.ID) {
		inParent += strings.Count(m.Content, delegation.NestedRefusal)
	}
	grandchildren := 0
	for _, a := range v.t.Agents {
		if a.ParentID != nil && (*a.ParentID == iso.child.ID || *a.ParentID == fork.child.ID) {
			grandchildren++
		}
	}
	outcome := func(n int, results []trace.Message) string {
		if n == 0 {
			return "never tried"
		}
		if len(results) > 0 && results[0].Content == delegation.NestedRefusal {
			return "refused: " + quote(results[0].Content)
		}
		return fmt.Sprintf("%d attempt(s)", n)
	}
	tab := Table{
		Title:   "Two children, two ways of not delegating",
		Columns: []string{"child", "mode", "tools", "task among them?", "tried to delegate?", "what happened", "finished", "the parent saw the attempt?"},
		Rows: [][]string{
			{"helper", "isolated", itoa(len(iso.child.Tools)), yesNo(hasToolNamed(iso.child.Tools, delegation.TaskToolName)), yesNo(isoN > 0),
				outcome(isoN, nil), iso.child.Status, "–"},
			{"forker", "fork", itoa(len(fork.child.Tools)), yesNo(hasToolNamed(fork.child.Tools, delegation.TaskToolName)), yesNo(forkN > 0),
				outcome(forkN, forkResults), fork.child.Status, yesNo(inParent > 0)},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"child", "mode", "tools", "task among them?", "what happens"},
		Rows: [][]string{
			{"isolated child", "isolated", "7", "no", "cannot delegate: there is no tool to call, and no trace of it"},
			{"fork child", "fork", "8", "yes", "the call is refused with the fixed sentence; the model reads it and carries on; the parent never knows"},
		},
	}
	tab.Note = "Same as the article, including the refusal's exact text."
	var afterRefusal bool
	for i, c := range v.turns(fork.child.ID) {
		if i > 0 && v.occurrences(c, delegation.NestedRefusal) > 0 {
			afterRefusal = true
		}
	}
	tab.Checks = append(tab.Checks,
		check("the isolated child has seven tools and no task", len(iso.child.Tools) == 7 && !hasToolNamed(iso.child.Tools, delegation.TaskToolName),
			"%s", strings.Join(toolNames(iso.child.Tools), ", ")),
		check("the fork has the parent's eight tools, task included, at the same cost",
			len(fork.child.Tools) == 8 && toolTokens(fork.child.Tools, delegation.TaskToolName) == toolTokens(fork.main.Tools, delegation.TaskToolName),
			"%s; task: %d tokens, the parent's %d", strings.Join(toolNames(fork.child.Tools), ", "),
			toolTokens(fork.child.Tools, delegation.TaskToolName), toolTokens(fork.main.Tools, delegation.TaskToolName)),
		check("the fork's task call was refused with the exact sentence",
			forkN == 1 && len(forkResults) == 1 && forkResults[0].Content == delegation.NestedRefusal &&
				len(refused) == 1 && refused[0].Data.Reason == delegation.RefusedNested,
			"tool result: %q", firstContent(forkResults)),
		check("the fork read the refusal on its next turn and finished the job itself",
			afterRefusal && fork.child.Status == delegation.StatusDone && strings.Contains(fork.receipt.Content, "nmae"),
			"receipt: %q", fork.receipt.Content),
		check("no grandchild was started", grandchildren == 0, "%d agents started by a child", grandchildren),
		check("the parent never learns of the attempt: the refusal is only in the fork's own list", inParent == 0,
			"the refusal appears %d times in the parent's messages", inParent),
	)
	tab.Versus = []Versus{
		{What: "the isolated child's tools", Article: "7, no task", Ours: tab.Rows[0][2] + ", task: " + tab.Rows[0][3], Why: "the same: an isolated child is built without task"},
		{What: "the fork's tools", Article: "8, task included", Ours: tab.Rows[1][2] + ", task: " + tab.Rows[1][3], Why: "the same: a fork gets the parent's tools"},
		{What: "the fork's task call", Article: "refused with a fixed sentence", Ours: tab.Rows[1][5], Why: "the same sentence, deepagents' own"},
		{What: "the parent sees the attempt", Article: "no", Ours: tab.Rows[1][7], Why: "the refusal is only in the fork's own list"},
	}
	return tab, nil
}
