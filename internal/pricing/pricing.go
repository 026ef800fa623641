// Package pricing is the studio's price table: what common models charge
// per million tokens of input, cached input and output (and, for
// Anthropic's, input written to the cache), as their providers
// published it on one date. It is embedded in the binary and never fetched:
// prices change, so the table says its date, every priced agent records
// the price it ran at, and a scenario's "pricing" overrides it.
package pricing

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
)

//go:embed prices.json
var pricesJSON []byte

// Entry is one model's prices, in dollars per million tokens.
type Entry struct {
	Provider    string  `json:"provider"`
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Table is the embedded price table.
type Table struct {
	AsOf    string            `json:"as_of"`
	Unit    string            `json:"unit"`
	About   string            `json:"about"`
	Models  map[string]Entry  `json:"models"`
	Aliases map[string]string `json:"aliases"`
}

// table is parsed on first use: a process that prices nothing (validate,
// sessions, --version) pays nothing for it.
var table = sync.OnceValue(func() *Table { return mustLoad(pricesJSON) })

func mustLoad(b []byte) *Table {
	t, err := load(b)
	if err != nil {
		panic(fmt.Sprintf("pricing: the embedded table: %v", err)) // caught by the package's tests
	}
	return t
}

func load(b []byte) (*Table, error) {
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, err
	}
	if t.AsOf == "" {
		return nil, fmt.Errorf("the table has no date (as_of)")
	}
	for name, e := range t.Models {
		if e.Input < 0 || e.CachedInput < 0 || e.Output < 0 || e.CachedInput > e.Input {
			return nil, fmt.Errorf("model %s: prices must be at least 0, and cached input at most input", name)
		}
		if name != strings.ToLower(name) {
			return nil, fmt.Errorf("model %s: names are lower case", name)
		}
	}
	for alias, name := range t.Aliases {
		if _, ok := t.Models[name]; !ok {
			return nil, fmt.Errorf("alias %s names no model (%s)", alias, name)
		}
	}
	return &t, nil
}

// Default returns the embedded table.
func Default() *Table { return table() }

// AsOf is the date the embedded table's prices were published on.
func AsOf() string { return table().AsOf }

// Lookup finds a model's price in the embedded table (see Table.Lookup).
func Lookup(model string) (delegation.Price, bool) { return table().Lookup(model) }

// version is what may follow a model's name in the names providers and
// routers give it: a date (gpt-4.1-2025-04-14, claude-sonnet-4-20250514,
// @20250514 on Vertex), "latest", or a preview tag.
var version = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([-@](\d{4}-\d{2}-\d{2}|\d{8}|latest|preview(-\d{2}-\d{2})?|\d{2}-\d{2}))$`)
})

// Lookup finds a model's price: by its name as given, with a provider's
// or router's prefix left out (openai/gpt-4.1-mini), and with a date or
// "latest" after the name (gpt-4.1-mini-2025-04-14). Names are compared in
// lower case. ok is false for a model the table does not know.
func (t *Table) Lookup(model string) (delegation.Price, bool) {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return delegation.Price{}, false
	}
	if a, ok := t.Aliases[name]; ok {
		name = a
	}
	if e, ok := t.Models[name]; ok {
		return t.price(name, e), true
	}
	// The longest known name the model's name starts with, followed by a
	// version: gpt-4o-mini-2024-07-18 is gpt-4o-mini, not gpt-4o.
	best := ""
	for known := range t.Models {
		if len(known) > len(best) && strings.HasPrefix(name, known) && version().MatchString(name[len(known):]) {
			best = known
		}
	}
	if best == "" {
		return delegation.Price{}, false
	}
	return t.price(best, t.Models[best]), true
}

// AnthropicCacheWrite is what Anthropic charges to write its prompt cache
// (5-minute TTL, the one the studio's requests ask for), times the input
// price.
const AnthropicCacheWrite = 1.25

func (t *Table) price(name string, e Entry) delegation.Price {
	p := delegation.Price{Input: e.Input, CachedInput: e.CachedInput, Output: e.Output, Model: name, Source: "table " + t.AsOf}
	if e.Provider == "anthropic" {
		p.CacheWrite = e.Input * AnthropicCacheWrite
	}
	return p
}

// Names lists the table's models, in order.
func (t *Table) Names() []string {
	out := make([]string, 0, len(t.Models))
	for n := range t.Models {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

var _ delegation.PriceTable = Lookup
