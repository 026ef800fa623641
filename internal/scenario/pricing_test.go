package scenario

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestPricing(t *testing.T) {
	doc := `{"name": "s", "prompt": "p", "script": {"main": [{"content": "ok"}]},
		"pricing": {"input": 2.5, "cached_input": 1.25, "output": 10},
		"subagents": [{"name": "a", "description": "d", "pricing": "gpt-4.1-mini"},
		              {"name": "b", "description": "d", "pricing": {"input": 1, "output": 4}},
		              {"name": "c", "description": "d", "pricing": {"input": 3, "cached_input": 0.3, "cache_write": 3.75, "output": 15}},
		              {"name": "d", "description": "d", "pricing": "claude-sonnet-4"}]}`
	sc, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the scenario's pricing is the team's", func(t *testing.T) {
		p := sc.Team.Main.Pricing
		if p == nil || p.Input != 2.5 || p.CachedInput != 1.25 || p.Output != 10 || p.Source != "scenario" {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("a subagent's pricing may name a model of the table", func(t *testing.T) {
		p := sc.Team.Subagent("a").Pricing
		if p == nil || p.Model != "gpt-4.1-mini" || p.Input != 0.4 || !strings.Contains(p.Source, "table") {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("cached input defaults to the input price", func(t *testing.T) {
		p := sc.Team.Subagent("b").Pricing
		if p == nil || p.CachedInput != 1 {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("a cache-write price prices the cache writes", func(t *testing.T) {
		p := sc.Team.Subagent("c").Pricing
		if p == nil || p.CacheWrite != 3.75 {
			t.Fatalf("%+v", p)
		}
		// 1,000 input tokens, 200 read from the cache, 500 written to it.
		if c := p.Of(1000, 200, 500, 0, "usage"); math.Abs(c.CacheWrite-500*3.75/1e6) > 1e-12 || math.Abs(c.Input-300*3.0/1e6) > 1e-12 {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("cache writes default to the input price, or the table's", func(t *testing.T) {
		if p := sc.Team.Subagent("b").Pricing; p == nil || p.CacheWrite != 0 || p.Of(1000, 0, 500, 0, "usage").Input != 1000*1.0/1e6 {
			t.Fatalf("%+v: cache writes absent cost the input price", p)
		}
		if p := sc.Team.Subagent("d").Pricing; p == nil || p.CacheWrite != 3.75 {
			t.Fatalf("%+v: a table model has the table's cache-write price", p)
		}
	})
	t.Run("it keeps its form through a rewrite", func(t *testing.T) {
		b, _ := json.Marshal(sc.File)
		if !strings.Contains(string(b), `"pricing":"gpt-4.1-mini"`) || !strings.Contains(string(b), `"pricing":{"input":2.5,"cached_input":1.25,"output":10}`) ||
			!strings.Contains(string(b), `"cache_write":3.75`) {
			t.Fatalf("%s", b)
		}
	})
	for name, c := range map[string]struct{ doc, field, says string }{
		"an unknown table model": {`{"name": "s", "prompt": "p", "script": {"main": [{"content": "ok"}]}, "pricing": "gpt-9"}`,
			"pricing", `has no model "gpt-9"`},
		"a negative price": {`{"name": "s", "prompt": "p", "script": {"main": [{"content": "ok"}]}, "subagents": [{"name": "a", "description": "d", "pricing": {"input": -1, "output": 1}}]}`,
			"subagents[0].pricing", ""},
		"a cache-write price of nothing": {`{"name": "s", "prompt": "p", "script": {"main": [{"content": "ok"}]}, "pricing": {"input": 1, "cache_write": 0, "output": 1}}`,
			"pricing.cache_write", "greater than 0"},
		"a price without output": {`{"name": "s", "prompt": "p", "script": {"main": [{"content": "ok"}]}, "pricing": {"input": 1}}`,
			"pricing", ""},
	} {
		t.Run(name+" is an error at its field", func(t *testing.T) {
			_, err := Parse([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err = %v; want one at %s saying %q", err, c.field, c.says)
			}
		})
	}
}
