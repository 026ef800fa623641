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
		"finishes normally, and the parent carries on — it re-sends the search, narrower, and the run ends done. " +
		"Then the same run as deepagents runs it (compat 'deepagents'): the failure cancels the sibling and fails the session.",
	notes: map[string][]string{"ours": {"budget"}, "deepagents": {"budget"}},
	variants: []variantDef{
		{name: "ours", label: "Ours: failure stays in the child"},
		{name: "deepagents", label: "deepagents (compat: deepagents): failure fails the run", expect: delegation.StatusFailed},
	},
	table: failureIsolationTable,
}

func failureIsolationTable(r runs) (Table, error) {
	v := r.view("ours")
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
		Columns: []string{"agent", "status", "model calls", "receipt is_error", "receipt", "under compat deepagents"},
	}
	da := r.view("deepagents")
	daStatus := func(name string) string {
		as := da.agents(name)
		if len(as) == 0 {
			return "never started"
		}
		a := as[0]
		if a.Status == delegation.StatusFailed {
			return "failed: " + clip(a.Error, 70)
		}
		return a.Status
	}
	for _, d := range []*delegationRun{flaky, steady, retry} {
		calls := itoa(d.child.Steps)
		if d == flaky {
			calls += fmt.Sprintf(" (max_steps %d)", maxSteps)
		}
		tab.Rows = append(tab.Rows, []string{d.child.Name, d.child.Status, calls, yesNo(d.receipt.IsError), clip(d.receipt.Content, 90), daStatus(d.child.Name)})
	}
	main := flaky.main
	tab.Rows = append(tab.Rows, []string{"main (the parent)", v.t.Session.Status, itoa(main.Steps), "", "", "session " + da.t.Session.Status})
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
	compatChecks, err := failureCompatChecks(v, da, daStatus)
	if err != nil {
		return Table{}, err
	}
	tab.Checks = append(tab.Checks, compatChecks...)
	tab.Versus = []Versus{
		{What: "a child reaches its step limit", Article: tab.Article.Rows[0][1], Ours: tab.Rows[0][4],
			Why: "the same rule; deepagents itself does otherwise: the run fails (the deepagents run: " + da.t.Session.Status + ")"},
		{What: "then", Article: tab.Article.Rows[1][1], Ours: "the parent retried and the session ended " + v.t.Session.Status,
			Why: "failure stays in the child (delegation.md §9)"},
	}
	return tab, nil
}

// failureCompatChecks: under compat "deepagents" the same failure fails
// the session, its sibling cancelled.
func failureCompatChecks(v, da *view, daStatus func(string) string) ([]Check, error) {
	daMain, err := da.agent("main")
	if err != nil {
		return nil, err
	}
	daSteady := da.agents("steady")
	receipts := 0
	for _, m := range da.list(daMain.ID) {
		if m.Role == string(delegation.RoleTool) {
			receipts++
		}
	}
	return []Check{
		check("under compat deepagents the same failure fails the session", da.t.Session.Status == delegation.StatusFailed &&
			strings.Contains(da.t.Session.Error, "subagent 'flaky' failed"), "session %s: %s", da.t.Session.Status, clip(da.t.Session.Error, 90)),
		check("under compat deepagents the sibling still at work is cancelled, and no receipt reaches the parent",
			len(daSteady) == 1 && daSteady[0].Status == delegation.StatusFailed && strings.Contains(daSteady[0].Error, "its sibling 'flaky' failed") && receipts == 0,
			"steady: %s; results in the parent: %d", daStatus("steady"), receipts),
		check("the two runs played the same scripts: only compat differs", sameTeamsButCompat(v, da), "the scenarios differ only in agent.compat"),
	}, nil
}

// sameTeamsButCompat reports whether two runs played the same script with
// the same subagents, one of them under compat "deepagents".
func sameTeamsButCompat(ours, da *view) bool {
	so, err1 := scenarioOf(ours.t)
	sd, err2 := scenarioOf(da.t)
	if err1 != nil || err2 != nil {
		return false
	}
	return string(so.File.Script) == string(sd.File.Script) && so.File.Prompt == sd.File.Prompt &&
		compactJSON(so.File.Subagents) == compactJSON(sd.File.Subagents) &&
		so.Team.Main.Compat == delegation.CompatNone && sd.Team.Main.Compat == delegation.CompatDeepagents
}
