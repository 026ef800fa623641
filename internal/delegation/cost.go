package delegation

// Price is what a model's tokens cost, in dollars per million tokens: new
// input, input read from the prompt cache, and output.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
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
	Output      float64 `json:"output"`
	Total       float64 `json:"total"`
	Basis       string  `json:"basis"`
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
	return Cost{Input: c.Input + o.Input, CachedInput: c.CachedInput + o.CachedInput, Output: c.Output + o.Output,
		Total: c.Total + o.Total, Basis: basis}
}

// Of prices tokens: input of which cached were read from the cache, and
// output.
func (p Price) Of(input, cached, output int, basis string) Cost {
	cached = min(max(cached, 0), input)
	c := Cost{
		Input:       float64(input-cached) * p.Input / 1e6,
		CachedInput: float64(cached) * p.CachedInput / 1e6,
		Output:      float64(output) * p.Output / 1e6,
		Basis:       basis,
	}
	c.Total = c.Input + c.CachedInput + c.Output
	return c
}

// CallCost is what a finished call cost: on the endpoint's reported usage
// when it reported one, else on the studio's own counts (its input, the
// cached prefix it estimated, its output).
func (p Price) CallCost(call ModelCall, fin ModelFinished) Cost {
	if u := fin.Usage; u != nil {
		return p.Of(u.PromptTokens, u.CachedTokens, u.CompletionTokens, BasisUsage)
	}
	return p.Of(call.InputTokens, call.CachedPrefixTokens, fin.OutputTokens, BasisEstimate)
}

// PriceTable finds the price of a model by its name; ok is false when it
// knows none.
type PriceTable func(model string) (Price, bool)
