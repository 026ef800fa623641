package pricing

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	if AsOf() == "" {
		t.Fatal("the table has no date")
	}
	cases := []struct {
		model, want string
	}{
		{"gpt-4.1-mini", "gpt-4.1-mini"},
		{"GPT-4.1-mini", "gpt-4.1-mini"},
		{"gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"},
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4o-2024-08-06", "gpt-4o"},
		{"openai/gpt-4.1", "gpt-4.1"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"claude-sonnet-4-0", "claude-sonnet-4"},
		{"anthropic/claude-3-5-haiku-latest", "claude-3-5-haiku"},
		{"claude-opus-4-1-20250805", "claude-opus-4-1"},
		{"deepseek-chat", "deepseek-chat"},
		{"gemini-2.5-flash", "gemini-2.5-flash"},
	}
	for _, c := range cases {
		p, ok := Lookup(c.model)
		if !ok || p.Model != c.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", c.model, p.Model, ok, c.want)
		}
		if !strings.HasPrefix(p.Source, "table ") {
			t.Errorf("Lookup(%q).Source = %q", c.model, p.Source)
		}
	}
	for _, m := range []string{"", "qwen2.5", "gpt-4.1-turbo-special", "o3-deep-research", "scripted"} {
		if p, ok := Lookup(m); ok {
			t.Errorf("Lookup(%q) = %+v; want none", m, p)
		}
	}
	p, _ := Lookup("gpt-4o")
	if p.Input != 2.5 || p.CachedInput != 1.25 || p.Output != 10 || p.CacheWrite != 0 {
		t.Fatalf("gpt-4o = %+v", p)
	}
}

// Anthropic's models write their cache at 1.25 times the input price
// (5-minute TTL); other providers' have no surcharge.
func TestAnthropicCacheWrite(t *testing.T) {
	p, ok := Lookup("claude-sonnet-4-20250514")
	if !ok || p.Input != 3 || p.CacheWrite != 3.75 {
		t.Fatalf("claude-sonnet-4 = %+v, %v", p, ok)
	}
	if p, _ := Lookup("gpt-4.1"); p.CacheWrite != 0 {
		t.Errorf("gpt-4.1 = %+v", p)
	}
}

func TestBadTables(t *testing.T) {
	for name, doc := range map[string]string{
		"no date":           `{"models": {}}`,
		"negative":          `{"as_of": "2025-01-01", "models": {"m": {"input": -1, "cached_input": 0, "output": 1}}}`,
		"cached past input": `{"as_of": "2025-01-01", "models": {"m": {"input": 1, "cached_input": 2, "output": 1}}}`,
		"dangling alias":    `{"as_of": "2025-01-01", "models": {}, "aliases": {"a": "b"}}`,
	} {
		if _, err := load([]byte(doc)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}
