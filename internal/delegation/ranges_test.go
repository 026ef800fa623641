package delegation

import (
	"slices"
	"testing"
)

func TestRangesFirstAndAfter(t *testing.T) {
	rs := []Range{{AgentID: "main", From: 0, To: 3}, {AgentID: "a1", From: 5, To: 7}}
	if n := RangesLen(rs); n != 5 {
		t.Fatalf("RangesLen = %d, want 5", n)
	}
	for _, c := range []struct {
		n            int
		first, after []Range
	}{
		{0, nil, rs},
		{2, []Range{{"main", 0, 2}}, []Range{{"main", 2, 3}, {"a1", 5, 7}}},
		{3, []Range{{"main", 0, 3}}, []Range{{"a1", 5, 7}}},
		{4, []Range{{"main", 0, 3}, {"a1", 5, 6}}, []Range{{"a1", 6, 7}}},
		{9, rs, nil},
	} {
		if got := FirstMessages(rs, c.n); !slices.Equal(got, c.first) {
			t.Errorf("FirstMessages(%d) = %v, want %v", c.n, got, c.first)
		}
		if got := AfterMessages(rs, c.n); !slices.Equal(got, c.after) {
			t.Errorf("AfterMessages(%d) = %v, want %v", c.n, got, c.after)
		}
		if RangesLen(FirstMessages(rs, c.n))+RangesLen(AfterMessages(rs, c.n)) != RangesLen(rs) {
			t.Errorf("%d: the two parts do not make the whole", c.n)
		}
	}
}
