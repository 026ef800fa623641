package lessons

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var structuredFork = lessonDef{
	name:    "structured-fork",
	title:   "response_format with a fork",
	article: "Article 1 (the task tool), §3",
	description: "Article 1 (the task tool), §3: a response_format goes together with mode fork, where skills do not. Look at " +
		"the build rows, then at the run: the fork has the parent's tools plus one named after the schema, answers by " +
		"calling it, and the receipt is compact JSON; the structured response is held back, the parent's state is unchanged.",
	table: structuredForkTable,
}

func structuredForkTable(r runs) (Table, error) {
	v := r.view("structured-fork")
	d, err := oneChild(v, "analyst")
	if err != nil {
		return Table{}, err
	}
	rf := json.RawMessage(`{"title":"Findings","type":"object","properties":{"findings":{"type":"string"}},"required":["findings"]}`)
	withFormat := buildResult(delegation.TeamSpec{Subagents: []delegation.Spec{{Name: "x", Description: "d", Mode: delegation.ModeFork, ResponseFormat: rf}}},
		func(t *delegation.Team) string { return "x is a fork with a response_format" })
	withSkills := buildResult(delegation.TeamSpec{Subagents: []delegation.Spec{{Name: "x", Description: "d", Mode: delegation.ModeFork, Skills: []string{"search"}}}},
		func(t *delegation.Team) string { return "x is a fork with skills" })
	var fin delegation.DelegationFinished
	for _, f := range events[delegation.DelegationFinished](v, delegation.EventDelegationFinished) {
		fin = f.Data
	}
	var parsed map[string]any
	parses := json.Unmarshal([]byte(d.receipt.Content), &parsed) == nil
	parentTools := toolNames(d.main.Tools)
	childTools := toolNames(d.child.Tools)
	extra := ""
	if len(childTools) == len(parentTools)+1 && slices.Equal(childTools[:len(parentTools)], parentTools) {
		extra = childTools[len(childTools)-1]
	}
	tab := Table{
		Title:   "A fork with a response_format",
		Columns: []string{"", "what we get"},
		Rows: [][]string{
			{"response_format on a fork (build)", withFormat},
			{"skills on a fork (build)", withSkills},
			{"the fork's tools", fmt.Sprintf("%d: the parent's %d and %s", len(childTools), len(parentTools), extra)},
			{"the receipt", d.receipt.Content},
			{"parses as JSON", yesNo(parses)},
			{"came back", strings.Join(fin.Returned, ", ")},
			{"held back", strings.Join(fin.HeldBack, ", ")},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"", "the article"},
		Rows: [][]string{
			{"response_format with mode='fork'", "allowed: the two go together, unlike skills"},
			{"skills with mode='fork'", "SubAgent 'x' cannot set skills under mode='fork'; the parent's skills are inherited instead."},
			{"the receipt", `{"findings":"3 条线索","confidence":0.82}`},
			{"the parent's state", "still ['files', 'messages']: the structure does not enter it"},
		},
	}
	tab.Note = "The receipt is the article's JSON, byte for byte; the article shows the state keys, we show what delegation.finished returned and held back."
	tab.Versus = []Versus{
		{What: "response_format with a fork", Article: tab.Article.Rows[0][1], Ours: withFormat, Why: "the same rule"},
		{What: "skills with a fork", Article: tab.Article.Rows[1][1], Ours: withSkills, Why: "the same text"},
		{What: "the receipt", Article: tab.Article.Rows[2][1], Ours: d.receipt.Content, Why: "the same JSON"},
		{What: "the parent's state", Article: tab.Article.Rows[3][1], Ours: "came back: " + strings.Join(fin.Returned, ", ") + "; held back: " + strings.Join(fin.HeldBack, ", "),
			Why: "the structured response stays in the child; only its JSON, the receipt, reaches the parent"},
	}
	tab.Checks = append(tab.Checks,
		check("a fork may have a response_format", strings.HasPrefix(withFormat, "accepted"), "%s", withFormat),
		check("a fork may not have skills, with the exact text", strings.Contains(withSkills, "cannot set skills under mode='fork'"), "%s", withSkills),
		check("the fork has the parent's tools and one more, named after the schema's title", extra == "Findings", "%s", strings.Join(childTools, ", ")),
		check("the fork inherits the parent's conversation", d.child.Mode != nil && *d.child.Mode == string(delegation.ModeFork) && v.occurrences(mustFirst(v, d), "cron overlap") > 0,
			"the leads are in its first call: %d", v.occurrences(mustFirst(v, d), "cron overlap")),
		check("the receipt is the article's compact JSON", d.receipt.Content == `{"findings":"3 条线索","confidence":0.82}` && parses, "%s", d.receipt.Content),
		check("the structured response is held back", slices.Contains(fin.HeldBack, "structured_response") && !slices.Contains(fin.Returned, "structured_response"),
			"held back: %s", strings.Join(fin.HeldBack, ", ")),
	)
	return tab, nil
}

// mustFirst is a child's first turn, or an empty call when it made none.
func mustFirst(v *view, d *delegationRun) trace.ModelCall {
	c, _ := v.firstCall(d.child.ID)
	return c
}
