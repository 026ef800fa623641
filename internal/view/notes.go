package view

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/trace"
)

// Note points at a likely mistake in a session's delegation. Each rule runs
// as soon as what it needs is in the log: an empty receipt when it comes
// back, a task that refers to what the child cannot see when it is given, a
// receipt nobody used or a fan-out nobody brought together when the parent
// finishes, a step limit when the child ends.
type Note struct {
	Kind    string // empty_receipt, context_missing, unsynthesized_fanout, unused_receipt, budget, unattached, overwritten
	AgentID string
	Text    string // in English
	// ID is the note's message in the catalogue (internal/i18n) and Args
	// its data, name and value by turns, for a page to say it in its
	// reader's language; Text is the same message in English.
	ID   string   `json:",omitempty"`
	Args []string `json:",omitempty"`
}

// note is a note of a kind, its text the catalogue's message id with its
// data (name, value, ...), in English.
func note(kind, agentID, id string, args ...string) Note {
	kv := make([]any, len(args))
	for i, a := range args {
		kv[i] = a
	}
	return Note{Kind: kind, AgentID: agentID, Text: i18n.Get(i18n.English).T(id, kv...), ID: id, Args: args}
}

// noteState is what the rules wait on: receipts not used yet and fan-outs
// not brought together yet, by the agent that has to. It is transient: a
// state restored from a snapshot has its notes final.
type noteState struct {
	receipts   map[string][]*pendingReceipt
	fanouts    map[string][]pendingFanout
	paths      map[string][]string   // by child: paths its task names that were no file when it started
	edits      map[string]*stepEdits // by agent: who changed its files in its current step
	budgetSeen bool
}

// stepEdits are the changes to an agent's files in one of its steps (the
// tool calls of one model answer), by path: its own tools' and its
// children's merged back, in the order they were applied.
type stepEdits struct {
	call string // the model call whose answer made the step
	by   map[string]edit
}

type edit struct {
	agent   string
	content string
	deleted bool
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
var deictic = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(above|earlier|previous(ly)?|as (we )?discussed|mentioned|that (file|one|number|order|issue|bug|function)|this (file|number|order|issue|bug|function)|the same|again)\b`)
})

// pathRE finds file paths, like /notes/todo.md.
var pathRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?:^|\s)(/[\w.-]+(?:/[\w.-]+)*\.\w+)`) })

func (s *State) addNote(n Note, ch *Changes) {
	ch.note(s)
	s.Notes = append(s.Notes, n)
}

// noteDelegationStarted: an isolated child whose task refers to something
// only the parent could see ("above", "that file") and carries nothing it
// could refer to; a path its task names that is no file now waits for the
// child's end (noteDelegationFinished), since the child may be asked to
// write it.
func (s *State) noteDelegationStarted(dl *Delegation, ch *Changes) {
	if dl.Mode != string(delegation.ModeIsolated) {
		return
	}
	if loc := deictic().FindStringIndex(dl.Task); loc != nil && !carriesMaterial(dl.Task[loc[1]:]) {
		w := dl.Task[loc[0]:loc[1]]
		s.addNote(note("context_missing", dl.ChildID, "note.deictic", "Type", dl.SubagentType, "ID", dl.ChildID, "Word", strconv.Quote(w)), ch)
		return
	}
	for _, m := range pathRE().FindAllStringSubmatch(dl.Task, -1) {
		if _, found := slices.BinarySearch(s.Files.paths, m[1]); !found && !slices.Contains(s.notes.paths[dl.ChildID], m[1]) {
			if s.notes.paths == nil {
				s.notes.paths = map[string][]string{}
			}
			s.notes.paths[dl.ChildID] = append(s.notes.paths[dl.ChildID], m[1])
		}
	}
}

// carriesMaterial reports whether the rest of a task, after a word that
// points back ("previous", "above"), holds what it points at: a colon or a
// line break followed by some text, as in "your previous draft:\n\n…".
func carriesMaterial(rest string) bool {
	i := strings.IndexAny(rest, ":\n")
	if i < 0 {
		return false
	}
	return utf8.RuneCountInString(strings.Join(strings.Fields(rest[i+1:]), "")) >= 20
}

// noteDelegationFinished: a path the task named that is still no file —
// the child did not write it, nor did anyone else — was one the child
// could not read: only the parent's conversation could hold it.
func (s *State) noteDelegationFinished(dl *Delegation, ch *Changes) {
	paths := s.notes.paths[dl.ChildID]
	delete(s.notes.paths, dl.ChildID)
	for _, p := range paths {
		if _, found := slices.BinarySearch(s.Files.paths, p); found || slices.Contains(dl.FilesBack, p) {
			continue
		}
		s.addNote(note("context_missing", dl.ChildID, "note.unknown_path", "Type", dl.SubagentType, "ID", dl.ChildID, "Path", p), ch)
		return
	}
}

