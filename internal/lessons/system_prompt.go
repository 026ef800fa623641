package lessons

import (
	"fmt"
)

var systemPrompt = lessonDef{
	name:    "system-prompt",
	title:   "System prompts: the fork concatenates, the isolated child does not inherit",
	article: "Article 2 (isolated or fork), §3",
	description: "Article 2 (isolated or fork), §3: the system prompt each child's first model call received, " +
		"for every combination of a parent prompt (20 characters) and a child prompt (11). Look at the fork " +
		"column: with both present it is the parent's, a blank line, then the child's (20 + 2 + 11 = 33), never a " +
		"replacement; the isolated column never holds the parent's.",
	variants: []variantDef{
		{name: "parent-only", label: "Parent 20 characters, child none"},
		{name: "both", label: "Parent 20, child 11"},
		{name: "child-only", label: "Parent none, child 11"},
		{name: "neither", label: "Neither"},
	},
	table: systemPromptTable,
}

func promptCell(s, none string) string {
	if s == "" {
		return none
	}
	return fmt.Sprintf("%d characters", chars(s))
}

func systemPromptTable(r runs) (Table, error) {
	tab := Table{
		Title:   "The system prompt each child's first call received",
		Columns: []string{"parent's prompt", "the subagent's own", "the fork child gets", "the isolated child gets"},
	}
	type got struct{ parent, own, fork, iso string }
	all := map[string]got{}
	for _, name := range []string{"parent-only", "both", "child-only", "neither"} {
		v := r.view(name)
		sc, err := scenarioOf(v.t)
		if err != nil {
			return Table{}, err
		}
		var g got
		g.parent = sc.Team.Main.SystemPrompt
		g.own = sc.Team.Subagent("iso").SystemPrompt
		for _, child := range []string{"iso", "fork"} {
			a, err := v.agent(child)
			if err != nil {
				return Table{}, err
			}
			c, err := v.firstCall(a.ID)
			if err != nil {
				return Table{}, err
			}
			if child == "iso" {
				g.iso = c.SystemPrompt
			} else {
				g.fork = c.SystemPrompt
			}
		}
		all[name] = g
		forkCell := promptCell(g.fork, "empty")
		switch {
		case g.fork != "" && g.fork == g.parent:
			forkCell += " (the parent's)"
		case g.fork != "" && g.parent != "" && g.own != "":
			forkCell += fmt.Sprintf(" (%d + 2 + %d, joined)", chars(g.parent), chars(g.own))
		}
		tab.Rows = append(tab.Rows, []string{promptCell(g.parent, "none"), promptCell(g.own, "none"), forkCell, promptCell(g.iso, "empty")})
	}
	tab.Article = &ArticleTable{
		Columns: tab.Columns,
		Rows: [][]string{
			{"20 characters", "none", "20 characters (the parent's)", "empty"},
			{"20 characters", "11 characters", "33 characters (20 + 2 + 11, joined)", "11 characters"},
			{"none", "11 characters", "11 characters", "11 characters"},
			{"none", "none", "empty", "empty"},
		},
	}
	tab.Note = "The same lengths as the article: we chose prompts of 20 and 11 characters to match it."
	b := all["both"]
	tab.Checks = append(tab.Checks,
		check("with both prompts, the fork's is the parent's, a blank line, then its own: parent + 2 + child characters",
			b.fork == b.parent+"\n\n"+b.own && chars(b.fork) == chars(b.parent)+2+chars(b.own),
			"%d = %d + 2 + %d", chars(b.fork), chars(b.parent), chars(b.own)),
		check("with only the parent's, the fork gets the parent's and the isolated child nothing",
			all["parent-only"].fork == all["parent-only"].parent && all["parent-only"].iso == "",
			"fork %q, isolated %q", all["parent-only"].fork, all["parent-only"].iso),
		check("with only the child's, both get exactly their own, with no blank line",
			all["child-only"].fork == all["child-only"].own && all["child-only"].iso == all["child-only"].own,
			"fork %q, isolated %q", all["child-only"].fork, all["child-only"].iso),
		check("with neither, both children start without a system prompt",
			all["neither"].fork == "" && all["neither"].iso == "", "fork %q, isolated %q", all["neither"].fork, all["neither"].iso),
		check("the isolated child never receives the parent's prompt",
			all["both"].iso == all["both"].own && all["parent-only"].iso == "", "isolated with both: %q", all["both"].iso),
	)
	tab.Versus = versusByIndex(tab, "the same prompts, of the article's lengths, give the same result",
		"the fork child gets", "the isolated child gets")
	return tab, nil
}
