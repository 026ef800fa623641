package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var parentAfter = lessonDef{
	name:    "parent-after",
	title:   "One delegation: what the parent holds afterwards",
	article: "Article 1 (the task tool), §3 and §7",
	description: "Article 1 (the task tool), §3 and §7: the parent's message list after one delegation. Look at " +
		"how little it gained: its own task call and one receipt, the child's last message with text. The " +
		"child's intermediate message and tool result never arrive; the file it wrote does.",
	bothModes: true,
	table:     parentAfterTable,
}

func parentAfterTable(r runs) (Table, error) {
	v := r.view("parent-after")
	d, err := oneChild(v, delegation.GeneralPurposeName)
	if err != nil {
		return Table{}, err
	}
	list := v.list(d.main.ID)
	tab := Table{
		Title:   "The parent's message list at the end",
		Columns: []string{"#", "role", "what", "content", "characters", "tokens"},
	}
	var roles []string
	for i, m := range list {
		what := ""
		switch {
		case m.Kind == string(delegation.KindPrompt):
			what = "the user's question"
		case len(m.ToolCalls) > 0 && m.ToolCalls[0].Name == delegation.TaskToolName:
			what = "its task call"
		case m.Kind == string(delegation.KindReceipt):
			what = "the receipt"
		case m.Role == string(delegation.RoleAssistant):
			what = "its closing answer"
		}
		content := m.Content
		if content == "" && len(m.ToolCalls) > 0 {
			content = m.ToolCalls[0].Name + " " + string(m.ToolCalls[0].Args)
		}
		n := ""
		if m.Content != "" {
			n = itoa(chars(m.Content))
		}
		roles = append(roles, m.Role)
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), m.Role, what, clip(content, 70), n, itoa(m.Tokens)})
	}
	step := d.callMsg.Tokens + d.receipt.Tokens
	tab.Rows = append(tab.Rows, []string{"", "", "the delegation (call + receipt)", "", "", itoa(step)})
	tab.Article = &ArticleTable{
		Columns: tab.Columns,
		Rows: [][]string{
			{"1", "human", "the user's question", "用户的问题", "", ""},
			{"2", "AI", "its task call", "(task call)", "", "40"},
			{"3", "tool", "the receipt", "子 Agent 的最终报告：结论是 42。", "21", "13"},
			{"4", "AI", "its closing answer", "父的收尾话", "", ""},
			{"", "", "the delegation (call + receipt)", "", "", "68"},
		},
	}
	tab.Note = "The receipt is the article's own sentence, so its 21 characters match; token counts differ with the tokenizer " +
		"and our task description, and we count the step as the two messages' tokens only."

	childList := v.list(d.child.ID)
	leaked := 0
	for _, cm := range childList {
		if cm.Kind == string(delegation.KindTask) || cm.Content == "" {
			continue
		}
		for _, pm := range list {
			if pm.Content == cm.Content && cm.Content != d.receipt.Content {
				leaked++
			}
		}
	}
	lastText := ""
	for _, cm := range childList {
		if cm.Role == string(delegation.RoleAssistant) && strings.TrimSpace(cm.Content) != "" {
			lastText = strings.TrimRight(cm.Content, " \t\r\n")
		}
	}
	callIdx, receiptIdx := -1, -1
	for i, m := range list {
		if m.ID == d.callMsg.ID {
			callIdx = i
		}
		if m.ID == d.receipt.ID {
			receiptIdx = i
		}
	}
	_, hasFile := v.t.Files["/child.md"]
	tab.Checks = append(tab.Checks,
		check("the parent's list is the question, its task call, the receipt, its answer",
			strings.Join(roles, ",") == "user,assistant,tool,assistant" && callIdx == 1 && receiptIdx == 2,
			"roles: %s", strings.Join(roles, ", ")),
		check("the delegation added exactly two messages to the parent: its call and the receipt",
			receiptIdx == callIdx+1 && len(list) == 4,
			"the child's %d messages stayed in the child; the parent has %d", len(childList), len(list)),
		check("the receipt is the child's last message with text, verbatim",
			d.receipt.Content == lastText && d.receipt.Kind == string(delegation.KindReceipt),
			"%q: %d characters, %d tokens", d.receipt.Content, chars(d.receipt.Content), d.receipt.Tokens),
		check("none of the child's own steps reached the parent", leaked == 0 && len(childList) == 4,
			"the child's list: %d messages; found in the parent: %d", len(childList), leaked),
		check("the file the child wrote is in the parent's files", hasFile, "/child.md: %q", v.t.Files["/child.md"]),
	)
	tab.Versus = versusByIndexKeyed(tab, 2, "the same four messages; the receipt is the article's sentence, the tokens are our tokenizer's and our texts'",
		"role", "characters", "tokens")
	if err := countParentAfter(&tab, d); err != nil {
		return Table{}, err
	}
	return tab, nil
}

// countParentAfter counts the table's figures as the article counts. The
// receipt is the article's sentence and lands on its figure; the call
// carries our description, which the article does not print: the longest
// description a call of its 40 tokens can hold says how much shorter its
// was.
func countParentAfter(tab *Table, d *delegationRun) error {
	call, receipt := articleCallTokens(d.call), articleMessageTokens(d.receipt)
	fits := 0
	for n := 1; n <= 400; n++ {
		c, err := withDescription(d.call, strings.Repeat("x", n))
		if err != nil {
			return err
		}
		if articleCallTokens(c) > 40 {
			break
		}
		fits = n
	}
	return tab.countAs(
		countedFigure{"its task call: tokens", call, 40, fmt.Sprintf("our description is %d characters and says where the working goes; the article does not print "+
			"its own, and a call of 40 tokens holds a description of at most %d", chars(d.task), fits)},
		countedFigure{"the receipt: tokens", receipt, 13, ""},
		countedFigure{"the delegation (call + receipt): tokens", call + receipt, 68, ""},
	)
}
