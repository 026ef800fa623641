package lessons

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

var fanOut = lessonDef{
	name:    "fan-out",
	title:   "Fan-out: three researchers at once, one synthesis",
	article: "Article 3 (subagent patterns), §1, §2 and §4",
	description: "Article 3 (subagent patterns), §2, the fan-out: three independent research tasks sent in one " +
		"message. Look at the timings: the three run at once and finish out of order, yet their receipts come " +
		"back in call order; each context holds only its own task, each child pays its own prompt prefix, and " +
		"the parent alone merges the three conclusions.",
	bothModes: true,
	table:     fanOutTable,
	claims: []claim{
		{"three", "3", "call order"},
	},
}

// span is when an agent ran: from its first model call to its end.
func span(v *view, a trace.Agent) (start, end time.Time) {
	for _, ev := range v.t.Events {
		if ev.AgentID != a.ID {
			continue
		}
		if ev.Type == delegation.EventModelStarted && start.IsZero() {
			start = ev.At
		}
		if ev.Type == delegation.EventAgentFinished {
			end = ev.At
		}
	}
	return start, end
}

func fanOutTable(r runs) (Table, error) {
	v := r.view("fan-out")
	kids := v.agents("researcher")
	if len(kids) != 3 {
		return Table{}, fmt.Errorf("want 3 researchers, got %d", len(kids))
	}
	var ds []*delegationRun
	for _, a := range kids {
		d, err := childRun(v, a)
		if err != nil {
			return Table{}, err
		}
		ds = append(ds, d)
	}
	main, err := v.agent("main")
	if err != nil {
		return Table{}, err
	}
	finished, receiptOrder := fanOutOrders(v, main.ID, ds)
	var (
		firstStart, lastEnd time.Time
		sum                 time.Duration
		latestStart         time.Time
		earliestEnd         time.Time
		prefixes, prefix0   int
	)
	tab := Table{
		Title: "Three researchers sent in one message",
		Columns: []string{"call order", "task", "ran (ms)", "finished", "receipt's place in the parent",
			"prefix (system + tools, tokens)", "receipt"},
	}
	tasks := make([]string, len(ds))
	for i, d := range ds {
		tasks[i] = d.task
		start, end := span(v, d.child)
		sum += end.Sub(start)
		if firstStart.IsZero() || start.Before(firstStart) {
			firstStart = start
		}
		if end.After(lastEnd) {
			lastEnd = end
		}
		if start.After(latestStart) {
			latestStart = start
		}
		if earliestEnd.IsZero() || end.Before(earliestEnd) {
			earliestEnd = end
		}
		c, err := v.firstCall(d.child.ID)
		if err != nil {
			return Table{}, err
		}
		prefixes += c.SystemTokens + c.ToolTokens
		if i == 0 {
			prefix0 = c.SystemTokens + c.ToolTokens
		}
		tab.Rows = append(tab.Rows, []string{itoa(i + 1), clip(tasks[i], 50), itoa(int(end.Sub(start).Milliseconds())),
			ordinal(slices.Index(finished, d.child.ID) + 1), ordinal(slices.Index(receiptOrder, d.child.ID) + 1),
			itoa(c.SystemTokens + c.ToolTokens), clip(d.receipt.Content, 60)})
	}
	wall := lastEnd.Sub(firstStart)
	tab.Rows = append(tab.Rows, []string{"", "all three", fmt.Sprintf("%d (wall clock; %d added up)", wall.Milliseconds(), sum.Milliseconds()),
		"", "", itoa(prefixes), ""})
	tab.Article = &ArticleTable{
		Columns: []string{"pattern", "structure", "use it for", "the point"},
		Rows: [][]string{{"fan-out", "the same job sent to N explorers, each in its own context", "research in several directions, wide searches",
			"only summaries come back; the main agent merges them"}},
	}
	tab.Note = "The article states the pattern without a measurement; the timings are our scripted delays, the prefix cost is ours."

	alone, merged := fanOutAlone(v, ds, tasks), fanOutMerged(v, main.ID, ds)
	callOrder := []string{ds[0].child.ID, ds[1].child.ID, ds[2].child.ID}
	tab.Checks = append(tab.Checks,
		check("the three ran at the same time", latestStart.Before(earliestEnd),
			"the last started before the first finished; wall clock %d ms against %d ms added up", wall.Milliseconds(), sum.Milliseconds()),
		check("the wall clock is about the longest child, not the sum", wall < sum*2/3, "%d ms against %d ms", wall.Milliseconds(), sum.Milliseconds()),
		check("they finished in a different order than they were sent", !slices.Equal(finished, callOrder),
			"finished: %s", strings.Join(finished, ", ")),
		check("their receipts came back in call order", slices.Equal(receiptOrder, callOrder), "receipts: %s", strings.Join(receiptOrder, ", ")),
		check("each researcher's context holds only its own task: they never learn of each other", alone, "one message each, no other task in it"),
		check("each child pays its own prompt prefix (system prompt and tools): three children, three prefixes", prefixes == 3*prefix0 && prefix0 > 0,
			"%d tokens each, %d for the three", prefix0, prefixes),
		check("the parent's synthesis call holds all three receipts", merged, "the parent's last call"),
	)
	tab.Versus = []Versus{
		{What: "structure", Article: tab.Article.Rows[0][1], Ours: fmt.Sprintf("%d researchers sent in one message, each in a context of its own", len(ds)),
			Why: "the article states the pattern; the run follows it"},
		{What: "what comes back", Article: tab.Article.Rows[0][3], Ours: "one receipt each, in call order; the parent's last call holds all three",
			Why: "the same: only the conclusions reach the parent"},
		{What: "the cost (Article 3, §4)", Article: "N children ≈ N prompt prefixes", Ours: fmt.Sprintf("%d children, %d prefixes of %d tokens: %d", len(ds), len(ds), prefix0, prefixes),
			Why: "each child pays its own system prompt and tool definitions"},
	}
	return tab, nil
}

