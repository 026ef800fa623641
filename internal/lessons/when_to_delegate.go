package lessons

import (
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var whenToDelegate = lessonDef{
	name:    "when-to-delegate",
	title:   "When delegating pays, and when it does not",
	article: "Article 1 (the task tool), §7; Article 3 (subagent patterns), §4",
	description: "Article 1 (the task tool), §7, and Article 3 (subagent patterns), §4: the same jobs done by the main " +
		"agent itself and delegated. Look at the parent's last context: a long search of six files done alone stays " +
		"in every later call, delegated it shrinks to the task call and one receipt. Then look at the totals: every " +
		"child pays its own prompt prefix, so a one-step job costs more delegated than done alone.",
	variants: []variantDef{
		{name: "alone", label: "A long search, done alone"},
		{name: "delegated", label: "The long search, delegated"},
		{name: "one-step-alone", label: "A one-step job, done alone"},
		{name: "one-step-delegated", label: "The one-step job, delegated"},
	},
	table: whenToDelegateTable,
	claims: []claim{
		{"six files", "a long search", "files read"},
	},
}

// jobCost is what one run of a job cost.
type jobCost struct {
	filesRead      int // read_file calls in the whole session
	parentLast     int // the parent's last call: system prompt and messages
	parentMessages int // the parent's list at the end
	total          int // input tokens of every model call of the session
	prefix         int // a child's first call: system prompt and tools
	step           int // what the delegation added to the parent: call and receipt
	tools          int // the parent's tool definitions, task included
}

func readJob(v *view) (jobCost, error) {
	var j jobCost
	main, err := v.agent("main")
	if err != nil {
		return j, err
	}
	turns := v.turns(main.ID)
	if len(turns) == 0 {
		return j, fmt.Errorf("the main agent made no call")
	}
	j.parentLast = contextTokens(turns[len(turns)-1])
	j.parentMessages = len(v.list(main.ID))
	j.tools = turns[0].ToolTokens
	for _, c := range v.t.ModelCalls {
		j.total += c.InputTokens
	}
	for _, m := range v.t.Messages {
		for _, tc := range m.ToolCalls {
			if tc.Name == "read_file" {
				j.filesRead++
			}
		}
	}
	if kids := v.agents(delegation.GeneralPurposeName); len(kids) > 0 {
		d, err := childRun(v, kids[0])
		if err != nil {
			return j, err
		}
		first, err := v.firstCall(d.child.ID)
		if err != nil {
			return j, err
		}
		j.prefix = first.SystemTokens + first.ToolTokens
		j.step = d.callMsg.Tokens + d.receipt.Tokens
	}
	return j, nil
}

func whenToDelegateTable(r runs) (Table, error) {
	jobs := map[string]jobCost{}
	for _, name := range []string{"alone", "delegated", "one-step-alone", "one-step-delegated"} {
		j, err := readJob(r.view(name))
		if err != nil {
			return Table{}, fmt.Errorf("variant %s: %w", name, err)
		}
		jobs[name] = j
	}
	cell := func(n int) string {
		if n == 0 {
			return "–"
		}
		return itoa(n)
	}
	tab := Table{
		Title: "The same jobs, done alone and delegated",
		Columns: []string{"job", "files read", "done alone: the parent's last context (tokens)", "delegated: the parent's last context (tokens)",
			"done alone: every call (tokens)", "delegated: every call (tokens)", "the child's prefix (tokens)", "the delegation in the parent (tokens)"},
	}
	a, d, sa, sd := jobs["alone"], jobs["delegated"], jobs["one-step-alone"], jobs["one-step-delegated"]
	tab.Rows = [][]string{
		{"a long search", itoa(a.filesRead), itoa(a.parentLast), itoa(d.parentLast), itoa(a.total), itoa(d.total), cell(d.prefix), cell(d.step)},
		{"a one-step job", itoa(sa.filesRead), itoa(sa.parentLast), itoa(sd.parentLast), itoa(sa.total), itoa(sd.total), cell(sd.prefix), cell(sd.step)},
	}
	taskTokens := 0
	if t := r["alone"]; t != nil {
		taskTokens = taskCost(t)
	}
	tab.Article = &ArticleTable{
		Columns: []string{"what", "the article"},
		Rows: [][]string{
			{"one delegation in the parent's context", "68 tokens: the task call and the receipt (Article 1, §3)"},
			{"the task tool's definition, paid on every call", "499 tokens, delegating or not (Article 1, §7)"},
			{"N children", "≈ N prompt prefixes: each carries its own system prompt and tool definitions (Article 3, §4)"},
			{"worth it", "long, messy exploration with a small conclusion; several independent jobs"},
			{"not worth it", "a job of one or two steps; work whose intermediate steps you must see"},
		},
	}
	tab.Note = fmt.Sprintf("Our task descriptions and receipts are our own, so the delegation costs the parent %d tokens against the article's 68, "+
		"and our task tool %d against 499; the direction is the article's: delegating a long search keeps the parent small, delegating a one-step job costs more.",
		d.step, taskTokens)
	tab.Versus = []Versus{
		{What: "one delegation in the parent's context", Article: "68 tokens", Ours: fmt.Sprintf("%d tokens (call and receipt)", d.step),
			Why: "our task description and receipt are longer than the article's example"},
		{What: "the task tool's definition, on every call", Article: "499 tokens", Ours: fmt.Sprintf("%d tokens", taskTokens),
			Why: "our task tool's text, sized to deepagents' characters, counted with o200k_base"},
		{What: "a child's prompt prefix", Article: "one prefix per child", Ours: fmt.Sprintf("%d tokens", d.prefix),
			Why: "the general-purpose prompt and the seven filesystem tools, paid again by every child"},
		{What: "a long search", Article: "worth delegating", Ours: fmt.Sprintf("the parent ends at %d tokens instead of %d", d.parentLast, a.parentLast),
			Why: "only the receipt comes back"},
		{What: "a one-step job", Article: "not worth delegating", Ours: fmt.Sprintf("%d tokens in all instead of %d", sd.total, sa.total),
			Why: "the child's prefix costs more than the work"},
	}
	tab.Checks = append(tab.Checks,
		check("a long search done alone stays in the parent's context: delegated, the parent ends at a third of it or less",
			3*d.parentLast <= a.parentLast, "%d tokens delegated, %d alone", d.parentLast, a.parentLast),
		check("delegated, the parent gains its task call and one receipt; alone, a call and a result for every file",
			d.parentMessages == 4 && a.parentMessages == 2+2*a.filesRead, "%d messages delegated, %d alone after %d reads", d.parentMessages, a.parentMessages, a.filesRead),
		check("a one-step job costs more delegated than done alone", sd.total > sa.total, "%d against %d tokens in all", sd.total, sa.total),
		check("the child pays a prefix of its own, about the size of the parent's tools without task", d.prefix > 0 && d.prefix < a.tools && 2*d.prefix > a.tools,
			"the child's prefix %d tokens; the parent's tools %d", d.prefix, a.tools),
		check("the parent pays for the task tool on every call, even when it never delegates", taskTokens > 0 && a.tools == jobs["delegated"].tools,
			"task: %d tokens of the %d of tool definitions in every call", taskTokens, a.tools),
	)
	return tab, nil
}

// taskCost is the task tool's tokens in a run's main agent.
func taskCost(t *trace.Trace) int {
	for _, a := range t.Agents {
		if a.ParentID == nil {
			return toolTokens(a.Tools, delegation.TaskToolName)
		}
	}
	return 0
}
