package lessons

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/internal/trace"
)

var toolStack = lessonDef{
	name:    "tool-stack",
	title:   "The tool stack and what each tool costs",
	article: "Article 1 (the task tool), §1",
	description: "Article 1 (the task tool), §1: the default stack of eight tools and the token cost of each " +
		"definition, from the main agent's agent.started event, beside the article's figures and deepagents' own " +
		"estimate (approx: a definition's JSON characters divided by four). Look at task: second only to grep, " +
		"a fixed price paid on every model call whether or not the agent ever delegates.",
	table: toolStackTable,
	claims: []claim{
		{"stack of eight tools", "8", "rank"},
	},
}

// articleTools are the article's token figures, most expensive first.
var articleTools = []struct {
	name   string
	tokens int
}{{"grep", 597}, {"task", 499}, {"read_file", 456}, {"glob", 414}, {"edit_file", 293}, {"write_file", 191}, {"delete", 161}, {"ls", 118}}

func toolStackTable(r runs) (Table, error) {
	v := r.view("tool-stack")
	main, err := v.agent("main")
	if err != nil {
		return Table{}, err
	}
	// deepagents' estimate and the characters, from the definitions the
	// team was given, rebuilt with the engine's own code.
	sc, err := scenarioOf(v.t)
	if err != nil {
		return Table{}, err
	}
	approx, _ := tokens.Get("approx")
	defJSON := map[string]string{}
	for _, d := range sc.Team.MainTools() {
		defJSON[d.Name] = delegation.ToolJSON(d)
	}
	article := map[string]int{}
	articleRank := map[string]int{}
	articleTotal := 0
	for i, a := range articleTools {
		article[a.name], articleRank[a.name] = a.tokens, i+1
		articleTotal += a.tokens
	}

	tools := slices.Clone(main.Tools)
	total, approxTotal := 0, 0
	for _, t := range tools {
		total += t.Tokens
		approxTotal += approx.Count(defJSON[t.Name])
	}
	sort.SliceStable(tools, func(i, j int) bool { return tools[i].Tokens > tools[j].Tokens })
	tab := Table{
		Title: "The main agent's tools, most expensive first",
		Columns: []string{"rank", "tool", "tokens (" + v.t.Session.Tokenizer + ")", "share", "approx (characters / 4)",
			"characters of its JSON", "the article's tokens", "the article's rank"},
	}
	rank, approxRank := map[string]int{}, map[string]int{}
	byApprox := slices.Clone(tools)
	sort.SliceStable(byApprox, func(i, j int) bool {
		return approx.Count(defJSON[byApprox[i].Name]) > approx.Count(defJSON[byApprox[j].Name])
	})
	for i, t := range byApprox {
		approxRank[t.Name] = i + 1
	}
	within := true
	for i, t := range tools {
		rank[t.Name] = i + 1
		a := approx.Count(defJSON[t.Name])
		within = within && withinPct(t.Tokens, article[t.Name], 15) && withinPct(a, article[t.Name], 15)
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), t.Name, itoa(t.Tokens), pct(t.Tokens, total), itoa(a),
			itoa(chars(defJSON[t.Name])), itoa(article[t.Name]), itoa(articleRank[t.Name])})
	}
	tab.Rows = append(tab.Rows, []string{"", "total", itoa(total), "100%", itoa(approxTotal), "", itoa(articleTotal), ""})
	tab.Article = &ArticleTable{
		Columns: []string{"rank", "tool", "tokens", "share"},
		Rows: [][]string{
			{"1", "grep", "597", ""}, {"2", "task", "499", "18.3%"}, {"3", "read_file", "456", ""},
			{"4", "glob", "414", ""}, {"5", "edit_file", "293", ""}, {"6", "write_file", "191", ""},
			{"7", "delete", "161", ""}, {"8", "ls", "118", ""}, {"", "total", "2729", "100%"},
		},
	}
	sameOrder := true
	for name, r := range articleRank {
		sameOrder = sameOrder && rank[name] == r && approxRank[name] == r
	}
	taskTokens := toolTokens(main.Tools, delegation.TaskToolName)
	order := "the order differs from the article's"
	if sameOrder {
		order = "the order is the article's, with both counts"
	}
	tab.Note = fmt.Sprintf("Our tool texts are our own, sized to deepagents' characters; deepagents' own estimate puts the stack at %d tokens "+
		"against the article's 2729, and task's share is %s against 18.3%%: %s.", approxTotal, pct(taskTokens, total), order)
	tab.Versus = toolStackVersus(v, main, defJSON, pct(taskTokens, total))

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
		check("the ranking is the article's, counted exactly and counted as deepagents estimates", sameOrder,
			"task is number %d (approx: %d), grep number %d (approx: %d)", rank[delegation.TaskToolName], approxRank[delegation.TaskToolName],
			rank["grep"], approxRank["grep"]),
		check("every tool's cost is within 15 % of the article's, with both counts", within,
			"total %d %s and %d approx, against the article's %d", total, v.t.Session.Tokenizer, approxTotal, articleTotal),
		check("grep is the most expensive of the seven filesystem tools", topFS == "grep",
			"the most expensive besides task: %s, %d tokens", topFS, toolTokens(main.Tools, topFS)),
	)
	tab.Checks = append(tab.Checks, everyCallPaysTools(v, main, total))
	return tab, nil
}

// toolStackVersus sets each tool's cost beside the article's.
func toolStackVersus(v *view, main trace.Agent, defJSON map[string]string, share string) []Versus {
	approx, _ := tokens.Get("approx")
	var out []Versus
	for _, a := range articleTools {
		out = append(out, Versus{What: a.name + " (tokens)", Article: itoa(a.tokens),
			Ours: fmt.Sprintf("%d %s, %d approx", toolTokens(main.Tools, a.name), v.t.Session.Tokenizer, approx.Count(defJSON[a.name])),
			Why:  "our texts say what deepagents' say, sized to its characters (±5 %); the article counted with a tokenizer of its own"})
	}
	out = append(out, Versus{What: "task's share of the stack", Article: "18.3%", Ours: share,
		Why: "the shares follow the sizes"})
	return out
}

// everyCallPaysTools: every model call of the main agent pays for all the
// definitions, though it never delegates.
func everyCallPaysTools(v *view, main trace.Agent, total int) Check {
	calls := v.turns(main.ID)
	every := len(calls) > 0
	for _, c := range calls {
		every = every && c.ToolTokens == total && len(c.Tools) == len(main.Tools)
	}
	return check("every model call of the main agent pays for all eight definitions, though it never delegates",
		every && len(events[delegation.DelegationStarted](v, delegation.EventDelegationStarted)) == 0,
		"%d calls, each with %d tool tokens; no delegation", len(calls), total)
}
