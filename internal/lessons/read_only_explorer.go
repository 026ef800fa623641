package lessons

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var readOnlyExplorer = lessonDef{
	name:    "read-only-explorer",
	title:   "A read-only explorer: the search stays in the child",
	article: "Article 3 (subagent patterns), §1 and §3",
	description: "Article 3 (subagent patterns), §1 and §3: an explorer subagent with read-only tools (ls, read_file, " +
		"grep, glob) reviews a login module. Look at its tools — no write_file, edit_file or delete — and at the " +
		"sizes: the child's context grows with every file it reads, the parent receives one 'auth.py line 42 …' summary.",
	bothModes: true,
	table:     readOnlyExplorerTable,
}

var writeTools = []string{"write_file", "edit_file", "delete"}

func readOnlyExplorerTable(r runs) (Table, error) {
	v := r.view("read-only-explorer")
	d, err := oneChild(v, "explorer")
	if err != nil {
		return Table{}, err
	}
	callsOf := func(agentID string) []string {
		var out []string
		for _, m := range v.list(agentID) {
			for _, tc := range m.ToolCalls {
				out = append(out, tc.Name)
			}
		}
		return out
	}
	canWrite := func(names []string) []string {
		var out []string
		for _, n := range names {
			if slices.Contains(writeTools, n) {
				out = append(out, n)
			}
		}
		return out
	}
	explorerTurns := v.turns(d.child.ID)
	last := explorerTurns[len(explorerTurns)-1]
	mainNames, expNames := toolNames(d.main.Tools), toolNames(d.child.Tools)
	writeCell := func(ns []string) string {
		if w := canWrite(ns); len(w) > 0 {
			return "yes: " + strings.Join(w, ", ")
		}
		return "no"
	}
	tab := Table{
		Title:   "The parent and its read-only explorer",
		Columns: []string{"", "parent", "explorer"},
		Rows: [][]string{
			{"tools", strings.Join(mainNames, ", "), strings.Join(expNames, ", ")},
			{"can change files", writeCell(mainNames), writeCell(expNames)},
			{"tool calls made", strings.Join(callsOf(d.main.ID), ", "), strings.Join(callsOf(d.child.ID), ", ")},
			{"context at its last call (messages, tokens)",
				fmt.Sprintf("%d, %d", v.messageCount(v.turns(d.main.ID)[len(v.turns(d.main.ID))-1]), contextTokens(v.turns(d.main.ID)[len(v.turns(d.main.ID))-1])),
				fmt.Sprintf("%d, %d", v.messageCount(last), contextTokens(last))},
			{"what the parent received", "", fmt.Sprintf("one receipt, %d tokens: %s", d.receipt.Tokens, clip(d.receipt.Content, 70))},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"", "the article"},
		Rows: [][]string{
			{"the explorer's tools", "read-only: READ_FILE, GREP, LIST_DIR; no write tools"},
			{"what comes back", "问题在 auth.py 第 42 行，token 没校验过期，复现步骤如下 (the problem is at auth.py line 42: the token's expiry is not checked; steps to reproduce follow)"},
		},
	}
	tab.Note = "Our stack's read-only tools are ls, read_file, grep and glob (the article's hand-written harness has read_file, grep and list_dir); the code base and the summary are ours, shaped as the article's example."

	var grepOut string
	for _, m := range v.list(d.child.ID) {
		if m.Role == string(delegation.RoleTool) && strings.Contains(m.Content, "auth.py:42:") {
			grepOut = m.Content
		}
	}
	leaked := 0
	for _, m := range v.list(d.child.ID) {
		if m.Role != string(delegation.RoleTool) || m.Content == "" {
			continue
		}
		for _, pm := range v.list(d.main.ID) {
			if strings.Contains(pm.Content, m.Content) {
				leaked++
			}
		}
	}
	sc, err := scenarioOf(v.t)
	if err != nil {
		return Table{}, err
	}
	tab.Checks = append(tab.Checks,
		check("the explorer has read-only tools only: ls, read_file, grep, glob",
			slices.Equal(expNames, []string{"ls", "read_file", "grep", "glob"}) && len(canWrite(expNames)) == 0 &&
				!slices.Contains(expNames, delegation.TaskToolName),
			"%s", strings.Join(expNames, ", ")),
		check("it found the line by searching: grep returned auth.py:42", grepOut != "", "%s", clip(grepOut, 80)),
		check("its summary names the file and the line, as the task asked", strings.Contains(d.receipt.Content, "auth.py line 42"),
			"%s", clip(d.receipt.Content, 80)),
		check("none of its tool results reached the parent: the process stays in the child", leaked == 0,
			"%d of the explorer's tool results found in the parent", leaked),
		check("the parent received far less than the explorer read", d.receipt.Tokens*4 < contextTokens(last),
			"receipt %d tokens; the explorer's context at its last call %d", d.receipt.Tokens, contextTokens(last)),
		check("no file changed", maps.Equal(v.t.Files, sc.File.Files), "%d files, as at the start", len(v.t.Files)),
	)
	tab.Versus = []Versus{
		{What: "the explorer's tools", Article: tab.Article.Rows[0][1], Ours: tab.Rows[0][2],
			Why: "our stack's read-only tools; the article's harness is hand-written"},
		{What: "what comes back", Article: tab.Article.Rows[1][1], Ours: tab.Rows[4][2],
			Why: "our code base and summary, shaped as the article's example"},
	}
	return tab, nil
}
