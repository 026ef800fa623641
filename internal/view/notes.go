package view

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// Note points at a likely mistake in a session's delegation. Each rule runs
// as soon as what it needs is in the log: an empty receipt when it comes
// back, a task that refers to what the child cannot see when it is given, a
// receipt nobody used or a fan-out nobody brought together when the parent
// finishes, a step limit when the child ends.
type Note struct {
	Kind    string // empty_receipt, context_missing, unsynthesized_fanout, unused_receipt, budget, unattached
	AgentID string
	Text    string
}

// noteState is what the rules wait on: receipts not used yet and fan-outs
// not brought together yet, by the agent that has to. It is transient: a
// state restored from a snapshot has its notes final.
type noteState struct {
	receipts   map[string][]*pendingReceipt
	fanouts    map[string][]pendingFanout
	budgetSeen bool
}

type pendingReceipt struct {
	dl      *Delegation
	words   map[string]bool
	excerpt string
}

type pendingFanout struct {
	messageID string
	tasks     int
}

// deictic words point back at a conversation: in an isolated child's task
// they refer to something it never saw.
var deictic = regexp.MustCompile(`(?i)\b(above|earlier|previous(ly)?|as (we )?discussed|mentioned|that (file|one|number|order|issue|bug|function)|this (file|number|order|issue|bug|function)|the same|again)\b`)

// pathRE finds file paths, like /notes/todo.md.
var pathRE = regexp.MustCompile(`(?:^|\s)(/[\w.-]+(?:/[\w.-]+)*\.\w+)`)

func (s *State) addNote(n Note, ch *Changes) {
	ch.note(s)
	s.Notes = append(s.Notes, n)
}

// noteDelegationStarted: an isolated child whose task refers to something
// only the parent could see ("above", "that file"), or names a file that
// is not there for it to read.
func (s *State) noteDelegationStarted(dl *Delegation, ch *Changes) {
	if dl.Mode != string(delegation.ModeIsolated) {
		return
	}
	if w := deictic.FindString(dl.Task); w != "" {
		s.addNote(Note{Kind: "context_missing", AgentID: dl.ChildID, Text: fmt.Sprintf(
			"%s (%s) is isolated, but its task says %q: it refers to a conversation the child never sees. Put the facts in the task, or make the subagent a fork.", dl.SubagentType, dl.ChildID, w)}, ch)
		return
	}
	for _, m := range pathRE.FindAllStringSubmatch(dl.Task, -1) {
		if _, found := slices.BinarySearch(s.Files.paths, m[1]); !found {
			s.addNote(Note{Kind: "context_missing", AgentID: dl.ChildID, Text: fmt.Sprintf(
				"%s (%s) is isolated and its task names %s, which is not a file it can read: only the parent's conversation could hold it.", dl.SubagentType, dl.ChildID, m[1])}, ch)
			return
		}
	}
}

// noteReceipt: an empty receipt at once; otherwise the receipt waits for
// the parent to draw on it.
func (s *State) noteReceipt(dl *Delegation, m *trace.Message, ch *Changes) {
	switch {
	case m.IsError:
	case m.Content == "":
		s.addNote(Note{Kind: "empty_receipt", AgentID: dl.ChildID, Text: fmt.Sprintf(
			"%s (%s) came back with an empty receipt: its last message had no text, so its caller learned nothing. Its prompt should ask for the whole answer in the final message.", dl.SubagentType, dl.ChildID)}, ch)
	default:
		words := receiptWords(m.Content)
		if len(words) == 0 {
			return // nothing to recognise it by
		}
		if s.notes.receipts == nil {
			s.notes.receipts = map[string][]*pendingReceipt{}
		}
		s.notes.receipts[dl.ParentID] = append(s.notes.receipts[dl.ParentID], &pendingReceipt{dl: dl, words: words, excerpt: Excerpt(m.Content, 60)})
	}
}

