package lessons

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var taskDescription = lessonDef{
	name:    "task-description",
	title:   "The task tool's description: a fixed text plus one line per subagent",
	article: "Article 1 (the task tool), §1; Article 2 (isolated or fork), §1",
	description: "Article 1 (the task tool), §1, and Article 2 (isolated or fork), §1: the task tool's description " +
		"is a fixed text plus one line per subagent, built from the team. Compare the teams: adding a " +
		"subagent adds a line, naming one general-purpose replaces the built-in line, and a fork subagent's " +
		"line ends with a load-bearing sentence.",
	variants: []variantDef{
		{name: "default", label: "Default team"},
		{name: "researcher", label: "researcher added"},
		{name: "override", label: "general-purpose overridden"},
		{name: "pair-isolated", label: "iso1 and fk1, both isolated"},
		{name: "pair-fork", label: "iso1 isolated, fk1 fork"},
	},
	table: taskDescriptionTable,
}

// taskDef is the task tool's definition the team of a run was given, and
// the subagent lines its list should hold: the team is rebuilt from the
// scenario the trace ran, with the engine's own code.
func taskDef(r runs, variant string) (delegation.ToolDef, []string, error) {
	sc, err := scenarioOf(r[variant])
	if err != nil {
		return delegation.ToolDef{}, nil, fmt.Errorf("variant %s: %w", variant, err)
	}
	var lines []string
	for _, s := range sc.Team.Subagents {
		line := "- " + s.Name + ": " + s.Description
		if s.Mode == delegation.ModeFork {
			line += delegation.ForkSuffix
		}
		lines = append(lines, line)
	}
	for _, d := range sc.Team.MainTools() {
		if d.Name == delegation.TaskToolName {
			return d, lines, nil
		}
	}
	return delegation.ToolDef{}, nil, fmt.Errorf("variant %s: the main agent has no task tool", variant)
}

// listed reports whether a description holds the lines, one after another.
func listed(desc string, lines []string) bool {
	return len(lines) > 0 && strings.Contains(desc, "\n"+strings.Join(lines, "\n")+"\n")
}

func taskDescriptionTable(r runs) (Table, error) {
	type row struct {
		def    delegation.ToolDef
		lines  []string
		chars  int
		tokens int
	}
	rows := map[string]row{}
	tab := Table{
		Title:   "The task tool's description, per team",
		Columns: []string{"team", "subagent lines", "characters", "vs default", "tokens (whole definition)"},
	}
	names := []string{"default", "researcher", "override", "pair-isolated", "pair-fork"}
	for _, name := range names {
		def, lines, err := taskDef(r, name)
		if err != nil {
			return Table{}, err
		}
		main, err := r.view(name).agent("main")
		if err != nil {
			return Table{}, err
		}
		rows[name] = row{def: def, lines: lines, chars: chars(def.Description),
			tokens: toolTokens(main.Tools, delegation.TaskToolName)}
	}
	for _, name := range names {
		x := rows[name]
		var heads []string
		for _, l := range x.lines {
			heads = append(heads, clip(l, 40))
		}
		tab.Rows = append(tab.Rows, []string{name, strings.Join(heads, " / "), itoa(x.chars),
			signed(x.chars - rows["default"].chars), itoa(x.tokens)})
	}
	article := map[string]int{"default": 1419, "researcher": 1438, "override": 1081, "pair-isolated": 1443, "pair-fork": 1525}
	tab.Columns = append(tab.Columns, "the article's characters", "ours against the article's")
	for i, name := range names {
		tab.Rows[i] = append(tab.Rows[i], itoa(article[name]), pctDiff(rows[name].chars, article[name]))
	}
	tab.Article = &ArticleTable{
		Columns: []string{"team", "characters"},
		Rows: [][]string{
			{"default", "1419"}, {"researcher", "1438"}, {"override", "1081"},
			{"pair-isolated", "1443"}, {"pair-fork", "1525 (the fork sentence: about 80–86 characters)"},
		},
	}
	tab.Note = fmt.Sprintf("Our fixed text is our own, sized to deepagents' (%d characters against the article's 1419, %s) and so is our "+
		"fork sentence (%d characters against deepagents' 86); the researcher line is the article's own, so it adds the same 19 characters.",
		rows["default"].chars, pctDiff(rows["default"].chars, 1419), chars(delegation.ForkSuffix))
	tab.Versus = versusRows(tab, 0, "characters", "the article's characters",
		"our fixed text and lines are ours, sized to deepagents' within 5 %; the subagents' own descriptions are the article's")
	within := true
	for _, name := range names {
		within = within && withinPct(rows[name].chars, article[name], 15)
	}

	d, res, ov, pi, pf := rows["default"], rows["researcher"], rows["override"], rows["pair-isolated"], rows["pair-fork"]
	added := "- researcher: 查资料的"
	tab.Checks = append(tab.Checks,
		check("every team's list is in its task description, one line per subagent, in list order",
			listed(d.def.Description, d.lines) && listed(res.def.Description, res.lines) && listed(ov.def.Description, ov.lines) &&
				listed(pi.def.Description, pi.lines) && listed(pf.def.Description, pf.lines),
			"lines: %d, %d, %d, %d, %d", len(d.lines), len(res.lines), len(ov.lines), len(pi.lines), len(pf.lines)),
		check("the default team lists one subagent, the built-in general-purpose",
			len(d.lines) == 1 && d.lines[0] == "- "+delegation.GeneralPurposeName+": "+delegation.GeneralPurpose.Description,
			"lines: %d", len(d.lines)),
		check("adding researcher adds exactly its line after general-purpose",
			len(res.lines) == 2 && res.lines[1] == added && res.chars-d.chars == chars("\n"+added),
			"%d → %d characters (+%d; the line and its newline are %d)", d.chars, res.chars, res.chars-d.chars, chars("\n"+added)),
		check("every team's description is within 15 % of the article's characters", within,
			"default %d, researcher %d, override %d, pairs %d and %d", d.chars, res.chars, ov.chars, pi.chars, pf.chars),
		check("a subagent named general-purpose replaces the built-in one: one line, and a shorter description",
			len(ov.lines) == 1 && ov.lines[0] == "- general-purpose: Any job." && ov.chars < d.chars,
			"%d → %d characters; lines %q", d.chars, ov.chars, ov.lines),
		check("making fk1 a fork adds exactly the fork sentence to its line",
			pf.chars-pi.chars == chars(delegation.ForkSuffix) && len(pf.lines) == 3 && strings.HasSuffix(pf.lines[2], delegation.ForkSuffix) &&
				!strings.Contains(pi.def.Description, delegation.ForkSuffix),
			"%d → %d characters (+%d)", pi.chars, pf.chars, pf.chars-pi.chars),
		check("the token cost moves with the characters",
			res.tokens > d.tokens && ov.tokens < d.tokens && pf.tokens > pi.tokens,
			"tokens: default %d, researcher %d, override %d, pair %d → %d", d.tokens, res.tokens, ov.tokens, pi.tokens, pf.tokens),
	)
	var params struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	_ = json.Unmarshal(d.def.Parameters, &params)
	var props []string
	for k := range params.Properties {
		props = append(props, k)
	}
	slices.Sort(props)
	tab.Checks = append(tab.Checks, check("the task tool takes two arguments, description and subagent_type: there is no mode argument",
		slices.Equal(props, []string{"description", "subagent_type"}) && len(params.Required) == 2,
		"properties: %s; required: %s", strings.Join(props, ", "), strings.Join(params.Required, ", ")))
	return tab, nil
}
