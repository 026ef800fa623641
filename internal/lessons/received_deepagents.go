package lessons

import (
	"fmt"
	"slices"
	"strings"

	"github.com/delegationstudio/studio/internal/trace"
)

// receivedDeepagents puts our engine beside deepagents itself: the same
// delegation scripted for our engine, and a real deepagents JS run traced
// with OpenInference, as the studio received it over OTLP (the recording in
// recorded/, made by e2e/otlp/deepagents.mjs, so the lesson runs offline).
var receivedDeepagents = lessonDef{
	name:    "received-deepagents",
	title:   "A real deepagents run, received",
	article: "Ours: the engine against deepagents JS 1.14.1",
	description: "Ours: the delegation of e2e/otlp/deepagents.mjs, run by our engine and by deepagents JS itself, " +
		"traced with OpenInference and received over OTLP. Both trees have an isolated general-purpose child that sees only its " +
		"task and a fork that starts from the parent's history, where the order number is; compare them side by side to see " +
		"what differs: the system prompts and tool definitions each framework sends, and what each call cost.",
	variants: []variantDef{
		{name: "received-deepagents", label: "our engine runs the scenario"},
		{name: "deepagents", label: "deepagents JS 1.14.1, traced with OpenInference, received over OTLP"},
	},
	recorded: map[string]string{"deepagents": "received-deepagents.otlp.json"},
	table:    receivedDeepagentsTable,
}

func receivedDeepagentsTable(r runs) (Table, error) {
	const order = "A-7731"
	type side struct {
		agents               []string
		isoMsgs, forkMsgs    int
		forkInherited        int
		isoSees, forkSees    int
		isoReceipt, forkRcpt string
		files                []string
		forkWhole            bool
	}
	read := func(name string) (side, error) {
		v := r.view(name)
		var s side
		for _, a := range v.t.Agents {
			mode := "main"
			if a.Mode != nil {
				mode = *a.Mode
			}
			s.agents = append(s.agents, a.Name+" ("+mode+")")
		}
		iso, err := oneChild(v, "general-purpose")
		if err != nil {
			return s, err
		}
		fork, err := oneChild(v, "forker")
		if err != nil {
			return s, err
		}
		ic, err := v.firstCall(iso.child.ID)
		if err != nil {
			return s, err
		}
		fc, err := v.firstCall(fork.child.ID)
		if err != nil {
			return s, err
		}
		s.isoMsgs, s.forkMsgs = len(v.context(ic)), len(v.context(fc))
		for _, m := range v.context(fc) {
			if m.AgentID != fork.child.ID {
				s.forkInherited++
			}
		}
		ctx := v.context(fc)
		s.forkWhole = s.forkInherited > 0 && strings.HasSuffix(ctx[len(ctx)-1].Content, fork.task)
		s.isoSees, s.forkSees = v.occurrences(ic, order), v.occurrences(fc, order)
		s.isoReceipt, s.forkRcpt = iso.receipt.Content, fork.receipt.Content
		s.files = trace.SortedPaths(v.t.Files)
		return s, nil
	}
	eng, err := read("received-deepagents")
	if err != nil {
		return Table{}, fmt.Errorf("our engine's run: %w", err)
	}
	da, err := read("deepagents")
	if err != nil {
		return Table{}, fmt.Errorf("the deepagents run: %w", err)
	}
	tab := Table{
		Title:   "The same delegation, from our engine and from deepagents",
		Columns: []string{"", "our engine", "deepagents (received)"},
		Rows: [][]string{
			{"agents", strings.Join(eng.agents, ", "), strings.Join(da.agents, ", ")},
			{"the isolated child's first context", plural(eng.isoMsgs, "message"), plural(da.isoMsgs, "message")},
			{"the fork's first context", fmt.Sprintf("%s, %d inherited", plural(eng.forkMsgs, "message"), eng.forkInherited),
				fmt.Sprintf("%s, %d inherited", plural(da.forkMsgs, "message"), da.forkInherited)},
			{order + " seen by the isolated child / the fork", fmt.Sprintf("%d / %d", eng.isoSees, eng.forkSees), fmt.Sprintf("%d / %d", da.isoSees, da.forkSees)},
			{"the isolated child's receipt", eng.isoReceipt, da.isoReceipt},
			{"the fork's receipt", eng.forkRcpt, da.forkRcpt},
			{"the main agent's files at the end", strings.Join(eng.files, ", "), strings.Join(da.files, ", ")},
		},
		Note: "The structure is the same; the sizes are not: each framework sends its own system prompts and tool definitions " +
			"(the fake model of the recording received none), which compare shows call by call.",
	}
	// deepagents' own run stands where the other lessons have the article.
	for _, row := range tab.Rows {
		tab.Versus = append(tab.Versus, Versus{What: row[0], Article: row[2], Ours: row[1],
			Why: "the same delegation: deepagents JS as received over OTLP, beside our engine's run of the same script"})
	}
	tab.Checks = append(tab.Checks,
		check("both runs have the same three agents in the same modes", slices.Equal(eng.agents, da.agents),
			"%v and %v", eng.agents, da.agents),
		check("in both, the isolated child starts from its task alone", eng.isoMsgs == 1 && da.isoMsgs == 1,
			"%d and %d messages", eng.isoMsgs, da.isoMsgs),
		check("in both, the fork starts from the parent's history, then its task", eng.forkWhole && da.forkWhole,
			"%d and %d messages inherited", eng.forkInherited, da.forkInherited),
		check("in both, only the fork sees the order number and reports it",
			eng.isoSees == 0 && da.isoSees == 0 && eng.forkSees > 0 && da.forkSees > 0 && eng.forkRcpt == order && da.forkRcpt == order,
			"engine %q, deepagents %q", eng.forkRcpt, da.forkRcpt),
		check("the same receipts and the same files come back", eng.isoReceipt == da.isoReceipt && slices.Equal(eng.files, da.files),
			"files %v and %v", eng.files, da.files),
	)
	return tab, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
