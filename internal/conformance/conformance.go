// Package conformance says where two sessions' model calls received
// different things.
package conformance

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// Report says, call by call, where what two sessions' model calls
// received differs: the same scenario run by our engine and by a real
// framework through the recording endpoint (the conformance view), or any
// two runs. Agents are matched by name and invocation (the n-th start of a
// subagent type), calls by their place in their agent's run.
type Report struct {
	Calls []CallDiff // the matched calls: agent by agent in the first session's order, each agent's in its order
	// OnlyA and OnlyB are the calls one session made and the other did not.
	OnlyA, OnlyB []CallRef
	// Same counts the matched calls that received the same.
	Same int
	// Skipped says why the calls were not compared, when they were not.
	Skipped string
}

// CallRef is one model call, named for a person.
type CallRef struct {
	Agent string // "main", or the subagent type, with "#n" past its first invocation
	Index int    // its place in its agent's run, from 0
	ID    string
}

// CallDiff is what differs between two matched calls.
type CallDiff struct {
	Agent        string
	Index        int
	A, B         string // the calls' ids
	TokensA      int    // what each received, counted alike
	TokensB      int
	Differences  []Difference // those first seen in this call
	Repeated     int          // and those already listed for an earlier call
	AllDiffering int          // Differences and Repeated together
}

// Difference is one thing two calls received differently.
type Difference struct {
	What string // "system prompt", "tools", "tool definitions", "message 3", "messages"
	A, B string // each side's, for a person: an excerpt from where they part
}

// excerptLen bounds what a Difference quotes of each side.
const excerptLen = 240

// Compare finds where what a's and b's calls received differs. Tool-call
// ids are not compared: each side makes its own. A tool's definition is
// compared by its size (the trace keeps the tokens, not the text).
func Compare(a, b *trace.Trace) Report {
	ca, cb := callsByAgent(a), callsByAgent(b)
	la, lb := trace.Lists(a), trace.Lists(b)
	var out Report
	seen := map[Difference]bool{}
	matched := map[string]bool{}
	for _, ref := range ca.order {
		x := ca.calls[ref]
		y, ok := cb.calls[ref]
		if !ok {
			out.OnlyA = append(out.OnlyA, CallRef{Agent: ref.label, Index: ref.index, ID: x.ID})
			continue
		}
		matched[y.ID] = true
		d := CallDiff{Agent: ref.label, Index: ref.index, A: x.ID, B: y.ID, TokensA: x.InputTokens, TokensB: y.InputTokens}
		for _, diff := range callDifferences(x, y, trace.ContextOf(la, x), trace.ContextOf(lb, y)) {
			if seen[diff] {
				d.Repeated++
			} else {
				seen[diff] = true
				d.Differences = append(d.Differences, diff)
			}
		}
		d.AllDiffering = len(d.Differences) + d.Repeated
		if d.AllDiffering == 0 {
			out.Same++
		}
		out.Calls = append(out.Calls, d)
	}
	for _, ref := range cb.order {
		if y := cb.calls[ref]; !matched[y.ID] {
			out.OnlyB = append(out.OnlyB, CallRef{Agent: ref.label, Index: ref.index, ID: y.ID})
		}
	}
	return out
}

// callKey names a call the same way in both sessions.
type callKey struct {
	label string
	index int
}

type agentCalls struct {
	order []callKey
	calls map[callKey]trace.ModelCall
}

func callsByAgent(t *trace.Trace) agentCalls {
	labels := map[string]string{}
	for _, a := range t.Agents {
		label := a.Name
		switch {
		case a.ParentID == nil:
			label = "main"
		case a.TaskCallID == nil:
			label = a.Name + " (" + a.ID + ", unattached)"
		case a.Invocation > 0:
			label = fmt.Sprintf("%s #%d", a.Name, a.Invocation)
		}
		labels[a.ID] = label
	}
	out := agentCalls{calls: map[callKey]trace.ModelCall{}}
	// Agent by agent: parallel children's calls interleave differently on
	// every run.
	calls := append([]trace.ModelCall(nil), t.ModelCalls...)
	rank := map[string]int{}
	for i, a := range t.Agents {
		rank[a.ID] = i
	}
	sort.SliceStable(calls, func(i, j int) bool { return rank[calls[i].AgentID] < rank[calls[j].AgentID] })
	for _, c := range calls {
		if c.Purpose != "" && c.Purpose != string(delegation.PurposeTurn) {
			continue // a summary is asked for by the engine, not received by the agent
		}
		k := callKey{labels[c.AgentID], c.Index}
		if _, dup := out.calls[k]; dup {
			continue
		}
		out.order = append(out.order, k)
		out.calls[k] = c
	}
	return out
}

func callDifferences(x, y trace.ModelCall, mx, my []trace.Message) []Difference {
	var out []Difference
	if x.SystemPrompt != y.SystemPrompt {
		a, b := parting(x.SystemPrompt, y.SystemPrompt)
		out = append(out, Difference{What: "system prompt", A: a, B: b})
	}
	if na, nb := toolNames(x.Tools), toolNames(y.Tools); na != nb {
		out = append(out, Difference{What: "tools", A: na, B: nb})
	} else {
		// One difference for the definitions whose sizes differ: an agent's
		// tools are the same at every call, and one line reads better
		// than eight.
		var sa, sb []string
		for i, t := range x.Tools {
			if u := y.Tools[i]; t.Tokens != u.Tokens {
				sa = append(sa, fmt.Sprintf("%s %d", t.Name, t.Tokens))
				sb = append(sb, fmt.Sprintf("%s %d", u.Name, u.Tokens))
			}
		}
		if len(sa) > 0 {
			out = append(out, Difference{What: "tool definitions", A: strings.Join(sa, " · ") + " tokens", B: strings.Join(sb, " · ") + " tokens"})
		}
	}
	if len(mx) != len(my) {
		out = append(out, Difference{What: "messages", A: fmt.Sprintf("%d messages", len(mx)), B: fmt.Sprintf("%d messages", len(my))})
	}
	for i := 0; i < max(len(mx), len(my)); i++ {
		var a, b string
		if i < len(mx) {
			a = received(mx[i])
		}
		if i < len(my) {
			b = received(my[i])
		}
		if a == b {
			continue
		}
		ea, eb := parting(a, b)
		if i >= len(mx) {
			ea = "(none)"
		}
		if i >= len(my) {
			eb = "(none)"
		}
		out = append(out, Difference{What: fmt.Sprintf("message %d", i+1), A: ea, B: eb})
	}
	return out
}

func toolNames(tools []trace.ToolCost) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// received is a message as its model reads it: role, text, the tools it
// calls with their arguments (as JSON values), without ids.
func received(m trace.Message) string {
	var b strings.Builder
	b.WriteString(m.Role)
	b.WriteString(": ")
	b.WriteString(m.Content)
	for _, c := range m.ToolCalls {
		b.WriteString(" → ")
		b.WriteString(c.Name)
		b.WriteString(" ")
		b.WriteString(canonicalJSON(c.Args))
	}
	return b.String()
}

func canonicalJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// parting quotes two texts from a little before where they part, so the
// difference shows even in long ones.
func parting(a, b string) (string, string) {
	ra, rb := []rune(a), []rune(b)
	p := 0
	for p < len(ra) && p < len(rb) && ra[p] == rb[p] {
		p++
	}
	from := max(0, p-40)
	cut := func(r []rune) string {
		s := string(r[from:])
		if from > 0 {
			s = "…" + s
		}
		return view.Excerpt(s, excerptLen)
	}
	return cut(ra), cut(rb)
}
