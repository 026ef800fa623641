package lessons

import (
	"fmt"
	"slices"

	"github.com/delegationstudio/studio/internal/trace"
	pageview "github.com/delegationstudio/studio/internal/view"
)

var cacheAndCost = lessonDef{
	name:    "cache-and-cost",
	title:   "What a fan-out costs: prompt-cache prefixes, isolated or fork",
	article: "Article 3 (subagent patterns), §4",
	description: "Article 3 (subagent patterns), §4: every child carries a prompt prefix of its own, \"but the prefix is " +
		"stable and a cache can save it\". The same fan-out runs with isolated children, with fork children, and with " +
		"forks that declare their own tools, priced as gpt-4.1. Look at the entry of the children beside what a prompt " +
		"cache can serve of it: the fork reads the most, yet almost all of it is the parent's last request again; the " +
		"isolated child reads little and shares only the tools with its siblings; the fork with tools of its own reads " +
		"the parent's history without its prefix, so its first child pays for all of it.",
	variants: []variantDef{
		{name: "isolated", label: "Isolated children"},
		{name: "fork", label: "Fork children"},
		{name: "fork-own-tools", label: "Forks with tools of their own"},
	},
	table: cacheAndCostTable,
}

// fanOutCost is what one variant's children cost.
type fanOutCost struct {
	label                          string
	kids                           []trace.Agent
	entry, entryCached             int // their first calls, summed
	input, cached                  int // all their calls
	kidsCost, sessionCost          float64
	costIn, costCached, costOutput float64
	// firsts are each child's first call, in the order they started.
	firsts []trace.ModelCall
	// parentLast is the parent's call that sent the tasks.
	parentLast trace.ModelCall
}

func readFanOutCost(v *view, label string) (fanOutCost, error) {
	f := fanOutCost{label: label, kids: v.agents("reviewer")}
	if len(f.kids) != 3 {
		return f, fmt.Errorf("%s: want 3 reviewers, got %d", label, len(f.kids))
	}
	main, err := v.agent("main")
	if err != nil {
		return f, err
	}
	kid := map[string]bool{}
	for _, a := range f.kids {
		kid[a.ID] = true
	}
	for _, c := range v.t.ModelCalls {
		if c.Cost != nil {
			f.sessionCost += c.Cost.Total
		}
		if c.AgentID == main.ID && len(f.firsts) == 0 {
			f.parentLast = c // main's last call before its children's first
		}
		if !kid[c.AgentID] {
			continue
		}
		f.input += c.InputTokens
		f.cached += c.CachedPrefixTokens
		if c.Cost != nil {
			f.kidsCost += c.Cost.Total
			f.costIn += c.Cost.Input
			f.costCached += c.Cost.CachedInput
			f.costOutput += c.Cost.Output
		}
		if !slices.ContainsFunc(f.firsts, func(x trace.ModelCall) bool { return x.AgentID == c.AgentID }) {
			f.firsts = append(f.firsts, c)
			f.entry += c.InputTokens
			f.entryCached += c.CachedPrefixTokens
		}
	}
	return f, nil
}

// own is the tokens of a child's first call that are its own: its opening
// message.
func (v *view) own(c trace.ModelCall) int {
	n := 0
	for _, m := range v.context(c) {
		if m.AgentID == c.AgentID {
			n += m.Tokens
		}
	}
	return n
}

