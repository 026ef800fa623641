package view

import "slices"

// Window is how a long list shows on a page: its first Head items, a gap
// standing for the middle, and its last Tail items. A list of up to
// Head+Tail+1 items shows whole (a gap of one would save nothing).
type Window struct{ Head, Tail int }

// The windows of the session page: the timeline's calls and each pane's
// messages (the marked call and receipt are recent, in the tail).
var (
	TimelineWindow = Window{Head: 100, Tail: 300}
	PaneWindow     = Window{Head: 20, Tail: 120}
)

// Gap returns the positions [from, to) of a list of n items that the gap
// stands for; from == to when the list shows whole.
func (w Window) Gap(n int) (from, to int) {
	if n <= w.Head+w.Tail+1 {
		return n, n
	}
	return w.Head, n - w.Tail
}

// Shown reports whether position i of a list of n shows.
func (w Window) Shown(i, n int) bool {
	from, to := w.Gap(n)
	return i < from || i >= to
}

// Growth is what a page showing a list does when the list grows: remove
// the positions that went into the gap, append the new positions
// [HeadFrom, HeadTo) before the gap, put the gap in (when it Appears) or
// change its count (when it Changes), and append [TailFrom, n) after it.
type Growth struct {
	Removed          []int
	HeadFrom, HeadTo int
	Appears, Changes bool
	TailFrom, TailTo int
	GapFrom, GapTo   int
}

// Grow is how a list shown with w goes from `before` items to `after`.
func (w Window) Grow(before, after int) Growth {
	bf, bt := w.Gap(before)
	af, at := w.Gap(after)
	g := Growth{GapFrom: af, GapTo: at, TailTo: after}
	whole := bf == bt
	for i := af; i < min(at, before); i++ {
		if whole || i < bf || i >= bt {
			g.Removed = append(g.Removed, i)
		}
	}
	g.HeadFrom, g.HeadTo = before, max(before, min(af, after))
	g.Appears = whole && af != at
	g.Changes = !whole && (bf != af || bt != at)
	g.TailFrom = max(before, at)
	if af == at { // still whole: everything new is "head"
		g.HeadTo, g.TailFrom = after, after
	}
	return g
}

// CallsWindow is how an agent's list of model calls shows: its first and
// its last calls; WaterfallSteps how many of the last steps the timeline
// shows (all of them on request).
var (
	CallsWindow    = Window{Head: 3, Tail: 12}
	WaterfallSteps = 400
)

// Focus is how a parent's pane shows a long history around a delegation:
// its first Head messages (the prompt), Radius messages either side of
// each point of focus (the task call, the receipt), and its last Tail.
type Focus struct{ Head, Radius, Tail int }

// ParentFocus is the parent pane's.
var ParentFocus = Focus{Head: 2, Radius: 2, Tail: 3}

// Spans returns the positions of a list of n shown around the points at,
// as sorted, disjoint [from, to) spans; gaps of one are shown too (a gap
// of one would save nothing).
func (f Focus) Spans(n int, at ...int) [][2]int {
	var in [][2]int
	add := func(a, b int) {
		a, b = max(a, 0), min(b, n)
		if a < b {
			in = append(in, [2]int{a, b})
		}
	}
	add(0, f.Head)
	for _, p := range at {
		if p >= 0 {
			add(p-f.Radius, p+f.Radius+1)
		}
	}
	add(n-f.Tail, n)
	slices.SortFunc(in, func(a, b [2]int) int { return a[0] - b[0] })
	var out [][2]int
	for _, s := range in {
		if k := len(out); k > 0 && s[0] <= out[k-1][1]+1 {
			out[k-1][1] = max(out[k-1][1], s[1])
			continue
		}
		out = append(out, s)
	}
	return out
}
