package lessons

import (
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var whatAChildInherits = lessonDef{
	name:    "what-a-child-inherits",
	title:   "What a child inherits on the way in",
	article: "Article 2 (isolated or fork), §6",
	description: "Article 2 (isolated or fork), §6: what each mode lets into a child's start. The parent has planned with " +
		"write_todos and written a file before it sends the same task to an isolated helper and to a fork. Look at the " +
		"first calls: the fork holds the parent's conversation, prompt and todo list, and its task call is refused; the " +
		"isolated helper holds its task alone, with no todo list and no task tool. Both can read the parent's file.",
	table: whatAChildInheritsTable,
}

func whatAChildInheritsTable(r runs) (Table, error) {
	v := r.view("what-a-child-inherits")
	iso, err := oneChild(v, "helper")
	if err != nil {
		return Table{}, err
	}
	fork, err := oneChild(v, "continuer")
	if err != nil {
		return Table{}, err
	}
	const todo = "Check the invoice total"
	held := map[string][]string{}
	for _, f := range events[delegation.DelegationFinished](v, delegation.EventDelegationFinished) {
		held[f.Data.ChildID] = f.Data.HeldBack
	}
	i, err := readInherited(v, iso, todo, held)
	if err != nil {
		return Table{}, err
	}
	f, err := readInherited(v, fork, todo, held)
	if err != nil {
		return Table{}, err
	}
	tab := Table{
		Title:   "What each child started with",
		Columns: []string{"", "isolated", "fork"},
		Rows: [][]string{
			{"the parent's messages in its first call", itoa(i.inheritedMsgs), itoa(f.inheritedMsgs)},
			{"the parent's system prompt", yesNo(i.parentPrompt), yesNo(f.parentPrompt)},
			{"the parent's todo list (held in its state)", yesNo(i.todos), yesNo(f.todos)},
			{"the todo item in its first call", itoa(i.todoN), itoa(f.todoN)},
			{"the fork marker: a task call", i.task, f.task},
			{"the parent's file, read", yesNo(i.readFile), yesNo(f.readFile)},
			{"held back at its end", strings.Join(held[iso.child.ID], ", "), strings.Join(held[fork.child.ID], ", ")},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"", "isolated", "fork"},
		Rows: [][]string{
			{"keys kept out of its start", "messages, todos, the structured response, an internal marker", "the structured response and the summarization channels"},
			{"the todo list", "no", "yes: it sees the parent's list"},
			{"messages", "replaced by the task", "the parent's, rebuilt, then the task"},
			{"the fork marker", "none: it has no task tool", "a boolean key: a task call is refused"},
			{"files", "shared", "shared"},
		},
	}
	tab.Note = "The article counts state keys; we show what each key let in, from the children's first calls and their delegation.finished events."
	tab.Versus = []Versus{
		{What: "the todo list", Article: "isolated no, fork yes", Ours: fmt.Sprintf("isolated %s, fork %s", yesNo(i.todos), yesNo(f.todos)),
			Why: "the same: deepagents' fork leaves todos in the state it hands the child"},
		{What: "messages", Article: "isolated: the task; fork: the parent's, then the task",
			Ours: fmt.Sprintf("isolated %d inherited, fork %d", i.inheritedMsgs, f.inheritedMsgs), Why: "the same"},
		{What: "the fork marker", Article: "none for isolated (no task tool); fork: a task call is refused", Ours: "isolated: " + i.task + "; fork: " + f.task,
			Why: "the same two ways of stopping nested delegation"},
		{What: "files", Article: "shared", Ours: fmt.Sprintf("read by isolated: %s, by the fork: %s", yesNo(i.readFile), yesNo(f.readFile)), Why: "the same"},
	}
	tab.Checks = append(tab.Checks,
		check("the fork starts from the parent's conversation, the isolated child from its task alone", i.inheritedMsgs == 0 && f.inheritedMsgs > 0,
			"inherited messages: isolated %d, fork %d", i.inheritedMsgs, f.inheritedMsgs),
		check("the fork inherits the parent's system prompt, the isolated child does not", f.parentPrompt && !i.parentPrompt,
			"fork %q, isolated %q", clip(f.first.SystemPrompt, 60), clip(i.first.SystemPrompt, 60)),
		check("the fork holds the parent's todo list and sees the item; the isolated child neither", f.todos && f.todoN > 0 && !i.todos && i.todoN == 0,
			"held back: isolated %v, fork %v", held[iso.child.ID], held[fork.child.ID]),
		check("the fork's task call is refused; the isolated child has no task tool", f.task == "it has task; its call was refused" && i.task == "no task tool",
			"isolated: %s; fork: %s", i.task, f.task),
		check("both children read the file the parent wrote", i.readFile && f.readFile, "isolated %s, fork %s", yesNo(i.readFile), yesNo(f.readFile)),
	)
	return tab, nil
}

// inherited is what a child started with, read from its first call.
type inherited struct {
	d                    *delegationRun
	first                trace.ModelCall
	inheritedMsgs, todoN int
	parentPrompt         bool
	todos                bool
	task                 string
	readFile             bool
}

// readInherited reads what a child started with.
func readInherited(v *view, d *delegationRun, todo string, held map[string][]string) (inherited, error) {
	s := inherited{d: d}
	first, err := v.firstCall(d.child.ID)
	if err != nil {
		return s, err
	}
	s.first = first
	for _, m := range v.context(first) {
		if m.AgentID != d.child.ID {
			s.inheritedMsgs++
		}
	}
	s.todoN = v.occurrences(first, todo)
	s.parentPrompt = d.main.SystemPrompt != "" && strings.Contains(first.SystemPrompt, d.main.SystemPrompt)
	s.todos = slices.Contains(held[d.child.ID], "todos")
	s.task = "no task tool"
	if hasToolNamed(d.child.Tools, delegation.TaskToolName) {
		s.task = "it has task; a call of it was not made"
		for _, m := range v.list(d.child.ID) {
			if m.Kind == string(delegation.KindRefusal) && m.Content == delegation.NestedRefusal {
				s.task = "it has task; its call was refused"
			}
		}
	}
	for _, m := range v.list(d.child.ID) {
		if m.Role == string(delegation.RoleTool) && !m.IsError && strings.Contains(m.Content, "INV-1") {
			s.readFile = true
		}
	}
	return s, nil
}
