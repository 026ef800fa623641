package lessons

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// articleLoop puts the third article's own loop beside our engine: the
// loop of its §3 (run_agent, a subagent tool whose one argument is task,
// spawn_subagent on read-only tools), on Anthropic's official SDK, as the
// studio's recording endpoint recorded it (recorded/, made by
// e2e/anthropic/loop.mjs against `serve --upstream
// script:examples/article-loop.json --task-tool subagent`, so the lesson
// runs offline), and our engine running the same search.
var articleLoop = lessonDef{
	name:    "article-loop",
	title:   "The article's own loop, recorded beside our engine",
	article: "Article 3 (subagent patterns), §3",
	description: "Article 3 (subagent patterns), §3: the article's hand-built loop, typed in on Anthropic's SDK and recorded " +
		"through the studio's /v1/messages, beside our engine doing the same search. In both the child starts from its task " +
		"alone, works on read-only tools, and only its answer comes back as the parent's tool result. Look at what differs: " +
		"the article's loop sends no system prompt and only its own small tools, our engine deepagents' tool definitions " +
		"(and the child's prompt), so every call of ours is bigger.",
	variants: []variantDef{
		{name: "engine", label: "our engine runs the same search"},
		{name: "article", label: "the article's loop on Anthropic's TypeScript SDK, recorded through /v1/messages"},
	},
	recorded: map[string]string{"article": "article-loop.trace.json"},
	table:    articleLoopTable,
}

// loopSide is what one run of the lesson shows.
type loopSide struct {
	agents                 []string
	delegation, tool       string // the delegation tool and its arguments; its name
	mainTools, childTools  []string
	mainCalls, childCalls  int
	childFirst             []trace.Message
	mainLast               []trace.Message
	childInLast            int // messages of the child's in the parent's last context
	receipt, answer, task  string
	receiptTokens          int
	mainSystem, childSys   int
	mainToolTok, childTool int
	mainLastIn, childIn    int
	total                  int
}

func loopSideOf(v *view) (loopSide, error) {
	var s loopSide
	main, err := v.agent("main")
	if err != nil {
		return s, err
	}
	for _, a := range v.t.Agents {
		mode := "main"
		if a.Mode != nil {
			mode = *a.Mode
		}
		s.agents = append(s.agents, a.Name+" ("+mode+")")
	}
	d, err := oneChild(v, "general-purpose")
	if err != nil {
		return s, err
	}
	call := d.call
	var args map[string]json.RawMessage
	_ = json.Unmarshal(call.Args, &args)
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s.tool = call.Name
	s.delegation = call.Name + " (" + strings.Join(keys, ", ") + ")"
	// The task as the parent's call wrote it: the article's tool names it
	// task, deepagents' description.
	for _, k := range []string{"task", "description"} {
		if raw, ok := args[k]; ok && s.task == "" {
			_ = json.Unmarshal(raw, &s.task)
		}
	}
	s.receipt, s.receiptTokens = d.receipt.Content, d.receipt.Tokens
	mains, childs := v.turns(main.ID), v.turns(d.child.ID)
	if len(mains) == 0 || len(childs) == 0 {
		return s, fmt.Errorf("session %q: main made %d calls, the child %d", v.t.Session.Name, len(mains), len(childs))
	}
	s.mainCalls, s.childCalls = len(mains), len(childs)
	first, last := mains[0], mains[len(mains)-1]
	s.mainTools, s.childTools = toolNames(first.Tools), toolNames(childs[0].Tools)
	s.mainSystem, s.mainToolTok, s.mainLastIn = first.SystemTokens, first.ToolTokens, last.InputTokens
	s.childSys, s.childTool = childs[0].SystemTokens, childs[0].ToolTokens
	for _, c := range childs {
		s.childIn += c.InputTokens
	}
	for _, c := range v.t.ModelCalls {
		s.total += c.InputTokens
	}
	s.childFirst, s.mainLast = v.context(childs[0]), v.context(last)
	for _, m := range s.mainLast {
		if m.AgentID != main.ID {
			s.childInLast++
		}
	}
	list := v.list(main.ID)
	if n := len(list); n > 0 && list[n-1].Role == string(delegation.RoleAssistant) {
		s.answer = list[n-1].Content
	}
	return s, nil
}

// kinds names each message of a context by what it is: the prompt, the
// task, the agent's delegation call, the receipt, a tool's result, an
// answer.
func kinds(ms []trace.Message, delegationTool string) string {
	var out []string
	for _, m := range ms {
		switch {
		case m.Kind == "prompt":
			out = append(out, "the prompt")
		case m.Kind == "task":
			out = append(out, "the task")
		case m.Kind == "receipt":
			out = append(out, "the receipt")
		case len(m.ToolCalls) > 0 && m.ToolCalls[0].Name == delegationTool:
			out = append(out, "the delegation call")
		case len(m.ToolCalls) > 0:
			out = append(out, "a tool call")
		case m.Role == string(delegation.RoleTool):
			out = append(out, "a tool's result")
		default:
			out = append(out, "an answer")
		}
	}
	return plural(len(ms), "message") + ": " + strings.Join(out, ", ")
}

