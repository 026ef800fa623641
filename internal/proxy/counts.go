package proxy

import (
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
)

// counts is the Counter the recorded sessions count with: it counts with
// the configured one, but a big text a request in flight has counted
// already (warm) is answered from memory. A request's texts are counted
// before the endpoint takes its lock, where choosing a session and
// starting the call there must happen as one step: tokenizing megabytes
// there held up every other recording call.
type counts struct {
	base delegation.Counter
	mu   sync.Mutex
	memo map[string]*counted
}

type counted struct {
	n, refs int
}

// warmMin is the shortest text worth remembering: shorter ones are counted
// again in microseconds.
const warmMin = 4 << 10

func newCounts(base delegation.Counter) *counts {
	return &counts{base: base, memo: map[string]*counted{}}
}

// Count is the base counter's count of text.
func (c *counts) Count(text string) int {
	if len(text) >= warmMin {
		c.mu.Lock()
		e := c.memo[text]
		c.mu.Unlock()
		if e != nil {
			return e.n
		}
	}
	return c.base.Count(text)
}

// warm counts a call's big texts — its system prompt, its messages, their
// tool calls and the tool definitions, as delegation.MessageTokens and
// delegation.ToolTokens read them — and remembers them until release.
func (c *counts) warm(in ingest.CallInput) (release func()) {
	if c.base == nil {
		return func() {}
	}
	var texts []string
	add := func(s string) {
		if len(s) >= warmMin {
			texts = append(texts, s)
		}
	}
	add(in.System)
	for _, m := range in.Input {
		add(m.Content)
		for _, tc := range m.ToolCalls {
			add(tc.Name)
			add(string(tc.Args))
		}
	}
	for _, d := range in.Tools {
		add(delegation.ToolJSON(d))
	}
	for _, s := range texts {
		c.mu.Lock()
		e := c.memo[s]
		if e != nil {
			e.refs++
		}
		c.mu.Unlock()
		if e != nil {
			continue
		}
		n := c.base.Count(s)
		c.mu.Lock()
		if e = c.memo[s]; e != nil { // counted meanwhile by another request
			e.refs++
		} else {
			c.memo[s] = &counted{n: n, refs: 1}
		}
		c.mu.Unlock()
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range texts {
			if e := c.memo[s]; e != nil {
				if e.refs--; e.refs == 0 {
					delete(c.memo, s)
				}
			}
		}
	}
}
