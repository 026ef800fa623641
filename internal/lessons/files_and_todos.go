package lessons

import (
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var filesAndTodos = lessonDef{
	name:    "files-and-todos",
	title:   "What crosses back: files do, todos do not",
	article: "Article 1 (the task tool), §4",
	description: "Article 1 (the task tool), §4: which parts of a child's state come back to the parent. Look at " +
		"delegation.finished: it returns the receipt and the files, and holds back the child's messages, its " +
		"todo list and its structured response; the file the child wrote is in the parent's files.",
	bothModes: true,
	table:     filesAndTodosTable,
}

func filesAndTodosTable(r runs) (Table, error) {
	v := r.view("files-and-todos")
	d, err := oneChild(v, "worker")
	if err != nil {
		return Table{}, err
	}
	fins := events[delegation.DelegationFinished](v, delegation.EventDelegationFinished)
	if len(fins) != 1 {
		return Table{}, fmt.Errorf("want one delegation.finished, got %d", len(fins))
	}
	fin := fins[0].Data
	returned := func(k string) bool { return slices.Contains(fin.Returned, k) }
	held := func(k string) bool { return slices.Contains(fin.HeldBack, k) }
	childList := v.list(d.child.ID)
	todos := 0
	for _, m := range childList {
		for _, tc := range m.ToolCalls {
			if tc.Name == delegation.WriteTodosToolName {
				todos++
			}
		}
	}
	_, hasFile := v.t.Files["/child.md"]
	backCell := func(back bool, what string) string {
		if back {
			return what
		}
		return "no"
	}
	tab := Table{
		Title:   "A child's state: what comes back to the parent",
		Columns: []string{"state", "comes back?", "what the run shows"},
		Rows: [][]string{
			{"messages", backCell(returned("receipt") && held("messages"), "only the receipt"),
				fmt.Sprintf("the child's list: %d messages; the parent gained 2 (its call, the receipt)", len(childList))},
			{"todos", backCell(returned("todos") || !held("todos"), "yes"),
				fmt.Sprintf("the child called write_todos %d time(s); held back: %s", todos, yesNo(held("todos")))},
			{"structured_response", backCell(returned("structured_response") || !held("structured_response"), "yes"),
				fmt.Sprintf("held back: %s; its JSON is the receipt's text", yesNo(held("structured_response")))},
			{"files", backCell(returned("files") && hasFile, "yes"),
				fmt.Sprintf("/child.md is in the parent's files: %s", yesNo(hasFile))},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"state", "comes back?"},
		Rows:    [][]string{{"messages", "only the last conclusion"}, {"todos", "no"}, {"structured_response", "no"}, {"files", "yes"}},
	}
	tab.Note = "Same as the article; we read it from delegation.finished's returned and held_back lists."
	tab.Checks = append(tab.Checks,
		check("the child has write_todos because its spec lists it, and used it", hasToolNamed(d.child.Tools, delegation.WriteTodosToolName) && todos > 0,
			"the child's tools: %s", strings.Join(toolNames(d.child.Tools), ", ")),
		check("delegation.finished returns the receipt and the files", slices.Equal(fin.Returned, []string{"receipt", "files"}),
			"returned: %s", strings.Join(fin.Returned, ", ")),
		check("delegation.finished holds back the messages, the todos and the structured response",
			slices.Equal(fin.HeldBack, []string{"messages", "todos", "structured_response"}), "held back: %s", strings.Join(fin.HeldBack, ", ")),
		check("the file the child wrote is in the parent's files", hasFile, "/child.md: %q", v.t.Files["/child.md"]),
		check("the parent's list holds its task call and the receipt, none of the child's messages",
			len(v.list(d.main.ID)) == 4 && d.receipt.Content == `{"done":"Drafted the release note.","files":["/child.md"]}`,
			"the parent has %d messages; the receipt is %s", len(v.list(d.main.ID)), d.receipt.Content),
	)
	tab.Versus = versusArticle(tab, "comes back?", "comes back?", "the same rule: deepagents leaves messages, todos and the structured response out of what it returns")
	return tab, nil
}
