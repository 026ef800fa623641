package session

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Note points at a likely mistake in a session's delegation.
type Note struct {
	Kind    string // empty_receipt, context_missing, unsynthesized_fanout, unused_receipt, budget
	AgentID string
	Text    string
}

// deictic words point back at a conversation: in an isolated child's task
// they refer to something it never saw.
var deictic = regexp.MustCompile(`(?i)\b(above|earlier|previous(ly)?|as (we )?discussed|mentioned|that (file|one|number|order|issue|bug|function)|this (file|number|order|issue|bug|function)|the same|again)\b`)

// pathRE finds file paths, like /notes/todo.md.
var pathRE = regexp.MustCompile(`(?:^|\s)(/[\w.-]+(?:/[\w.-]+)*\.\w+)`)

// Notes looks over a session for the mistakes people make when they
// delegate: an empty receipt; an isolated child whose task refers to
// something only the parent could see ("above", "that file", a fact never
// given to it); a fan-out nobody synthesizes; a receipt the parent never
// uses; a child that ran out of steps or a call past the team's token budget.
func Notes(t *trace.Trace) []Note {
	var notes []Note
	lists := Lists(t)
	agents := map[string]trace.Agent{}
	for _, a := range t.Agents {
		agents[a.ID] = a
	}
	receipts := map[string]trace.Message{} // by task call id
	receiptIdx := map[string]int{}
	for _, list := range lists {
		for i, m := range list {
			if m.Kind == string(delegation.KindReceipt) && m.ToolCallID != nil {
				receipts[*m.ToolCallID], receiptIdx[*m.ToolCallID] = m, i
			}
		}
	}
	for _, ev := range t.Events {
		if ev.Type != delegation.EventDelegationStarted {
			continue
		}
		var d delegation.DelegationStarted
		if json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		parent := ev.AgentID
		r, done := receipts[d.ToolCallID]
		switch {
		case !done:
		case r.Content == "" && !r.IsError:
			notes = append(notes, Note{Kind: "empty_receipt", AgentID: d.ChildID, Text: fmt.Sprintf(
				"%s (%s) came back with an empty receipt: its last message had no text, so its caller learned nothing. Its prompt should ask for the whole answer in the final message.", d.SubagentType, d.ChildID)})
		case !r.IsError && !usedLater(lists[parent], receiptIdx[d.ToolCallID], r.Content):
			notes = append(notes, Note{Kind: "unused_receipt", AgentID: d.ChildID, Text: fmt.Sprintf(
				"Nothing %s said afterwards draws on %s's receipt (%q): was the delegation needed, or did the report not answer the task?", parent, d.ChildID, Excerpt(r.Content, 60))})
		}
		if d.Mode == delegation.ModeIsolated {
			if w := deictic.FindString(d.Description); w != "" {
				notes = append(notes, Note{Kind: "context_missing", AgentID: d.ChildID, Text: fmt.Sprintf(
					"%s (%s) is isolated, but its task says %q: it refers to a conversation the child never sees. Put the facts in the task, or make the subagent a fork.", d.SubagentType, d.ChildID, w)})
			} else if f := missingFile(d.Description, t.Files); f != "" {
				notes = append(notes, Note{Kind: "context_missing", AgentID: d.ChildID, Text: fmt.Sprintf(
					"%s (%s) is isolated and its task names %s, which is not a file it can read: only the parent's conversation could hold it.", d.SubagentType, d.ChildID, f)})
			}
		}
	}
	notes = append(notes, fanOutNotes(t, lists)...)
	budget := 0
	var sc struct {
		Agent struct {
			Summarization struct {
				MaxTokens int `json:"max_tokens"`
			} `json:"summarization"`
		} `json:"agent"`
	}
	if json.Unmarshal(t.Scenario, &sc) == nil {
		budget = sc.Agent.Summarization.MaxTokens
	}
	for _, a := range t.Agents {
		if strings.Contains(a.Error, "step limit") {
			notes = append(notes, Note{Kind: "budget", AgentID: a.ID, Text: fmt.Sprintf("%s (%s) %s: give it a narrower task or more max_steps.", a.Name, a.ID, a.Error)})
		}
	}
	if budget > 0 {
		for _, c := range t.ModelCalls {
			if c.InputTokens > 2*budget {
				notes = append(notes, Note{Kind: "budget", AgentID: c.AgentID, Text: fmt.Sprintf(
					"Call %s received %d input tokens, more than twice the team's summarization threshold of %d.", c.ID, c.InputTokens, budget)})
				break
			}
		}
	}
	return notes
}

// usedLater reports whether a later assistant message of the list shares a
// word of five letters or more, or a number, with the receipt.
func usedLater(list []trace.Message, from int, receipt string) bool {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(receipt), notWord) {
		if len(w) >= 5 || (len(w) >= 2 && strings.ContainsAny(w, "0123456789")) {
			words[w] = true
		}
	}
	if len(words) == 0 {
		return true // nothing to recognise it by
	}
	for _, m := range list[from+1:] {
		if m.Role != string(delegation.RoleAssistant) {
			continue
		}
		text := strings.ToLower(m.Content)
		for _, c := range m.ToolCalls {
			text += " " + strings.ToLower(string(c.Args))
		}
		for _, w := range strings.FieldsFunc(text, notWord) {
			if words[w] {
				return true
			}
		}
	}
	return false
}

func notWord(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r > 127)
}

// missingFile finds a path the task names that is not a file the child
// could read: it exists only in the parent's conversation, if anywhere.
func missingFile(task string, files map[string]string) string {
	for _, m := range pathRE.FindAllStringSubmatch(task, -1) {
		if _, ok := files[m[1]]; !ok {
			return m[1]
		}
	}
	return ""
}

// fanOutNotes flags a message of several task calls whose receipts no later
// assistant text of the parent brings together.
func fanOutNotes(t *trace.Trace, lists map[string][]trace.Message) []Note {
	var notes []Note
	for agentID, list := range lists {
		for i, m := range list {
			tasks := 0
			for _, c := range m.ToolCalls {
				if c.Name == delegation.TaskToolName {
					tasks++
				}
			}
			if tasks < 2 {
				continue
			}
			synthesized := false
			for _, later := range list[i+1:] {
				if later.Role == string(delegation.RoleAssistant) && strings.TrimSpace(later.Content) != "" {
					synthesized = true
					break
				}
			}
			if !synthesized {
				notes = append(notes, Note{Kind: "unsynthesized_fanout", AgentID: agentID, Text: fmt.Sprintf(
					"%s sent %d tasks at once (%s), but wrote nothing afterwards: the reports were never brought together.", agentID, tasks, m.ID)})
			}
		}
	}
	return notes
}

// Excerpt is s on one line, white space folded, cut to at most n runes with
// an ellipsis: how a view quotes a message in a line.
func Excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
