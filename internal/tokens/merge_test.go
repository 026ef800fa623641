package tokens

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestHeapMergeMatchesSimple checks the long-piece merge against the direct
// algorithm on long pieces made of common fragments, so that many merges and
// rank ties happen.
func TestHeapMergeMatchesSimple(t *testing.T) {
	frags := []string{"a", "b", "ab", "the", " ", "ing", "中", "文", "\xe4", "x", "0", "ll", "ee"}
	for _, e := range []*bpe{o200k, cl100k} {
		e.load()
		seed := uint32(1)
		for trial := 0; trial < 200; trial++ {
			var b strings.Builder
			for b.Len() < 70+trial*3 {
				seed = seed*1664525 + 1013904223
				b.WriteString(frags[int(seed>>16)%len(frags)])
			}
			piece := b.String()
			got, want := heapBounds(piece, e.voc), mergeBoundsSimple(piece, e.voc)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: heapBounds(%q) = %v, want %v", e.name, piece, got, want)
			}
			if len(piece) <= heapMergeMin {
				continue
			}
			if n := mergeCount(piece, e.voc); n != len(want) {
				t.Fatalf("%s: mergeCount(%q) = %d, want %d", e.name, piece, n, len(want))
			}
		}
		// The small path against the direct algorithm too.
		for _, piece := range []string{"abcdefghij", "zzzzzzzz", "中文中文", strings.Repeat("ab", 32)} {
			got, want := mergeBounds(piece, e.voc), mergeBoundsSimple(piece, e.voc)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: mergeBounds(%q) = %v, want %v", e.name, piece, got, want)
			}
		}
	}
}

// mergeBoundsSimple is the direct quadratic algorithm, as tiktoken-go
// writes it, for any length; it is the yardstick for heapMerge and
// smallMerge.
func mergeBoundsSimple(piece string, voc *vocab) [][2]int {
	parts := make([]int, len(piece)+1)
	for k := range parts {
		parts[k] = k
	}
	pairRank := func(k int) int {
		if k+2 < len(parts) {
			if r, ok := voc.rank(piece[parts[k]:parts[k+2]]); ok {
				return r
			}
		}
		return math.MaxInt
	}
	rank := make([]int, len(parts))
	for k := range rank {
		rank[k] = pairRank(k)
	}
	for {
		best, at := math.MaxInt, -1
		for k := 0; k < len(parts)-2; k++ {
			if rank[k] < best {
				best, at = rank[k], k
			}
		}
		if at < 0 {
			break
		}
		parts = append(parts[:at+1], parts[at+2:]...)
		rank = append(rank[:at+1], rank[at+2:]...)
		rank[at] = pairRank(at)
		if at > 0 {
			rank[at-1] = pairRank(at - 1)
		}
	}
	out := make([][2]int, len(parts)-1)
	for k := range out {
		out[k] = [2]int{parts[k], parts[k+1]}
	}
	return out
}
