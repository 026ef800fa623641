package lessons

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var toolStack = lessonDef{
	name:    "tool-stack",
	title:   "The tool stack and what each tool costs",
	article: "Article 1 (the task tool), §1",
	description: "Article 1 (the task tool), §1: the default stack of eight tools and the token cost of each " +
		"definition, from the main agent's agent.started event. Look at task: it is one of the most expensive " +
		"tools, a fixed price paid on every model call whether or not the agent ever delegates.",
	table: toolStackTable,
}

func toolStackTable(r runs) (Table, error) {
	v := r.view("tool-stack")
	main, err := v.agent("main")
	if err != nil {
		return Table{}, err
	}
	tools := slices.Clone(main.Tools)
	total := 0
	for _, t := range tools {
		total += t.Tokens
	}
	sort.SliceStable(tools, func(i, j int) bool { return tools[i].Tokens > tools[j].Tokens })
	tab := Table{
		Title:   "The main agent's tools, most expensive first",
		Columns: []string{"rank", "tool", "tokens", "share"},
	}
	rank := map[string]int{}
	for i, t := range tools {
		rank[t.Name] = i + 1
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), t.Name, itoa(t.Tokens), pct(t.Tokens, total)})
	}
	tab.Rows = append(tab.Rows, []string{"", "total", itoa(total), "100%"})
	tab.Article = &ArticleTable{
		Columns: []string{"rank", "tool", "tokens", "share"},
		Rows: [][]string{
			{"1", "grep", "597", ""}, {"2", "task", "499", "18.3%"}, {"3", "read_file", "456", ""},
			{"4", "glob", "414", ""}, {"5", "edit_file", "293", ""}, {"6", "write_file", "191", ""},
			{"7", "delete", "161", ""}, {"8", "ls", "118", ""}, {"", "total", "2729", "100%"},
		},
	}
	taskTokens := toolTokens(main.Tools, delegation.TaskToolName)
	tab.Note = fmt.Sprintf("Our tool descriptions are our own and terser (total %d tokens against the article's 2729), "+
		"so task's share is larger (%s against 18.3%%); the order matches: task and grep on top, ls and delete at the bottom.",
		total, pct(taskTokens, total))

	topFS := ""
	for _, t := range tools { // most expensive first
		if t.Name != delegation.TaskToolName {
			topFS = t.Name
			break
		}
	}
	names := toolNames(main.Tools)
	want := delegation.DefaultTools()
	tab.Checks = append(tab.Checks,
		check("the main agent has the default stack of eight tools, task last", slices.Equal(names, want),
			"tools: %s", strings.Join(names, ", ")),
		check("task is among the two most expensive tools", rank[delegation.TaskToolName] >= 1 && rank[delegation.TaskToolName] <= 2,
			"task is number %d, %d tokens", rank[delegation.TaskToolName], taskTokens),
		check("grep is the most expensive of the seven filesystem tools", topFS == "grep",
			"the most expensive besides task: %s, %d tokens", topFS, toolTokens(main.Tools, topFS)),
		check("ls and delete are the two cheapest", rank["ls"] >= len(tools)-1 && rank["delete"] >= len(tools)-1,
			"ls %d tokens, delete %d tokens", toolTokens(main.Tools, "ls"), toolTokens(main.Tools, "delete")),
	)
	calls := v.turns(main.ID)
	every := len(calls) > 0
	for _, c := range calls {
		every = every && c.ToolTokens == total && len(c.Tools) == len(main.Tools)
	}
	tab.Checks = append(tab.Checks, check("every model call of the main agent pays for all eight definitions, though it never delegates",
		every && len(events[delegation.DelegationStarted](v, delegation.EventDelegationStarted)) == 0,
		"%d calls, each with %d tool tokens; no delegation", len(calls), total))
	return tab, nil
}
