package lessons

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var configErrors = lessonDef{
	name:    "config-errors",
	title:   "What is stopped at build time, and the unknown subagent",
	article: "Article 1 (the task tool), §6",
	description: "Article 1 (the task tool), §6: the mistakes a team can hold, and what each one gets. The build-time " +
		"rows are computed by building small teams with the engine's own code; the last row comes from a run in " +
		"which the model names a subagent that does not exist and gets a sentence back, not a crash.",
	table: configErrorsTable,
}

// buildResult builds a team with the engine's code and says what happened:
// every error, or what the team accepted.
func buildResult(ts delegation.TeamSpec, accepted func(*delegation.Team) string) string {
	team, err := delegation.BuildTeam(ts)
	if err != nil {
		var fe delegation.FieldErrors
		if errors.As(err, &fe) {
			msgs := make([]string, len(fe))
			for i, e := range fe {
				msgs[i] = e.Message
			}
			return "error: " + strings.Join(msgs, "; ")
		}
		return "error: " + err.Error()
	}
	return "accepted: " + accepted(team)
}

func configErrorsTable(r runs) (Table, error) {
	rows := configBuildRows()
	v := r.view("config-errors")
	main, err := v.agent("main")
	if err != nil {
		return Table{}, err
	}
	refusals := events[delegation.DelegationRefused](v, delegation.EventDelegationRefused)
	unknown := ""
	if len(refusals) > 0 {
		unknown = refusals[0].Data.Message
	}
	// The sentence as the model read it: the tool result of the refused call.
	var readBack string
	for _, m := range v.list(main.ID) {
		if len(refusals) > 0 && m.ToolCallID != nil && *m.ToolCallID == refusals[0].Data.ToolCallID {
			readBack = m.Content
		}
	}
	rows = append(rows, configRow{"task with an unknown subagent_type (at run time)", "tool result: " + readBack,
		"We cannot invoke subagent researcher because it does not exist, the only allowed types are `general-purpose`",
		"an unknown subagent_type gets the exact text of delegation.md §3"})

	tab := Table{
		Title:   "What you did, and what you get",
		Columns: []string{"what you did", "what you get"},
	}
	for _, x := range rows {
		tab.Rows = append(tab.Rows, []string{x.did, x.result})
	}
	tab.Article = &ArticleTable{
		Columns: []string{"what you did", "what you get"},
		Rows: [][]string{
			{"mode 'shared'", "SubAgent 'x' has invalid mode 'shared'; expected 'isolated' or 'fork'"},
			{"skills on a fork subagent", "SubAgent 'x' cannot set skills under mode='fork'; the parent's skills are inherited instead."},
			{"response_format a string or a number", "ValueError: Unsupported schema type: <class 'str'> (only a Pydantic class, dataclass, TypedDict or JSON schema dict)"},
			{"mode 'handoff'", "accepted: the old name of isolated"},
			{"an empty subagent list", "no error: the default general-purpose is added back"},
			{"an empty list at the middleware level", "At least one subagent must be specified"},
			{"task with an unknown subagent_type", "We cannot invoke subagent researcher because it does not exist, the only allowed types are general-purpose"},
		},
	}
	tab.Note = "The response_format message is our own wording (it names the type it got, as delegation.md §2 asks); every other text is the same, and our duplicate-name row is from delegation.md §2."
	for _, x := range rows {
		tab.Checks = append(tab.Checks, check(x.claim, strings.Contains(x.result, x.want), "%s", x.result))
	}
	var retried bool
	for _, a := range v.agents(delegation.GeneralPurposeName) {
		retried = retried || a.Status == delegation.StatusDone
	}
	tab.Checks = append(tab.Checks,
		check("the unknown subagent_type is text for the model, not an error that stops the run",
			len(refusals) == 1 && refusals[0].Data.Reason == delegation.RefusedUnknownType && unknown == readBack &&
				v.t.Session.Status == delegation.StatusDone && retried,
			"delegation.refused (%s); the session ended %s; the retry with general-purpose finished: %s",
			firstReason(refusals), v.t.Session.Status, yesNo(retried)),
		check("the sentence is the engine's own UnknownTypeMessage",
			readBack == delegation.UnknownTypeMessage("researcher", []string{delegation.GeneralPurposeName}), "%q", readBack),
	)
	tab.Versus = configVersus(tab)
	return tab, nil
}

// configRow is one thing a user may do, what it gave, and what the lesson
// claims of it.
type configRow struct{ did, result, want, claim string }