// noteAssistant: a later assistant message that shares a word with a
// receipt uses it; one with text brings the agent's earlier fan-outs
// together; one of several task calls is a fan-out to bring together.
func (s *State) noteAssistant(a *Agent, m *trace.Message, ch *Changes) {
	if pending := s.notes.receipts[a.ID]; len(pending) > 0 {
		text := strings.ToLower(m.Content)
		for _, c := range m.ToolCalls {
			text += " " + strings.ToLower(string(c.Args))
		}
		seen := map[string]bool{}
		for _, w := range strings.FieldsFunc(text, notWord) {
			seen[w] = true
		}
		pending = slices.DeleteFunc(pending, func(p *pendingReceipt) bool {
			for w := range p.words {
				if seen[w] {
					return true
				}
			}
			return false
		})
		s.notes.receipts[a.ID] = pending
	}
	if strings.TrimSpace(m.Content) != "" {
		delete(s.notes.fanouts, a.ID)
	}
	tasks := 0
	for _, c := range m.ToolCalls {
		if c.Name == delegation.TaskToolName {
			tasks++
		}
	}
	if tasks >= 2 {
		if s.notes.fanouts == nil {
			s.notes.fanouts = map[string][]pendingFanout{}
		}
		s.notes.fanouts[a.ID] = append(s.notes.fanouts[a.ID], pendingFanout{messageID: m.ID, tasks: tasks})
	}
}

// noteAgentStarted: an agent under another without a task call, which only
// a received or recorded session has: calls that no delegation explains,
// shown on their own (docs/proxy.md, docs/ingest.md).
func (s *State) noteAgentStarted(a *Agent, ch *Changes) {
	if a.ParentID == "" || a.TaskCallID != "" {
		return
	}
	s.addNote(Note{Kind: "unattached", AgentID: a.ID, Text: fmt.Sprintf(
		"%s (%s) is shown on its own, unattached: its calls continue no agent's conversation and open no task an agent was "+
			"waiting on, so no delegation explains them — a side call of the program, a history rewritten since, or another program's calls.",
		a.Name, a.ID)}, ch)
}

// noteAgentFinished: a child out of steps; and what the agent never did
// about its receipts and fan-outs, now that it will not.
func (s *State) noteAgentFinished(a *Agent, ch *Changes) {
	if strings.Contains(a.Error, "step limit") {
		s.addNote(Note{Kind: "budget", AgentID: a.ID, Text: fmt.Sprintf("%s (%s) %s: give it a narrower task or more max_steps.", a.Name, a.ID, a.Error)}, ch)
	}
	s.flushNotes(a.ID, ch)
}

// flushNotes gives the notes an agent (every agent, for "") still owed.
func (s *State) flushNotes(agentID string, ch *Changes) {
	for _, a := range s.Agents {
		if agentID != "" && a.ID != agentID {
			continue
		}
		for _, p := range s.notes.receipts[a.ID] {
			s.addNote(Note{Kind: "unused_receipt", AgentID: p.dl.ChildID, Text: fmt.Sprintf(
				"Nothing %s said afterwards draws on %s's receipt (%q): was the delegation needed, or did the report not answer the task?", a.ID, p.dl.ChildID, p.excerpt)}, ch)
		}
		delete(s.notes.receipts, a.ID)
		for _, f := range s.notes.fanouts[a.ID] {
			s.addNote(Note{Kind: "unsynthesized_fanout", AgentID: a.ID, Text: fmt.Sprintf(
				"%s sent %d tasks at once (%s), but wrote nothing afterwards: the reports were never brought together.", a.ID, f.tasks, f.messageID)}, ch)
		}
		delete(s.notes.fanouts, a.ID)
	}
}

// noteBudgetCall: the first call past twice the team's threshold.
func (s *State) noteBudgetCall(c *trace.ModelCall, ch *Changes) {
	if s.notes.budgetSeen {
		return
	}
	s.notes.budgetSeen = true
	s.addNote(Note{Kind: "budget", AgentID: c.AgentID, Text: fmt.Sprintf(
		"Call %s received %d input tokens, more than twice the team's summarization threshold of %d.", c.ID, c.InputTokens, s.budget)}, ch)
}

// receiptWords are the words a later message would share with a receipt it
// draws on: five letters or more, or a number.
func receiptWords(receipt string) map[string]bool {
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(receipt), notWord) {
		if len(w) >= 5 || (len(w) >= 2 && strings.ContainsAny(w, "0123456789")) {
			words[w] = true
		}
	}
	return words
}

func notWord(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r > 127)
}
