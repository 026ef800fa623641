package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var oneDelegation = lessonDef{
	name:    "one-delegation",
	title:   "One delegation: what each model call received",
	article: "Article 1 (the task tool), §2",
	description: "Article 1 (the task tool), §2: one question handed to the built-in general-purpose subagent, " +
		"and what each of the four model calls received. Look at call 2: the child starts from two messages, " +
		"its system prompt and the task description verbatim, with seven tools and no task; the parent's " +
		"question is nowhere in it.",
	bothModes: true,
	table:     oneDelegationTable,
	claims: []claim{
		{"four model calls", "4", "call"},
		{"call 2", "2", "call"},
		{"from two messages", "2", "messages (system prompt + context)"},
		{"with seven tools", "2", "tools"},
	},
}

// delegationRun is a run with one delegation: the main agent, its one child,
// and the task call between them.
type delegationRun struct {
	v           *view
	main, child trace.Agent // main is the child's parent
	call        trace.ToolCall
	callMsg     trace.Message
	receipt     trace.Message
	task        string // the description the parent wrote
}

// oneChild reads the delegation to the first child of that name.
func oneChild(v *view, childName string) (*delegationRun, error) {
	child, err := v.agent(childName)
	if err != nil {
		return nil, err
	}
	return childRun(v, child)
}

// childRun reads the delegation that started a child.
func childRun(v *view, child trace.Agent) (*delegationRun, error) {
	d := &delegationRun{v: v, child: child}
	var err error
	if child.ParentID == nil {
		return nil, fmt.Errorf("agent %s is not a child", child.ID)
	}
	for _, a := range v.t.Agents {
		if a.ID == *child.ParentID {
			d.main = a
		}
	}
	if d.callMsg, d.call, err = v.taskCall(child); err != nil {
		return nil, err
	}
	if d.receipt, err = v.receipt(child); err != nil {
		return nil, err
	}
	d.task = taskOf(d.call)
	return d, nil
}

func toolsCell(tools []trace.ToolCost) string {
	if hasToolNamed(tools, delegation.TaskToolName) {
		return fmt.Sprintf("%d, with task", len(tools))
	}
	return fmt.Sprintf("%d, without task", len(tools))
}

func oneDelegationTable(r runs) (Table, error) {
	v := r.view("one-delegation")
	d, err := oneChild(v, delegation.GeneralPurposeName)
	if err != nil {
		return Table{}, err
	}
	tab := Table{
		Title:   "Every model call of one delegation, in order",
		Columns: []string{"call", "who", "messages (system prompt + context)", "system prompt (characters)", "tools"},
	}
	var who []string
	var counts []int
	for i, c := range v.t.ModelCalls {
		name := "parent"
		if c.AgentID == d.child.ID {
			name = "child"
		}
		who = append(who, name)
		counts = append(counts, v.messageCount(c))
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), name, itoa(v.messageCount(c)), itoa(chars(c.SystemPrompt)), toolsCell(c.Tools)})
	}
	tab.Article = &ArticleTable{
		Columns: tab.Columns,
		Rows: [][]string{
			{"1", "parent", "2", "0", "8, with task"},
			{"2", "child", "2", "286", "7, without task"},
			{"3", "child", "4", "286", "7"},
			{"4", "parent", "4", "0", "8, with task"},
		},
	}
	tab.Note = fmt.Sprintf("The only figure that differs is the general-purpose prompt's length (%d characters against 286): "+
		"the prompt is our own text, of deepagents' size.", chars(delegation.GeneralPurpose.SystemPrompt))

	first, err := v.firstCall(d.child.ID)
	if err != nil {
		return Table{}, err
	}
	ctx := v.context(first)
	tab.Checks = append(tab.Checks,
		check("the calls go parent, child, child, parent, with 2, 2, 4, 4 messages",
			strings.Join(who, ",") == "parent,child,child,parent" && fmt.Sprint(counts) == "[2 2 4 4]",
			"who: %s; messages: %v", strings.Join(who, ", "), counts),
		check("the child's first call holds its system prompt and one message: the task description, verbatim",
			len(ctx) == 1 && ctx[0].Role == string(delegation.RoleUser) && ctx[0].Content == d.task,
			"%d message(s) after the system prompt; the first is %q", len(ctx), clip(firstContent(ctx), 60)),
		check("the user's question is nowhere in the child's context",
			v.occurrences(first, v.t.Session.Prompt) == 0, "occurrences of the prompt: %d", v.occurrences(first, v.t.Session.Prompt)),
		check("the child's system prompt is the built-in general-purpose prompt, which says its caller sees only its final message",
			first.SystemPrompt == delegation.GeneralPurpose.SystemPrompt && strings.Contains(first.SystemPrompt, "sees only your final message"),
			"%d characters", chars(first.SystemPrompt)),
		check("the parent has eight tools with task, the child seven without",
			len(d.main.Tools) == 8 && hasToolNamed(d.main.Tools, delegation.TaskToolName) &&
				len(d.child.Tools) == 7 && !hasToolNamed(d.child.Tools, delegation.TaskToolName),
			"parent: %s; child: %s", strings.Join(toolNames(d.main.Tools), ", "), strings.Join(toolNames(d.child.Tools), ", ")),
	)
	tab.Versus = versusByIndex(tab, "the same calls and counts; the general-purpose prompt is ours, sized to deepagents' 286 characters",
		"who", "messages (system prompt + context)", "system prompt (characters)", "tools")
	return tab, nil
}

func firstContent(ms []trace.Message) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[0].Content
}
