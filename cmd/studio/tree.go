package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
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
	printState(w, t, st)
}

// printState writes the tree of a session whose log st folds; t is its
// trace.
func printState(w io.Writer, t *trace.Trace, st *view.State) {
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
	fmt.Fprintf(w, "session %s: %s · %s · %s · %s (%s), %s cached", t.Session.Name, t.Session.Status,
		plural(len(t.Agents), "agent"), plural(len(t.ModelCalls), "model call"), plural(root.SubtreeTokens, "input token"),
		t.Session.Tokenizer, thousands(root.SubtreeCached))
	if c := root.SubtreeCost; c.Priced() {
		fmt.Fprintf(w, " · %s", view.Dollars(c.Total))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "prompt: %s\n\n", view.Excerpt(t.Session.Prompt, 100))
	printNode(w, st, root, texts, "", "")
	if by := st.Session.StoppedBy; by != "" {
		fmt.Fprintf(w, "\nstopped: %s\n", stopWords(by))
	} else if key := i18n.ErrorKey(st.Session.Code); key != "" {
		fmt.Fprintf(w, "\nerror: %s\n", i18n.Get(i18n.English).T(key))
	} else if t.Session.Error != "" {
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

func printNode(w io.Writer, st *view.State, n *view.Node, receipts map[string]string, first, rest string) {
	a := n.Agent
	mode := ""
	if a.Mode != "" {
		mode = " [" + a.Mode + "]"
	}
	status := a.Status
	if a.StoppedBy != "" && a.Status == delegation.StatusInterrupted {
		status += ": " + stopWords(a.StoppedBy)
	} else if a.Error != "" {
		status += ": " + view.Excerpt(a.Error, 80)
	}
	fmt.Fprintf(w, "%s%s%s  %s  %s  %s tokens in, %s cached", first, a.Name, mode, status, plural(a.Calls, "step"),
		thousands(a.OwnTokens), thousands(a.CachedTokens))
	if n.SubtreeTokens != a.OwnTokens {
		fmt.Fprintf(w, " (%s with its subagents, %s cached)", thousands(n.SubtreeTokens), thousands(n.SubtreeCached))
	}
	if a.ParentID != "" {
		fmt.Fprintf(w, ", entry %s", thousands(a.EntryTokens))
		var parts []string
		if a.InheritedTokens > 0 {
			parts = append(parts, thousands(a.InheritedTokens)+" inherited")
		}
		parts = append(parts, thousands(a.EntryCached)+" cached")
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	if a.Cost.Priced() {
		fmt.Fprintf(w, "  %s", view.Dollars(a.Cost.Total))
		if n.SubtreeCost.Calls != a.Cost.Calls {
			fmt.Fprintf(w, " (%s with its subagents)", view.Dollars(n.SubtreeCost.Total))
		}
	}
	fmt.Fprintln(w)
	if a.ReportedCalls > 0 {
		fmt.Fprintf(w, "%s    cache:   the endpoint reported %s cached tokens over %s, the studio estimated %s (%+d)%s\n", rest,
			thousands(a.ReportedCached), plural(a.ReportedCalls, "call"), thousands(a.EstimatedCached), a.ReportedCached-a.EstimatedCached, cacheWrites(a.Economics))
	}
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
		if d := n.Delegation; d != nil && d.Receipt != nil {
			sv := st.Saving(d)
			money := `no price (set "pricing" to price it)`
			if n.SubtreeCost.Priced() {
				money = "the child cost " + view.Dollars(n.SubtreeCost.Total)
				if sv.Priced {
					money += ", the saving " + view.Dollars(sv.Cost) + " at the parent's cached-input price"
				}
			}
			fmt.Fprintf(w, "%s    economics: the receipt kept %s of the child's work out of %s of the parent (%s); %s\n", rest,
				plural(sv.PerCall, "token"), plural(d.LaterCalls, "later call"), plural(sv.Tokens, "token"), money)
		}
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
			printNode(w, st, it.child, receipts, rest+branch, rest+next)
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

// thousands writes 12345 as 12,345, as the pages do.
func thousands(n int) string { return view.Thousands(n) }

// stopWords is why a session or an agent was stopped, from its stopped_by
// code, in the command line's language (English).
func stopWords(code string) string { return i18n.Get(i18n.English).T(i18n.StopKey(code)) }

// cacheWrites says what an agent's endpoint wrote to its cache, and what
// that cost where it was priced (Anthropic's surcharge), after its reads.
func cacheWrites(e view.Economics) string {
	if e.ReportedWritten == 0 {
		return ""
	}
	s := "; it wrote " + thousands(e.ReportedWritten)
	if e.Cost.Priced() && e.Cost.CacheWrite > 0 {
		s += " (" + view.Dollars(e.Cost.CacheWrite) + ")"
	}
	return s
}
