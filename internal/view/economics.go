package view

import (
	"fmt"
	"math"
	"slices"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Economics is what an agent's calls cost: tokens served from a prompt
// cache (the studio's estimate, and the endpoint's own figure where it
// reported one) and dollars at its price.
type Economics struct {
	// Model and Price are what its calls were priced at; Price is nil when
	// it has none.
	Model string
	Price *delegation.Price
	// CachedTokens is its calls' cached prefixes summed; EntryCached its
	// first call's.
	CachedTokens, EntryCached int
	// ReportedCalls are its calls whose endpoint reported its cache; of those,
	// ReportedCached is the cached tokens the endpoint reported and
	// EstimatedCached the studio's cached prefix, for the difference.
	ReportedCalls                   int
	ReportedCached, EstimatedCached int
	// ReportedWritten is the tokens its endpoint reported writing to its
	// cache (Anthropic's cache creation), over all its calls; their cost
	// is Cost.CacheWrite.
	ReportedWritten int
	// OutputTokens are its calls' output tokens (the endpoint's, where it
	// reported them).
	OutputTokens int
	// Cost is what its priced calls cost.
	Cost Money
	// WorkTokens are the tokens of its own messages after its opening one:
	// for a child, what its delegation kept out of the parent's context.
	WorkTokens int
	// Evicted is what eviction kept out of its calls (delegation.md §12).
	Evicted Evicted
}

// Evicted counts an agent's texts that were too big for the model and went
// to files (delegation.md §12): how many of its own messages, their tokens
// and those of the pointers that stand in for them; and, over its calls,
// how many read a pointer (its own or one it inherited) and the tokens they
// did not read for it.
type Evicted struct {
	Messages              int
	Tokens, PointerTokens int
	Calls, Saved          int
}

// EvictedRef is one of an agent's evicted messages: its place, the
// original's tokens and what its pointer saves each call that reads it.
type EvictedRef struct {
	Index, Tokens, Saved int
}

// ReceiptEvicted is what eviction kept out of the parent when a
// delegation's receipt was too big for its model and went to a file
// (delegation.md §12): the receipt's tokens and its pointer's, and over the
// parent's later calls that read the pointer (d.LaterCalls), the tokens
// they did not read. ok is false when the receipt stayed whole or is not in.
func (s *State) ReceiptEvicted(d *Delegation) (e Evicted, ok bool) {
	r := d.Receipt
	if r == nil || s.agents[r.AgentID] == nil {
		return e, false
	}
	for _, x := range s.agents[r.AgentID].EvictedRefs {
		if x.Index == r.Index {
			return Evicted{Messages: 1, Tokens: x.Tokens, PointerTokens: r.Tokens, Calls: d.LaterCalls, Saved: x.Saved * d.LaterCalls}, true
		}
	}
	return e, false
}

// evictionsRead adds a turn's reading of evicted messages: its own and
// those of the ancestors its context holds (a fork's inherited history).
func (s *State) evictionsRead(a *Agent, context []delegation.Range) {
	saved := 0
	for x := a; x != nil; x = s.agents[x.ParentID] {
		for _, e := range x.EvictedRefs {
			if covers(context, x.ID, e.Index) {
				saved += e.Saved
			}
		}
	}
	if saved > 0 {
		a.Evicted.Calls++
		a.Evicted.Saved += saved
	}
}

// Money is a sum of costs: dollars, and over how many priced calls.
type Money struct {
	delegation.Cost
	Calls int
}

func (m Money) add(c delegation.Cost) Money {
	return Money{Cost: m.Cost.Add(c), Calls: m.Calls + 1}
}

// Plus sums two sums.
func (m Money) Plus(o Money) Money {
	return Money{Cost: m.Cost.Add(o.Cost), Calls: m.Calls + o.Calls}
}

// Priced reports whether any call was priced.
func (m Money) Priced() bool { return m.Calls > 0 }

// finished adds a finished call: its cost, output and what its endpoint
// reported of the cache beside the studio's estimate (cached).
func (e *Economics) finished(cached int, d delegation.ModelFinished) {
	out := d.OutputTokens
	if u := d.Usage; u != nil {
		if u.CacheReported() {
			e.ReportedCalls++
			e.ReportedCached += u.CachedTokens
			e.EstimatedCached += cached
		}
		e.ReportedWritten += u.CacheCreationTokens
		out = u.CompletionTokens
	}
	e.OutputTokens += out
	if d.Cost != nil {
		e.Cost = e.Cost.add(*d.Cost)
	}
}

// Saving is what a delegation's receipt saved its parent: had the parent
// done the child's work itself, each of its later calls (LaterCalls) would
// have carried the child's work tokens instead of the receipt's. Tokens
// counts them over those calls; Cost prices them at the parent's cached
// input price, as a warm prompt cache would have billed them (the least they
// would have cost), when the parent has a price.
type Saving struct {
	PerCall, Tokens int
	Cost            float64
	Priced          bool
}

// Saving is d's saving (see Saving).
func (s *State) Saving(d *Delegation) Saving {
	child, parent := s.agents[d.ChildID], s.agents[d.ParentID]
	if child == nil || d.Receipt == nil {
		return Saving{}
	}
	sv := Saving{PerCall: max(0, child.WorkTokens-d.Receipt.Tokens)}
	sv.Tokens = sv.PerCall * d.LaterCalls
	if parent != nil && parent.Price != nil {
		sv.Cost, sv.Priced = float64(sv.Tokens)*parent.Price.CachedInput/1e6, true
	}
	return sv
}

// Dollars writes an amount of dollars as a person reads it: cents from a
// dollar up, three significant digits below a cent ($0.00104), "$0" for
// nothing.
func Dollars(x float64) string {
	switch {
	case x == 0:
		return "$0"
	case math.Abs(x) >= 1:
		return fmt.Sprintf("$%.2f", x)
	}
	decimals := min(max(2-int(math.Floor(math.Log10(math.Abs(x)))), 2), 9)
	return fmt.Sprintf("$%.*f", decimals, x)
}

// Prefix says whose prompt prefix a child's first call began with:
// "parent" for a fork with its parent's tools and system prompt,
// "own-tools" or "own-system" for a fork that changed one of them, "own"
// for an isolated child; "" for the main agent.
func (s *State) Prefix(a *Agent) string {
	p := s.agents[a.ParentID]
	switch {
	case p == nil:
		return ""
	case a.Mode != string(delegation.ModeFork):
		return "own"
	case !slices.Equal(a.Tools, p.Tools):
		return "own-tools"
	case a.SystemPrompt != p.SystemPrompt:
		return "own-system"
	}
	return "parent"
}

// Subtree sums an agent's calls and its descendants': input tokens, cached
// prefixes and cost. It costs O(agents).
func (s *State) Subtree(id string) (tokens, cached int, cost Money) {
	for _, a := range s.Agents {
		for x := a; x != nil; x = s.agents[x.ParentID] {
			if x.ID == id {
				tokens += a.OwnTokens
				cached += a.CachedTokens
				cost = cost.Plus(a.Cost)
				break
			}
		}
	}
	return tokens, cached, cost
}

// economicsChanged says that what an agent's calls cost changed: the
// "came back" of its delegation, and of each ancestor's, shows its
// subtree's once the receipt is in.
func (s *State) economicsChanged(a *Agent, ch *Changes) {
	for x := a; x != nil && x.ParentID != ""; x = s.agents[x.ParentID] {
		if d := s.byChild[x.ID]; d != nil && d.Receipt != nil {
			ch.crossing(x.ID)
		}
	}
}