// configBuildRows builds a team of each kind the article tried.
func configBuildRows() []configRow {
	x := func(s delegation.Spec) delegation.TeamSpec {
		if s.Name == "" {
			s.Name = "x"
		}
		if s.Description == "" {
			s.Description = "does x"
		}
		return delegation.TeamSpec{Subagents: []delegation.Spec{s}}
	}
	names := func(t *delegation.Team) string { return "the subagents are " + strings.Join(t.Names(), ", ") }
	modeOf := func(t *delegation.Team) string { return fmt.Sprintf("x has mode '%s'", t.Subagent("x").Mode) }

	return []configRow{
		{"mode 'shared'", buildResult(x(delegation.Spec{Mode: "shared"}), modeOf),
			"SubAgent 'x' has invalid mode 'shared'; expected 'isolated' or 'fork'", "an unknown mode is an error with the exact text of delegation.md §2"},
		{"skills on a fork subagent", buildResult(x(delegation.Spec{Mode: delegation.ModeFork, Skills: []string{"search"}}), modeOf),
			"SubAgent 'x' cannot set skills under mode='fork'; the parent's skills are inherited instead.", "skills with fork is an error with the exact text of delegation.md §2"},
		{"response_format a string", buildResult(x(delegation.Spec{ResponseFormat: json.RawMessage(`"Findings"`)}), modeOf), "of type string", "a string response_format is an error naming the type it got"},
		{"response_format a number", buildResult(x(delegation.Spec{ResponseFormat: json.RawMessage(`42`)}), modeOf), "of type number", "a number response_format is an error naming the type it got"},
		{"mode 'handoff'", buildResult(x(delegation.Spec{Mode: "handoff"}), modeOf), "accepted: x has mode 'isolated'", "handoff is accepted as the old name of isolated"},
		{"an empty subagent list", buildResult(delegation.TeamSpec{Subagents: []delegation.Spec{}}, names),
			"accepted: the subagents are general-purpose", "an empty subagent list still gets general-purpose"},
		{"the task tool with no one to delegate to (general-purpose off, no subagent)", buildResult(delegation.TeamSpec{Main: delegation.MainSpec{NoGeneralPurpose: true}}, names),
			"At least one subagent must be specified", "a task tool with an empty subagent list fails with the exact text, as deepagents' middleware does"},
		{"general-purpose off, no subagent, and no task tool", buildResult(delegation.TeamSpec{Main: delegation.MainSpec{NoGeneralPurpose: true,
			Tools: []string{"ls", "read_file"}}}, func(t *delegation.Team) string { return "a team without delegation" }),
			"accepted: a team without delegation", "without a task tool no subagent is needed, as create_deep_agent then leaves the task tool out"},
		{"two subagents named x", buildResult(delegation.TeamSpec{Subagents: []delegation.Spec{{Name: "x", Description: "a"}, {Name: "x", Description: "b"}}}, names),
			"Duplicate subagent name 'x'; each subagent must have a unique name.", "a duplicate name is an error with the exact text of delegation.md §2"},
	}
}

// configVersus sets each of the article's rows beside ours.
func configVersus(tab Table) []Versus {
	var out []Versus
	why := map[string]string{
		"response_format a string or a number": "ours names the type it got, as delegation.md §2 asks; deepagents' Python raises its own ValueError",
		"an empty list at the middleware level": "SubAgentMiddleware(subagents=[]) raises this; our team raises it when its task tool has nobody to list, " +
			"which is that middleware with an empty list (create_deep_agent instead leaves the task tool out when general-purpose is off and there is no subagent: our last build row)",
	}
	ours := map[string]string{
		"response_format a string or a number":  tab.Rows[2][1] + " / " + tab.Rows[3][1],
		"an empty list at the middleware level": tab.Rows[6][1],
		"task with an unknown subagent_type":    tab.Rows[len(tab.Rows)-1][1],
	}
	for _, ar := range tab.Article.Rows {
		v := Versus{What: ar[0], Article: ar[1], Ours: ours[ar[0]], Why: why[ar[0]]}
		for _, r := range tab.Rows {
			if r[0] == ar[0] {
				v.Ours = r[1]
			}
		}
		if v.Why == "" {
			v.Why = "the same text"
		}
		out = append(out, v)
	}
	return out
}

func firstReason(rs []agentEvent[delegation.DelegationRefused]) string {
	if len(rs) == 0 {
		return "none"
	}
	return rs[0].Data.Reason
}
