package lessons

import (
	"fmt"

	"github.com/delegationstudio/studio/internal/delegation"
)

var entryCost = lessonDef{
	name:    "entry-cost",
	title:   "The entry cost: the more the parent did, the more a fork reads",
	article: "Article 2 (isolated or fork), §4",
	description: "Article 2 (isolated or fork), §4: the same task sent to an isolated child and a fork child after " +
		"the parent did 1, 4 and 8 steps. Look at the first-call input of each child: the isolated column does not " +
		"move, the fork column grows by the same amount with every step the parent took — the fork's entry fee.",
	variants: []variantDef{
		{name: "1-step", label: "The parent did 1 step"},
		{name: "4-step", label: "4 steps"},
		{name: "8-step", label: "8 steps"},
	},
	table: entryCostTable,
	claims: []claim{
		{"did 1,", "1 step", "the parent did"},
		{", 4 and", "4 steps", "the parent did"},
		{"and 8 steps", "8 steps", "the parent did"},
	},
}

// entry is what starting each child cost after some steps of the parent.
type entry struct {
	steps                       int
	isoCtx, forkCtx             int // system prompt + messages
	isoInput, forkInput         int // everything, tool definitions included
	isoMsgs, forkMsgs, forkInhe int
	isoCounted, forkCounted     int    // system prompt + messages, counted as the article counts
	task, prompt                string // the task both children were given; the user's prompt
}

func readEntry(v *view, steps int) (entry, error) {
	e := entry{steps: steps, prompt: v.t.Session.Prompt}
	for _, name := range []string{"iso", "fork"} {
		a, err := v.agent(name)
		if err != nil {
			return e, err
		}
		c, err := v.firstCall(a.ID)
		if err != nil {
			return e, err
		}
		if name == "iso" {
			e.isoCtx, e.isoInput, e.isoMsgs, e.isoCounted = contextTokens(c), c.InputTokens, v.messageCount(c), v.articleTokens(c)
			if d, err := oneChild(v, name); err == nil {
				e.task = d.task
			}
		} else {
			e.forkCtx, e.forkInput, e.forkMsgs, e.forkInhe = contextTokens(c), c.InputTokens, v.messageCount(c), c.InheritedTokens
			e.forkCounted = v.articleTokens(c)
		}
	}
	return e, nil
}