// noteFilesChanged: two agents — siblings, or the parent's own tool and a
// child — that change one path of the parent's files in one step lose the
// earlier change, the later in call order winning (docs/delegation.md §6,
// as deepagents' files reducer does); a change to what the same agent
// changed, or to the same content, loses nothing.
func (s *State) noteFilesChanged(parent *Agent, from string, changes []delegation.FileChange, ch *Changes) {
	if parent.Last == nil {
		return
	}
	e := s.notes.edits[parent.ID]
	if e == nil || e.call != parent.Last.ID {
		if s.notes.edits == nil {
			s.notes.edits = map[string]*stepEdits{}
		}
		e = &stepEdits{call: parent.Last.ID, by: map[string]edit{}}
		s.notes.edits[parent.ID] = e
	}
	by := cmp.Or(from, parent.ID)
	for _, c := range changes {
		was, ok := e.by[c.Path]
		now := edit{agent: by, content: c.Content, deleted: c.Deleted}
		e.by[c.Path] = now
		if !ok || was.agent == by || (was.content == now.content && was.deleted == now.deleted) {
			continue
		}
		s.addNote(note("overwritten", parent.ID, "note.overwritten", "Earlier", s.agentLabel(was.agent), "Later", s.agentLabel(by),
			"Path", c.Path, "Parent", s.agentLabel(parent.ID), "Step", strconv.Itoa(parent.Last.Step)), ch)
	}
}

// agentLabel names an agent in a note: its name, and its id when that
// differs ("editor (a1)").
func (s *State) agentLabel(id string) string {
	if a := s.agents[id]; a != nil && a.Name != "" && a.Name != id {
		return a.Name + " (" + id + ")"
	}
	return id
}

// noteReceipt: an empty receipt at once; otherwise the receipt waits for
// the parent to draw on it.
func (s *State) noteReceipt(dl *Delegation, m *trace.Message, ch *Changes) {
	switch {
	case m.IsError:
	case m.Content == "":
		s.addNote(note("empty_receipt", dl.ChildID, "note.empty_receipt", "Type", dl.SubagentType, "ID", dl.ChildID), ch)
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
		seen := map[string]bool{}
		add := func(text string) {
			for _, w := range Words(text) {
				seen[w] = true
			}
		}
		add(m.Content)
		for _, c := range m.ToolCalls {
			add(string(c.Args))
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
	s.addNote(note("unattached", a.ID, "note.unattached", "Name", a.Name, "ID", a.ID), ch)
}

// noteAgentFinished: a child out of steps; and what the agent never did
// about its receipts and fan-outs, now that it will not.
func (s *State) noteAgentFinished(a *Agent, ch *Changes) {
	// Its own step limit, not a child's that failed it (compat deepagents).
	if a.FinishCode == delegation.FinishStepLimit {
		s.addNote(note("budget", a.ID, "note.step_limit", "Name", a.Name, "ID", a.ID, "Error", a.Error), ch)
	}
	s.flushNotes(a.ID, ch)
}

// flushNotes gives the notes an agent (every agent, for "") still owed. An
// agent that did not finish done owes none: it never had the chance.
func (s *State) flushNotes(agentID string, ch *Changes) {
	for _, a := range s.Agents {
		if agentID != "" && a.ID != agentID {
			continue
		}
		if a.Status != delegation.StatusDone {
			delete(s.notes.receipts, a.ID)
			delete(s.notes.fanouts, a.ID)
			continue
		}
		for _, p := range s.notes.receipts[a.ID] {
			s.addNote(note("unused_receipt", p.dl.ChildID, "note.unused_receipt", "Parent", a.ID, "ID", p.dl.ChildID, "Excerpt", strconv.Quote(p.excerpt)), ch)
		}
		delete(s.notes.receipts, a.ID)
		for _, f := range s.notes.fanouts[a.ID] {
			s.addNote(note("unsynthesized_fanout", a.ID, "note.unsynthesized", "ID", a.ID, "N", strconv.Itoa(f.tasks), "Message", f.messageID), ch)
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
	s.addNote(note("budget", c.AgentID, "note.budget_call", "Call", c.ID, "Tokens", strconv.Itoa(c.InputTokens), "Threshold", strconv.Itoa(s.budget)), ch)
}

// receiptWords are the words a later message would share with a receipt it
// draws on: a word of five letters or more, a number, a file name, or two
// CJK characters in a row (Words).
func receiptWords(receipt string) map[string]bool {
	words := map[string]bool{}
	for _, w := range Words(receipt) {
		r := []rune(w)
		switch {
		case isCJK(r[0]):
			words[w] = true
		case len(r) >= 5, len(r) >= 2 && strings.ContainsAny(w, "0123456789"), strings.Contains(strings.Trim(w, "."), "."):
			words[w] = true
		}
	}
	return words
}

// Words splits a text into lower-case words the way "is this receipt used"
// compares them: runs of letters and digits (with - _ . / inside them, so
// that a.toml and /notes/plan.md are words, and each part of a path is one
// too), punctuation of any script splitting them ("42。" is 42), and CJK
// text, which has no spaces, as its pairs of neighbouring characters.
func Words(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		w := strings.Trim(string(cur), "-_./")
		cur = cur[:0]
		if w == "" {
			return
		}
		out = append(out, w)
		if strings.ContainsRune(w, '/') {
			for _, part := range strings.Split(w, "/") {
				if part != "" {
					out = append(out, part)
				}
			}
		}
	}
	rs := []rune(strings.ToLower(text))
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case isCJK(r):
			flush()
			j := i
			for j < len(rs) && isCJK(rs[j]) {
				j++
			}
			for k := i; k+1 < j; k++ {
				out = append(out, string(rs[k:k+2]))
			}
			i = j - 1
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			cur = append(cur, r)
		case (r == '-' || r == '_' || r == '.' || r == '/') && len(cur) > 0:
			cur = append(cur, r)
		case r == '/':
			cur = append(cur, r) // a path's leading slash
		default:
			flush()
		}
	}
	flush()
	return out
}

// isCJK reports whether r is written without spaces between words: Han,
// kana, Hangul.
func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}