// fanOutOrders are the children in finish order, from agent.finished, and
// in receipt order, from the parent's list.
func fanOutOrders(v *view, mainID string, ds []*delegationRun) (finished, receiptOrder []string) {
	for _, ev := range v.t.Events {
		if ev.Type == delegation.EventAgentFinished && ev.AgentID != mainID {
			finished = append(finished, ev.AgentID)
		}
	}
	for _, m := range v.list(mainID) {
		if m.Kind == string(delegation.KindReceipt) {
			for _, d := range ds {
				if m.ID == d.receipt.ID {
					receiptOrder = append(receiptOrder, d.child.ID)
				}
			}
		}
	}
	return finished, receiptOrder
}

// fanOutAlone: each researcher's context holds only its own task.
func fanOutAlone(v *view, ds []*delegationRun, tasks []string) bool {
	alone := true
	for i, d := range ds {
		c, _ := v.firstCall(d.child.ID)
		for j := range ds {
			if j != i && v.occurrences(c, tasks[j]) > 0 {
				alone = false
			}
		}
		alone = alone && len(v.context(c)) == 1
	}
	return alone
}

// fanOutMerged: the parent's last call holds every receipt.
func fanOutMerged(v *view, mainID string, ds []*delegationRun) bool {
	synthesis := v.turns(mainID)
	merged := len(synthesis) > 0
	if merged {
		last := synthesis[len(synthesis)-1]
		for _, d := range ds {
			merged = merged && v.occurrences(last, d.receipt.Content) > 0
		}
	}
	return merged
}

func taskOf(c trace.ToolCall) string {
	var a struct{ Description string }
	_ = json.Unmarshal(c.Args, &a)
	return a.Description
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	case 0:
		return "–"
	}
	return itoa(n) + "th"
}