func entryCostTable(r runs) (Table, error) {
	var es []entry
	for _, x := range []struct {
		name  string
		steps int
	}{{"1-step", 1}, {"4-step", 4}, {"8-step", 8}} {
		e, err := readEntry(r.view(x.name), x.steps)
		if err != nil {
			return Table{}, err
		}
		es = append(es, e)
	}
	tab := Table{
		Title: "Each child's first call, as the parent does more first",
		Columns: []string{"the parent did", "isolated (tokens)", "fork (tokens)", "difference",
			"isolated: whole input", "fork: whole input", "fork: messages", "fork: tokens a step since 1 step"},
	}
	one, four, eight := es[0], es[1], es[2]
	tab.Lines = entryLines(es)
	perStep := float64(eight.forkCtx-one.forkCtx) / 7
	for _, e := range es {
		growth := "–"
		if e.steps > 1 {
			growth = fmt.Sprintf("%.0f", float64(e.forkCtx-one.forkCtx)/float64(e.steps-1))
		}
		tab.Rows = append(tab.Rows, []string{stepsCell(e.steps), itoa(e.isoCtx), itoa(e.forkCtx),
			itoa(e.forkCtx - e.isoCtx), itoa(e.isoInput), itoa(e.forkInput), itoa(e.forkMsgs), growth})
	}
	tab.Article = &ArticleTable{
		Columns: []string{"the parent did", "isolated (tokens)", "fork (tokens)", "difference", "fork: tokens a step since 1 step"},
		Rows: [][]string{
			{"1 step", "12", "217", "205", "–"},
			{"4 steps", "12", "388", "376", "57"},
			{"8 steps", "12", "616", "604", "57"},
		},
	}
	tab.Note = fmt.Sprintf("Tokens here are the system prompt and the messages, as in the article (the whole input adds the tool "+
		"definitions); our steps and our task are our own, so the fork grows by %.0f tokens a step against the article's 57 or so: "+
		"the same shape, a flat isolated column and a fork column that grows by the same amount every step.", perStep)
	tab.Versus = versusByIndex(tab, "the same shape; the steps the parent takes are our own, so the sizes differ",
		"isolated (tokens)", "fork (tokens)", "fork: tokens a step since 1 step")
	// Counted as the article counts. The isolated column is the task and
	// an empty prompt: the article's 12 is its §2 task's. The fork column
	// is deepagents' preamble and the parent's steps, which are ours and
	// which the article does not print: the figures differ by our steps.
	stepCounted := (eight.forkCounted - one.forkCounted) / 7
	isoGap := fmt.Sprintf("our task %q is %d characters; the article's 12 is its task of §2, %q, %d characters: "+
		"counted the same way with an empty prompt, %d", one.task, chars(one.task), orderArticleTask, chars(orderArticleTask), articleTaskTokens())
	stepGap := fmt.Sprintf("the parent's steps are ours (each writes a note and reads its result), %d tokens a step counted as the article counts; "+
		"the article does not print its steps, which cost %d", stepCounted, 57)
	forkGap := fmt.Sprintf("the fork reads our prompt (%d characters), our task (%d) and our steps (%d tokens a step counted as the article counts); "+
		"the article prints neither its prompt nor its steps, which cost %d a step", chars(one.prompt), chars(one.task), stepCounted, 57)
	var figs []countedFigure
	for _, e := range es {
		what := stepsCell(e.steps)
		figs = append(figs, countedFigure{what + ": isolated (tokens)", e.isoCounted, 12, isoGap},
			countedFigure{what + ": fork (tokens)", e.forkCounted, map[int]int{1: 217, 4: 388, 8: 616}[e.steps], forkGap})
		if e.steps > 1 {
			figs = append(figs, countedFigure{what + ": fork: tokens a step since 1 step", (e.forkCounted - one.forkCounted) / (e.steps - 1), 57, stepGap})
		}
	}
	if err := tab.countAs(figs...); err != nil {
		return Table{}, err
	}
	tab.Checks = append(tab.Checks,
		check("the isolated child's entry cost is the same after 1, 4 and 8 steps",
			one.isoCtx == four.isoCtx && four.isoCtx == eight.isoCtx && one.isoInput == eight.isoInput,
			"%d, %d, %d tokens", one.isoCtx, four.isoCtx, eight.isoCtx),
		check("the fork's entry cost grows with every step",
			one.forkCtx < four.forkCtx && four.forkCtx < eight.forkCtx, "%d, %d, %d tokens", one.forkCtx, four.forkCtx, eight.forkCtx),
		check("it grows linearly: the same amount per step from 1 to 4 as from 4 to 8",
			(four.forkCtx-one.forkCtx)*4 == (eight.forkCtx-four.forkCtx)*3,
			"%d over 3 steps, %d over 4 steps: %.1f tokens a step", four.forkCtx-one.forkCtx, eight.forkCtx-four.forkCtx, perStep),
		check("the fork's growth is all inherited: the part of its opening that is its own stays the same",
			one.forkCtx-one.forkInhe == eight.forkCtx-eight.forkInhe, "own part: %d and %d tokens",
			one.forkCtx-one.forkInhe, eight.forkCtx-eight.forkInhe),
		check("the fork reads two more messages for every step (the call and its result)",
			four.forkMsgs-one.forkMsgs == 6 && eight.forkMsgs-four.forkMsgs == 8 && one.isoMsgs == 2 && eight.isoMsgs == 2,
			"fork: %d, %d, %d messages; isolated: %d", one.forkMsgs, four.forkMsgs, eight.forkMsgs, one.isoMsgs),
	)
	return tab, nil
}

// entryLines is the table's isolated and fork columns (system prompt and
// messages) against the parent's steps.
func entryLines(es []entry) *LineChart {
	iso, fork := LineSeries{Mode: delegation.ModeIsolated}, LineSeries{Mode: delegation.ModeFork}
	for _, e := range es {
		iso.Points = append(iso.Points, LinePoint{X: e.steps, Y: e.isoCtx})
		fork.Points = append(fork.Points, LinePoint{X: e.steps, Y: e.forkCtx})
	}
	return &LineChart{Series: []LineSeries{iso, fork}}
}

func stepsCell(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}
