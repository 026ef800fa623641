package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var summarizedFork = lessonDef{
	name:    "summarized-fork",
	title:   "A fork inherits the summary, not what it replaced",
	article: "Article 2 (isolated or fork), §6",
	description: "Article 2 (isolated or fork), §6: the parent's history is summarized before it delegates to a fork. " +
		"Look at the fork's first call: it opens with the summary message and the kept tail, not the folded " +
		"messages, so a fact only they held (the door code) is gone for it too; the summarization event says " +
		"where the cut was and where the folded text was written.",
	bothModes: true,
	table:     summarizedForkTable,
}

// summarizationData is the summarization event as a trace keeps it: the
// summary message is referred to by id.
type summarizationData struct {
	CutoffIndex      int    `json:"cutoff_index"`
	SummaryMessageID string `json:"summary_message_id"`
	FilePath         string `json:"file_path"`
	FoldedMessages   int    `json:"folded_messages"`
	TokensBefore     int    `json:"tokens_before"`
	TokensAfter      int    `json:"tokens_after"`
}

func summarizedForkTable(r runs) (Table, error) {
	const code = "4417"
	v := r.view("summarized-fork")
	d, err := oneChild(v, "recall")
	if err != nil {
		return Table{}, err
	}
	sums := events[summarizationData](v, delegation.EventSummarization)
	if len(sums) == 0 {
		return Table{}, fmt.Errorf("the parent's history was never summarized")
	}
	s := sums[0]
	first, err := v.firstCall(d.child.ID)
	if err != nil {
		return Table{}, err
	}
	ctx := v.context(first)
	mainList := v.list(d.main.ID)
	inFolded := 0
	for _, m := range mainList[:min(s.Data.CutoffIndex, len(mainList))] {
		inFolded += messageOccurrences(m, code)
	}
	opens := "nothing"
	if len(ctx) > 0 {
		opens = fmt.Sprintf("the %s message %s (kind %s)", ctx[0].Role, ctx[0].ID, ctx[0].Kind)
	}
	var kinds []string
	for _, m := range ctx {
		k := m.Kind
		if k == "" {
			k = m.Role
		}
		kinds = append(kinds, k)
	}
	tab := Table{
		Title:   "The parent's summarization, and the fork that came after it",
		Columns: []string{"", "value"},
		Rows: [][]string{
			{"summarization: cutoff_index", itoa(s.Data.CutoffIndex)},
			{"summarization: messages folded", itoa(s.Data.FoldedMessages)},
			{"summarization: file_path", s.Data.FilePath},
			{"summarization: the parent's context (tokens)", fmt.Sprintf("%d → %d", s.Data.TokensBefore, s.Data.TokensAfter)},
			{"the fork's first call: messages after the system prompt", fmt.Sprintf("%d: %s", len(ctx), strings.Join(kinds, ", "))},
			{"the fork's first call opens with", opens},
			{code + " in the parent's folded messages", itoa(inFolded)},
			{code + " in the fork's first call", itoa(v.occurrences(first, code))},
			{code + " in " + s.Data.FilePath, itoa(strings.Count(v.t.Files[s.Data.FilePath], code))},
			{"the fork's answer", d.receipt.Content},
		},
	}
	tab.Note = "The article describes this without figures: the event has three fields (where the cut is, the summary message, " +
		"where the original went), and the fork sees the summary plus the rest; we add the count of folded messages and the tokens."

	// The parent's effective history when it delegated: what its task turn received.
	var parentCtx []string
	for _, c := range v.turns(d.main.ID) {
		if c.OutputMessageID != nil && *c.OutputMessageID == d.callMsg.ID {
			for _, m := range v.context(c) {
				parentCtx = append(parentCtx, m.ID)
			}
		}
	}
	var forkInherited []string
	for _, m := range ctx {
		if m.AgentID == d.main.ID {
			forkInherited = append(forkInherited, m.ID)
		}
	}
	forkSummaries := 0
	for _, x := range sums {
		if x.AgentID == d.child.ID {
			forkSummaries++
		}
	}
	tab.Checks = append(tab.Checks,
		check("the parent's history was summarized once, before it delegated",
			len(sums) == 1 && s.AgentID == d.main.ID && s.Seq < firstSeq(v, delegation.EventDelegationStarted),
			"%d summarization(s); folded %d messages", len(sums), s.Data.FoldedMessages),
		check("the fork's first call starts with the summary message",
			len(ctx) > 0 && ctx[0].ID == s.Data.SummaryMessageID && ctx[0].Kind == string(delegation.KindSummary), "%s", opens),
		check("the fork inherits exactly the parent's effective history: the summary and the kept tail",
			strings.Join(forkInherited, ",") == strings.Join(parentCtx, ",") && len(parentCtx) > 0,
			"inherited %s; the parent's delegating call received %s", strings.Join(forkInherited, ", "), strings.Join(parentCtx, ", ")),
		check("the door code was only in the folded part: the parent had it, the fork's context lacks it",
			inFolded > 0 && v.occurrences(first, code) == 0 && !strings.Contains(d.receipt.Content, code),
			"folded: %d, the fork's first call: %d; the fork answered %q", inFolded, v.occurrences(first, code), d.receipt.Content),
		check("nothing is deleted: the folded text was written to the history file", strings.Contains(v.t.Files[s.Data.FilePath], code),
			"%s holds %d characters", s.Data.FilePath, chars(v.t.Files[s.Data.FilePath])),
		check("the fork did not have to summarize again", forkSummaries == 0, "%d summarizations by the fork", forkSummaries),
	)
	tab.Versus = []Versus{
		{What: "the summarization event", Article: "three fields: where the cut is, the summary message, where the original went",
			Ours: "cutoff_index " + itoa(s.Data.CutoffIndex) + ", summary_message, file_path " + s.Data.FilePath,
			Why:  "the same three fields (we add the folded count and the tokens)"},
		{What: "what the fork inherits", Article: "the summary plus the rest: what the parent lost, the fork cannot see", Ours: tab.Rows[4][1],
			Why: "the same effective history"},
	}
	return tab, nil
}

// firstSeq is the seq of the first event of a type, or a number past every
// event when there is none.
func firstSeq(v *view, typ delegation.EventType) int64 {
	for _, ev := range v.t.Events {
		if ev.Type == typ {
			return ev.Seq
		}
	}
	return 1 << 62
}
