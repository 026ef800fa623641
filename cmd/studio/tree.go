package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// printTree writes a session as a readable tree: agents, modes, statuses,
// steps, tokens, tasks and receipts.
func printTree(w io.Writer, t *trace.Trace) {
	root := session.Tree(t)
	fmt.Fprintf(w, "session %s: %s · %s · %s · %s (%s)\n", t.Session.Name, t.Session.Status,
		plural(len(t.Agents), "agent"), plural(len(t.ModelCalls), "model call"), plural(root.SubtreeTokens, "input token"), t.Session.Tokenizer)
	fmt.Fprintf(w, "prompt: %s\n\n", session.Excerpt(t.Session.Prompt, 100))
	printNode(w, root, "", "")
	if t.Session.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", t.Session.Error)
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if m := t.Messages[i]; m.AgentID == "main" && m.Role == "assistant" && strings.TrimSpace(m.Content) != "" {
			fmt.Fprintf(w, "\nanswer: %s\n", session.Excerpt(m.Content, 200))
			break
		}
	}
	if paths := trace.SortedPaths(t.Files); len(paths) > 0 {
		fmt.Fprintf(w, "files: %s\n", strings.Join(paths, ", "))
	}
}

func printNode(w io.Writer, n *session.Node, first, rest string) {
	a := n.Agent
	mode := ""
	if a.Mode != nil {
		mode = " [" + *a.Mode + "]"
	}
	status := a.Status
	if a.Error != "" {
		status += ": " + session.Excerpt(a.Error, 80)
	}
	fmt.Fprintf(w, "%s%s%s  %s  %s  %s tokens in", first, a.Name, mode, status, plural(n.Calls, "step"), thousands(n.OwnTokens))
	if n.SubtreeTokens != n.OwnTokens {
		fmt.Fprintf(w, " (%s with its subagents)", thousands(n.SubtreeTokens))
	}
	if a.ParentID != nil {
		fmt.Fprintf(w, ", entry %s", thousands(n.EntryTokens))
		if n.InheritedTokens > 0 {
			fmt.Fprintf(w, " (%s inherited)", thousands(n.InheritedTokens))
		}
	}
	fmt.Fprintln(w)
	if a.ParentID != nil {
		fmt.Fprintf(w, "%s    task:    %q\n", rest, session.Excerpt(n.Task, 90))
		label := "receipt:"
		if n.ReceiptIsError {
			label = "receipt (error):"
		}
		fmt.Fprintf(w, "%s    %s %q\n", rest, label, session.Excerpt(n.Receipt, 90))
	}
	type item struct {
		child   *session.Node
		refusal *session.Refusal
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
			printNode(w, it.child, rest+branch, rest+next)
			continue
		}
		r := it.refusal
		fmt.Fprintf(w, "%s%s✗ %s  refused (%s): %q\n", rest, branch, r.SubagentType, r.Reason, session.Excerpt(r.Message, 80))
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
