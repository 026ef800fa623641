package view

import (
	"slices"
	"testing"
)

// shown lists the positions a list of n shows through w, and where the gap
// stands (-1).
func shown(w Window, n int) []int {
	var out []int
	from, to := w.Gap(n)
	for i := 0; i < n; i++ {
		if i == from && to > from {
			out = append(out, -1)
		}
		if w.Shown(i, n) {
			out = append(out, i)
		}
	}
	return out
}

// TestWindowGrow: applying Grow's steps to what a page showed of a list of
// `before` items gives what it shows of `after`, for every pair of lengths
// across the point where the gap appears.
func TestWindowGrow(t *testing.T) {
	w := Window{Head: 2, Tail: 3}
	for before := 0; before <= 12; before++ {
		for after := before + 1; after <= 14; after++ {
			page := shown(w, before)
			g := w.Grow(before, after)
			page = slices.DeleteFunc(page, func(i int) bool { return slices.Contains(g.Removed, i) })
			gapAt := slices.Index(page, -1)
			head := []int{}
			for i := g.HeadFrom; i < g.HeadTo; i++ {
				head = append(head, i)
			}
			if gapAt >= 0 {
				page = slices.Insert(page, gapAt, head...)
			} else {
				page = append(page, head...)
			}
			if g.Appears {
				if i := slices.Index(page, g.GapFrom-1); i >= 0 {
					page = slices.Insert(page, i+1, -1)
				} else {
					t.Fatalf("%d → %d: the gap goes after position %d, which the page does not show (%v)", before, after, g.GapFrom-1, page)
				}
			}
			for i := g.TailFrom; i < g.TailTo; i++ {
				page = append(page, i)
			}
			if want := shown(w, after); !slices.Equal(page, want) {
				t.Errorf("%d → %d: the page shows %v after %+v; want %v", before, after, page, g, want)
			}
			if from, to := w.Gap(after); (g.Appears || g.Changes) && (g.GapFrom != from || g.GapTo != to) {
				t.Errorf("%d → %d: the gap is %d..%d, want %d..%d", before, after, g.GapFrom, g.GapTo, from, to)
			}
		}
	}
}
