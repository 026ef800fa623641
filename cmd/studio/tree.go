package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// printTree writes a session as a readable tree: agents, modes, statuses,
// steps, tokens, tasks and receipts.
func printTree(w io.Writer, t *trace.Trace) {
	st, err := view.FromTrace(t, 0)
	if err != nil {
		fmt.Fprintf(w, "session %s: %v\n", t.Session.Name, err)
		return
	}
	root := st.Tree()
	if root == nil {
		fmt.Fprintf(w, "session %s: %s · no agent started\n", t.Session.Name, t.Session.Status)
		return
	}
	texts := make(map[string]string, len(t.Messages))
	for _, m := range t.Messages {
		if m.Kind == "receipt" {
			texts[m.ID] = m.Content
		}
	}
	fmt.Fprintf(w, "session %s: %s · %s · %s · %s (%s)\n", t.Session.Name, t.Session.Status,
		plural(len(t.Agents), "agent"), plural(len(t.ModelCalls), "model call"), plural(root.SubtreeTokens, "input token"), t.Session.Tokenizer)
	fmt.Fprintf(w, "prompt: %s\n\n", view.Excerpt(t.Session.Prompt, 100))
	printNode(w, root, texts, "", "")
	if t.Session.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", t.Session.Error)
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if m := t.Messages[i]; m.AgentID == "main" && m.Role == "assistant" && strings.TrimSpace(m.Content) != "" {
			fmt.Fprintf(w, "\nanswer: %s\n", view.Excerpt(m.Content, 200))
			break
		}
	}
	if paths := trace.SortedPaths(t.Files); len(paths) > 0 {
		fmt.Fprintf(w, "files: %s\n", strings.Join(paths, ", "))
	}
}

func printNode(w io.Writer, n *view.Node, receipts map[string]string, first, rest string) {
	a := n.Agent
	mode := ""
	if a.Mode != "" {
		mode = " [" + a.Mode + "]"
	}
	status := a.Status
	if a.Error != "" {
		status += ": " + view.Excerpt(a.Error, 80)
	}
	fmt.Fprintf(w, "%s%s%s  %s  %s  %s tokens in", first, a.Name, mode, status, plural(a.Calls, "step"), thousands(a.OwnTokens))
	if n.SubtreeTokens != a.OwnTokens {
		fmt.Fprintf(w, " (%s with its subagents)", thousands(n.SubtreeTokens))
	}
	if a.ParentID != "" {
		fmt.Fprintf(w, ", entry %s", thousands(a.EntryTokens))
		if a.InheritedTokens > 0 {
			fmt.Fprintf(w, " (%s inherited)", thousands(a.InheritedTokens))
		}
	}
	fmt.Fprintln(w)
	if a.ParentID != "" {
		fmt.Fprintf(w, "%s    task:    %q\n", rest, view.Excerpt(a.Task, 90))
		label, receipt := "receipt:", ""
		if d := n.Delegation; d != nil && d.Receipt != nil {
			receipt = receipts[d.Receipt.ID]
			if d.Receipt.IsError {
				label = "receipt (error):"
			}
		}
		fmt.Fprintf(w, "%s    %s %q\n", rest, label, view.Excerpt(receipt, 90))
	}
	type item struct {
		child   *view.Node
		refusal *view.Refusal
	}
	var items []item
	for _, c := range n.Children {
		items = append(items, item{child: c})
	}
	for i := range n.Refused {
		items = append(items, item{refusal: &n.Refused[i]})
	}
	for i, it := range items {
		branch, next := "├─ ", "│  "
		if i == len(items)-1 {
			branch, next = "└─ ", "   "
		}
		if it.child != nil {
			printNode(w, it.child, receipts, rest+branch, rest+next)
			continue
		}
		r := it.refusal
		fmt.Fprintf(w, "%s%s✗ %s  refused (%s): %q\n", rest, branch, r.SubagentType, r.Reason, view.Excerpt(r.Message, 80))
	}
}

// plural is "1 agent", "2 agents", "1,234 agents".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return thousands(n) + " " + word + "s"
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
