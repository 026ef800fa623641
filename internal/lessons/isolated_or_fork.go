package lessons

import (
	"fmt"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
)

var isolatedOrFork = lessonDef{
	name:    "isolated-or-fork",
	title:   "Isolated or fork: the whole account",
	article: "Article 2 (isolated or fork), §7",
	description: "Article 2 (isolated or fork), §7: the article's closing table, computed from one run. The same task goes " +
		"to an isolated child and to a fork after the parent found a date. Look at the rows: what each opened with, whether " +
		"it inherited the parent's prompt, whether it could see the date, whether it could delegate further, and what the " +
		"parent gained from each.",
	notes: map[string][]string{"isolated-or-fork": {"unused_receipt"}},
	table: isolatedOrForkTable,
}

func isolatedOrForkTable(r runs) (Table, error) {
	const date = "2027-03-01"
	v := r.view("isolated-or-fork")
	iso, err := oneChild(v, "alone")
	if err != nil {
		return Table{}, err
	}
	fork, err := oneChild(v, "follower")
	if err != nil {
		return Table{}, err
	}
	type side struct {
		msgs, seen                  int
		prompt, delegate, parentGot string
		sees                        bool
	}
	read := func(d *delegationRun) (side, error) {
		var s side
		first, err := v.firstCall(d.child.ID)
		if err != nil {
			return s, err
		}
		s.msgs = v.messageCount(first)
		s.seen = v.occurrences(first, date)
		s.sees = strings.Contains(d.receipt.Content, date)
		s.prompt = "no"
		if d.main.SystemPrompt != "" && strings.HasPrefix(first.SystemPrompt, d.main.SystemPrompt) {
			s.prompt = "yes"
		}
		s.delegate = "no task tool"
		if hasToolNamed(d.child.Tools, delegation.TaskToolName) {
			s.delegate = "has task, the call is refused"
		}
		s.parentGot = "its call and one receipt: " + quote(d.receipt.Content)
		return s, nil
	}
	i, err := read(iso)
	if err != nil {
		return Table{}, err
	}
	f, err := read(fork)
	if err != nil {
		return Table{}, err
	}
	tab := Table{
		Title:   "Isolated and fork, side by side",
		Columns: []string{"", "isolated", "fork"},
		Rows: [][]string{
			{"opening messages (system prompt + context)", itoa(i.msgs), itoa(f.msgs)},
			{"inherits the parent's prompt", i.prompt, f.prompt},
			{"can see what the parent found (" + date + " in its first call)", itoa(i.seen), itoa(f.seen)},
			{"can delegate further", i.delegate, f.delegate},
			{"what the parent gains", i.parentGot, f.parentGot},
		},
	}
	tab.Article = &ArticleTable{
		Columns: []string{"", "isolated", "fork"},
		Rows: [][]string{
			{"opening messages", "2", "9 (grows with the parent)"},
			{"inherits the parent's prompt", "no", "yes"},
			{"can see the parent's context", "no", "yes"},
			{"can delegate further", "has no such tool", "has it, but a call is refused"},
			{"what the parent gains", "one receipt", "one receipt"},
		},
	}
	tab.Note = fmt.Sprintf("Our parent did one step before delegating, so the fork opens with %d messages rather than the article's 9; "+
		"the opening grows with the parent's conversation (the entry-cost lesson). Every other row is the article's.", f.msgs)
	tab.Versus = versusByIndex(tab, "the same; the fork's opening grows with what the parent did first", "isolated", "fork")
	tab.Checks = append(tab.Checks,
		check("the isolated child opens with 2 messages, the fork with more: the parent's conversation", i.msgs == 2 && f.msgs > 2,
			"%d and %d", i.msgs, f.msgs),
		check("only the fork inherits the parent's prompt", i.prompt == "no" && f.prompt == "yes", "isolated %s, fork %s", i.prompt, f.prompt),
		check("only the fork can see the date the parent found, and only it confirms it", i.seen == 0 && f.seen > 0 && f.sees && !i.sees,
			"in the first calls: %d and %d; receipts %q and %q", i.seen, f.seen, iso.receipt.Content, fork.receipt.Content),
		check("neither can delegate: the isolated child has no task tool, the fork's call is refused",
			i.delegate == "no task tool" && f.delegate == "has task, the call is refused" && len(events[delegation.DelegationRefused](v, delegation.EventDelegationRefused)) == 1,
			"%s; %s", i.delegate, f.delegate),
		check("each costs the parent the same: its task call and one receipt", iso.receipt.Kind == string(delegation.KindReceipt) && fork.receipt.Kind == string(delegation.KindReceipt) &&
			iso.callMsg.ID == fork.callMsg.ID, "both calls in %s", iso.callMsg.ID),
	)
	return tab, nil
}
