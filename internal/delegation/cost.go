package delegation

// Price is what a model's tokens cost, in dollars per million tokens: new
// input, input read from the prompt cache, input written to it, and output.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	// CacheWrite is the price of the input tokens written to the prompt
	// cache (Anthropic's cache_creation_input_tokens, at 1.25 times the
	// input price for its 5-minute cache); 0 means the input price.
	CacheWrite float64 `json:"cache_write,omitempty"`
	Output     float64 `json:"output"`
	// Model is the price table's entry it was found under; "" for a price
	// a scenario gave.
	Model string `json:"model,omitempty"`
	// Source says where it came from: "scenario" (the scenario's pricing),
	// "subagent" (the subagent's own) or "table YYYY-MM-DD" (the studio's
	// price table of that date).
	Source string `json:"source,omitempty"`
}

// Cost bases: which token counts a call was priced on.
const (
	// BasisUsage: the counts the endpoint reported (prompt, cached,
	// completion tokens): what it bills.
	BasisUsage = "usage"
	// BasisEstimate: the studio's own counts, with its cached prefix as
	// the cached input: what a cache holding every earlier prefix bills.
	BasisEstimate = "estimate"
)

// Cost is what one model call cost, in dollars.
type Cost struct {
	Input       float64 `json:"input"`        // the input tokens not read from the cache
	CachedInput float64 `json:"cached_input"` // the input tokens read from the cache
	// CacheWrite: the input tokens written to the cache (in Input when
	// the price has no surcharge for them).
	CacheWrite float64 `json:"cache_write,omitempty"`
	Output     float64 `json:"output"`
	Total      float64 `json:"total"`
	Basis      string  `json:"basis"`
}

// Add sums two costs; the basis is kept when both share it, else "mixed".
func (c Cost) Add(o Cost) Cost {
	basis := c.Basis
	switch {
	case basis == "":
		basis = o.Basis
	case o.Basis != "" && o.Basis != basis:
		basis = "mixed"
	}
	return Cost{Input: c.Input + o.Input, CachedInput: c.CachedInput + o.CachedInput, CacheWrite: c.CacheWrite + o.CacheWrite,
		Output: c.Output + o.Output, Total: c.Total + o.Total, Basis: basis}
}

// Of prices tokens: input of which cached were read from the cache and
// written were written to it, and output. Written tokens cost CacheWrite
// where the price has one, else the input price.
func (p Price) Of(input, cached, written, output int, basis string) Cost {
	cached = min(max(cached, 0), input)
	written = min(max(written, 0), input-cached)
	if p.CacheWrite == 0 {
		written = 0 // new input like any other
	}
	c := Cost{
		Input:       float64(input-cached-written) * p.Input / 1e6,
		CachedInput: float64(cached) * p.CachedInput / 1e6,
		CacheWrite:  float64(written) * p.CacheWrite / 1e6,
		Output:      float64(output) * p.Output / 1e6,
		Basis:       basis,
	}
	c.Total = c.Input + c.CachedInput + c.CacheWrite + c.Output
	return c
}

// CallCost is what a finished call cost: on the endpoint's reported usage
// when it reported one (its cache writes among them), else on the studio's
// own counts (its input, the cached prefix it estimated, its output).
func (p Price) CallCost(call ModelCall, fin ModelFinished) Cost {
	if u := fin.Usage; u != nil {
		return p.Of(u.PromptTokens, u.CachedTokens, u.CacheCreationTokens, u.CompletionTokens, BasisUsage)
	}
	return p.Of(call.InputTokens, call.CachedPrefixTokens, 0, fin.OutputTokens, BasisEstimate)
}

// PriceTable finds the price of a model by its name; ok is false when it
// knows none.
type PriceTable func(model string) (Price, bool)
