package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var failureIsolation = lessonDef{
	name:    "failure-isolation",
	title:   "Failure stays in the child",
	article: "Article 3 (subagent patterns), §3",
	description: "Article 3 (subagent patterns), §3, 'failure must be isolated': one of two parallel children hits its " +
		"step limit. Look at the receipts: the failed child's comes back marked is_error and says why, its sibling " +
		"finishes normally, and the parent carries on — it re-sends the search, narrower, and the run ends done.",
	table: failureIsolationTable,
}

func failureIsolationTable(r runs) (Table, error) {
	v := r.view("failure-isolation")
	flaky, err := oneChild(v, "flaky")
	if err != nil {
		return Table{}, err
	}
	steady, err := oneChild(v, "steady")
	if err != nil {
		return Table{}, err
	}
	retry, err := oneChild(v, delegation.GeneralPurposeName)
	if err != nil {
		return Table{}, err
	}
	sc, err := scenarioOf(v.t)
	if err != nil {
		return Table{}, err
	}
	maxSteps := sc.Team.Subagent("flaky").MaxSteps
	tab := Table{
		Title:   "Two children at once, one of them failing",
		Columns: []string{"agent", "status", "model calls", "receipt is_error", "receipt"},
	}
	for _, d := range []*delegationRun{flaky, steady, retry} {
		calls := itoa(d.child.Steps)
		if d == flaky {
			calls += fmt.Sprintf(" (max_steps %d)", maxSteps)
		}
		tab.Rows = append(tab.Rows, []string{d.child.Name, d.child.Status, calls, yesNo(d.receipt.IsError), clip(d.receipt.Content, 90)})
	}
	main := flaky.main
	tab.Rows = append(tab.Rows, []string{"main (the parent)", v.t.Session.Status, itoa(main.Steps), "", ""})
	tab.Article = &ArticleTable{
		Columns: []string{"when", "the article's rule"},
		Rows: [][]string{
			{"a child times out or reaches its step limit", "its result comes back with is_error: True ('(子任务达到步数上限未完成)': the subtask reached its step limit unfinished)"},
			{"then", "the main agent decides whether to re-dispatch or change route; one subtask's crash must not end the whole task"},
		},
	}
	tab.Note = "The article gives the rule, not a measurement; our failure receipt's wording is our own."
	fins := events[delegation.DelegationFinished](v, delegation.EventDelegationFinished)
	finErr := map[string]bool{}
	for _, f := range fins {
		finErr[f.Data.ChildID] = f.Data.IsError
	}
	afterFailure := false
	for _, c := range v.turns(main.ID) {
		if v.occurrences(c, flaky.receipt.Content) > 0 {
			afterFailure = true
		}
	}
	tab.Checks = append(tab.Checks,
		check("the flaky child failed at its step limit", flaky.child.Status == delegation.StatusFailed && flaky.child.Steps == maxSteps &&
			strings.Contains(flaky.child.Error, "step limit"), "status %s after %d calls: %s", flaky.child.Status, flaky.child.Steps, flaky.child.Error),
		check("its receipt is marked is_error and says what happened", flaky.receipt.IsError && finErr[flaky.child.ID] &&
			strings.Contains(flaky.receipt.Content, "step limit"), "%q", clip(flaky.receipt.Content, 90)),
		check("its sibling, running at the same time, finished normally", steady.child.Status == delegation.StatusDone && !steady.receipt.IsError,
			"%q", steady.receipt.Content),
		check("the parent read the error receipt and carried on: it re-sent the search, narrower", afterFailure &&
			retry.child.Status == delegation.StatusDone, "the retry answered %q", retry.receipt.Content),
		check("the session ended done: a child's failure does not fail the run", v.t.Session.Status == delegation.StatusDone,
			"session %s", v.t.Session.Status),
	)
	return tab, nil
}
