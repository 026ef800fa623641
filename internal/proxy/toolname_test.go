package proxy

import (
	"strings"
	"testing"
)

func TestValidToolName(t *testing.T) {
	for _, c := range []struct {
		name string
		max  int
		ok   bool
	}{
		{"read_file", 64, true}, {"a-B_9", 64, true}, {"", 64, false}, {"has space", 64, false}, {"dot.ted", 64, false},
		{"naïve", 64, false}, {strings.Repeat("x", 64), 64, true}, {strings.Repeat("x", 65), 64, false}, {strings.Repeat("x", 128), 128, true},
	} {
		if got := validToolName(c.name, c.max); got != c.ok {
			t.Errorf("validToolName(%q, %d) = %v, want %v", c.name, c.max, got, c.ok)
		}
	}
}
