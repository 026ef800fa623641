package view

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