// readOnly: no tool that writes, edits or delegates.
func readOnly(tools []string) bool {
	for _, t := range tools {
		switch t {
		case "write_file", "edit_file", "delete", "execute", "task", "subagent", "write_todos":
			return false
		}
	}
	return len(tools) > 0
}

func articleLoopTable(r runs) (Table, error) {
	eng, err := loopSideOf(r.view("engine"))
	if err != nil {
		return Table{}, fmt.Errorf("our engine's run: %w", err)
	}
	art, err := loopSideOf(r.view("article"))
	if err != nil {
		return Table{}, fmt.Errorf("the article's loop: %w", err)
	}
	row := func(what string, f func(s loopSide) string) []string { return []string{what, f(eng), f(art)} }
	tab := Table{
		Title:   "The same search, by the article's loop and by our engine",
		Columns: []string{"", "our engine", "the article's loop (recorded)"},
		Rows: [][]string{
			row("agents", func(s loopSide) string { return quote(strings.Join(s.agents, ", ")) }),
			row("the delegation tool (its arguments)", func(s loopSide) string { return quote(s.delegation) }),
			row("the main agent's tools", func(s loopSide) string { return quote(strings.Join(s.mainTools, ", ")) }),
			row("the child's tools", func(s loopSide) string { return quote(strings.Join(s.childTools, ", ")) }),
			row("model calls, main / child", func(s loopSide) string { return fmt.Sprintf("%d / %d", s.mainCalls, s.childCalls) }),
			row("the child's first context", func(s loopSide) string { return kinds(s.childFirst, s.tool) }),
			row("the main agent's last context", func(s loopSide) string { return kinds(s.mainLast, s.tool) }),
			row("the receipt", func(s loopSide) string { return quote(s.receipt) }),
			row("the answer", func(s loopSide) string { return quote(s.answer) }),
			row("system prompt tokens, main / child", func(s loopSide) string { return fmt.Sprintf("%d / %d", s.mainSystem, s.childSys) }),
			row("tool definitions' tokens, main / child", func(s loopSide) string { return fmt.Sprintf("%d / %d", s.mainToolTok, s.childTool) }),
			row("input tokens of the main agent's last call", func(s loopSide) string { return itoa(s.mainLastIn) }),
			row("input tokens the child read / the receipt's tokens", func(s loopSide) string { return fmt.Sprintf("%d / %d", s.childIn, s.receiptTokens) }),
			row("input tokens, the whole session", func(s loopSide) string { return itoa(s.total) }),
		},
		Note: "The delegation is the same and so is what crosses it; the sizes are not: the article's loop sends no system " +
			"prompt and small tools of its own, our engine deepagents' tool definitions, which compare shows call by call.",
	}
	// The article's loop stands where the other lessons have the article's figures.
	for _, rw := range tab.Rows {
		tab.Versus = append(tab.Versus, Versus{What: rw[0], Article: rw[2], Ours: rw[1],
			Why: "the article's loop on Anthropic's SDK, recorded through /v1/messages, beside our engine's run of the same search"})
	}
	tab.Checks = articleLoopChecks(eng, art)
	return tab, nil
}

func articleLoopChecks(eng, art loopSide) []Check {
	alone := func(s loopSide) bool {
		return len(s.childFirst) == 1 && s.childFirst[0].Content == s.task
	}
	backOnly := func(s loopSide) bool {
		return s.childInLast == 0 && len(s.mainLast) == 3 && s.mainLast[2].Content == s.receipt
	}
	return []Check{
		check("both runs have a main agent and one isolated general-purpose child", slices.Equal(eng.agents, art.agents) &&
			slices.Equal(eng.agents, []string{"main (main)", "general-purpose (isolated)"}),
			"%q and %q", strings.Join(eng.agents, ", "), strings.Join(art.agents, ", ")),
		check("in both, the child starts from its task alone, the same task", alone(eng) && alone(art) && eng.task == art.task,
			"%d and %d messages", len(eng.childFirst), len(art.childFirst)),
		check("in both, the child's tools are read-only and it makes three calls", readOnly(eng.childTools) && readOnly(art.childTools) &&
			eng.childCalls == 3 && art.childCalls == 3, "%q and %q", strings.Join(eng.childTools, ", "), strings.Join(art.childTools, ", ")),
		check("in both, the parent's last context is its prompt, its delegation call and the receipt: none of the child's messages",
			backOnly(eng) && backOnly(art), "%d and %d messages", len(eng.mainLast), len(art.mainLast)),
		check("the same receipt and the same answer come back", eng.receipt == art.receipt && eng.answer == art.answer && eng.answer != "",
			"%q and %q", eng.receipt, art.receipt),
		check("the article's loop sends no system prompt and its own small tools; our engine's calls, with deepagents' tool definitions, are bigger",
			art.mainSystem == 0 && art.childSys == 0 && eng.mainToolTok > art.mainToolTok && eng.mainLastIn > art.mainLastIn && eng.childIn > art.childIn,
			"%d against %d tokens", eng.mainLastIn, art.mainLastIn),
	}
}