func cacheAndCostTable(r runs) (Table, error) {
	var fs []fanOutCost
	views := map[string]*view{}
	for _, x := range []struct{ name, label string }{
		{"isolated", "isolated"}, {"fork", "fork"}, {"fork-own-tools", "fork, own tools"},
	} {
		v := r.view(x.name)
		views[x.name] = v
		f, err := readFanOutCost(v, x.label)
		if err != nil {
			return Table{}, err
		}
		fs = append(fs, f)
	}
	iso, fork, own := fs[0], fs[1], fs[2]
	tab := Table{
		Title: "The same fan-out of reviewers, priced as gpt-4.1",
		Columns: []string{"children", "entry (tokens)", "cached at entry", "new at entry", "all their input",
			"all cached", "the children cost", "the session cost"},
	}
	for _, f := range fs {
		tab.Rows = append(tab.Rows, []string{f.label, itoa(f.entry), itoa(f.entryCached), itoa(f.entry - f.entryCached),
			itoa(f.input), itoa(f.cached), pageview.Dollars(f.kidsCost), pageview.Dollars(f.sessionCost)})
	}
	tab.Article = &ArticleTable{
		Columns: []string{"the article says", "of"},
		Rows: [][]string{
			{"3 个子 Agent ≈ 3 份前缀成本 (three children, about three prompt prefixes)", "Article 3, §4"},
			{"前缀稳定、缓存能救，但依然是开销 (the prefix is stable, a cache can save it, but it is still a cost)", "Article 3, §4"},
		},
	}
	tab.Note = "The cached figures are the studio's estimate: the longest prefix of each request that an earlier request " +
		"of the session had too, compared as a prompt cache reads it (tools, system prompt, messages). A real cache " +
		"serves at most that: it works in blocks, and siblings sent at the same moment may all miss; an endpoint's " +
		"own figure is recorded beside the estimate. Prices are the table's for gpt-4.1 (cached input at a quarter " +
		"of the input price), so what is cached still costs something."

	// Each fork child's entry is the parent's last request and its task.
	forkShares := true
	for _, c := range fork.firsts {
		forkShares = forkShares && c.CachedPrefixTokens == fork.parentLast.InputTokens &&
			c.InputTokens-c.CachedPrefixTokens == views["fork"].own(c)
	}
	// The isolated child that started first has nothing cached; the others
	// only what they send alike: tools and system prompt.
	isoShares := iso.firsts[0].CachedPrefixTokens == 0
	for _, c := range iso.firsts[1:] {
		isoShares = isoShares && c.CachedPrefixTokens == c.ToolTokens+c.SystemTokens
	}
	// The fork with its own tools: the first has nothing; the others the
	// first's request but their task, not the parent's.
	ownLoses := own.firsts[0].CachedPrefixTokens == 0
	for _, c := range own.firsts[1:] {
		ownLoses = ownLoses && c.CachedPrefixTokens == c.InputTokens-views["fork-own-tools"].own(c) &&
			c.CachedPrefixTokens < own.parentLast.InputTokens
	}
	newAt := func(f fanOutCost) int { return f.entry - f.entryCached }
	tab.Checks = append(tab.Checks,
		check("a fork's first call shares its parent's whole last request: all of its entry but its task is cached",
			forkShares, "each fork's entry has %d cached tokens, the parent's last request had %d", fork.firsts[0].CachedPrefixTokens, fork.parentLast.InputTokens),
		check("an isolated child shares nothing with its parent: the first to start has nothing cached, its siblings only the tools and system prompt they send too",
			isoShares, "cached at entry: %d, %d, %d", iso.firsts[0].CachedPrefixTokens, iso.firsts[1].CachedPrefixTokens, iso.firsts[2].CachedPrefixTokens),
		check("a fork with tools of its own loses the parent's prefix: the first to start has nothing cached, its siblings reuse its request, not the parent's",
			ownLoses, "cached at entry: %d, %d, %d", own.firsts[0].CachedPrefixTokens, own.firsts[1].CachedPrefixTokens, own.firsts[2].CachedPrefixTokens),
		check("the entry grows from isolated to fork with own tools to fork", iso.entry < own.entry && own.entry < fork.entry,
			"%d, %d and %d tokens", iso.entry, own.entry, fork.entry),
		check("what a cache can serve of it grows the same way", iso.entryCached < own.entryCached && own.entryCached < fork.entryCached,
			"%d, %d and %d tokens", iso.entryCached, own.entryCached, fork.entryCached),
		check("the new part of the entry, billed at the full price, is the fork's smallest and the fork with own tools' largest",
			newAt(fork) < newAt(iso) && newAt(iso) < newAt(own), "fork %d, isolated %d, fork with own tools %d tokens", newAt(fork), newAt(iso), newAt(own)),
		check("in dollars the isolated children cost least, the forks with tools of their own most",
			iso.kidsCost < fork.kidsCost && fork.kidsCost < own.kidsCost, "%s, %s and %s",
			pageview.Dollars(iso.kidsCost), pageview.Dollars(fork.kidsCost), pageview.Dollars(own.kidsCost)),
	)
	tab.Versus = []Versus{
		{What: "N children, N prefixes", Article: tab.Article.Rows[0][0],
			Ours: fmt.Sprintf("isolated: %d entry tokens for the children, %d of them cached", iso.entry, iso.entryCached),
			Why:  "each child sends its own tools and system prompt; after the first, its siblings' identical ones are served from the cache"},
		{What: "a cache can save it", Article: tab.Article.Rows[1][0],
			Ours: fmt.Sprintf("fork: %d entry tokens, %d cached; the children cost %s against %s isolated", fork.entry, fork.entryCached,
				pageview.Dollars(fork.kidsCost), pageview.Dollars(iso.kidsCost)),
			Why: "a fork's prefix is its parent's, byte for byte, so almost all of it is a cache hit; cached tokens are cheaper, not free"},
		{What: "a fork with its own tools (deepagents keeps the tools identical for this reason)", Article: "pays in cache misses",
			Ours: fmt.Sprintf("fork with own tools: the first child's %d entry tokens are all new; the children cost %s",
				own.firsts[0].InputTokens, pageview.Dollars(own.kidsCost)),
			Why: "the tool definitions come first in a cached prefix: changing them changes every position after them"},
	}
	tab.Chart = &BarChart{
		Title: "The children's entry, and what they cost",
		Groups: []BarGroup{
			{Title: "The children's first calls (tokens)", Unit: "tokens", Bars: barsOf(fs, func(f fanOutCost) []BarPart {
				return []BarPart{{Name: "cached", Value: float64(f.entryCached)}, {Name: "new", Value: float64(f.entry - f.entryCached)}}
			})},
			{Title: "What all the children's calls cost (dollars)", Unit: "dollars", Bars: barsOf(fs, func(f fanOutCost) []BarPart {
				return []BarPart{{Name: "cached input", Value: f.costCached}, {Name: "new input", Value: f.costIn}, {Name: "output", Value: f.costOutput}}
			})},
		},
	}
	return tab, nil
}

func barsOf(fs []fanOutCost, parts func(fanOutCost) []BarPart) []Bar {
	out := make([]Bar, len(fs))
	for i, f := range fs {
		out[i] = Bar{Label: f.label, Parts: parts(f)}
	}
	return out
}
