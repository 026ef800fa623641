package tokens

import (
	"container/heap"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// bpe is an exact tiktoken byte-pair encoder: a split function and a rank
// table, loaded on first use.
type bpe struct {
	name  string
	url   string                    // the key the offline loader looks the vocabulary up by
	split func(s string, i int) int // end of the piece that starts at s[i]

	once  sync.Once
	voc   *vocab      // token bytes -> token ID (its merge rank)
	cache *countCache // piece -> token count, for pieces not in voc
}

// The offline loader finds its bundled file by the base name of the URL
// tiktoken would download; the full URLs are kept for clarity.
var (
	o200k = &bpe{
		name:  nameO200K,
		url:   "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		split: nextO200K,
	}
	cl100k = &bpe{
		name:  nameCL100K,
		url:   "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
		split: nextCL100K,
	}
)

// load reads the bundled vocabulary once. The vocabulary is embedded in the
// loader module, so failure means a broken build; there is no error to
// return from Count, so it panics.
func (e *bpe) load() {
	e.once.Do(func() {
		loadClasses()
		ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(e.url)
		if err != nil {
			panic(fmt.Sprintf("tokens: loading the bundled %s vocabulary: %v", e.name, err))
		}
		e.voc = newVocab(ranks)
		e.cache = new(countCache)
	})
}

// Name returns the encoding's name.
func (e *bpe) Name() string { return e.name }

// valid returns text as the reference tokenizer sees it. tiktoken-go converts
// the text to runes, which turns every byte of invalid UTF-8 into U+FFFD, and
// encodes the pieces cut from those runes; doing the same here keeps the
// counts identical and lets the scanners assume valid UTF-8.
func valid(text string) string {
	if utf8.ValidString(text) {
		return text
	}
	return string([]rune(text))
}

// Count returns the number of tokens in text. It is safe for concurrent use.
func (e *bpe) Count(text string) int {
	e.load()
	s := valid(text)
	n := 0
	for i := 0; i < len(s); {
		j := e.split(s, i)
		piece := s[i:j]
		i = j
		// Most pieces are one vocabulary entry; look there first.
		h := e.voc.hash(piece)
		if _, ok := e.voc.find(piece, h); ok {
			n++
			continue
		}
		if c, ok := e.cache.get(piece, h); ok {
			n += c
			continue
		}
		c := mergeCount(piece, e.voc)
		e.cache.put(piece, h, c)
		n += c
	}
	return n
}

// encode returns the token IDs of text, as tiktoken's encode_ordinary would.
// It is used by the tests to compare with the reference token by token.
func (e *bpe) encode(text string) []int {
	e.load()
	s := valid(text)
	var out []int
	for i := 0; i < len(s); {
		j := e.split(s, i)
		piece := s[i:j]
		i = j
		if id, ok := e.voc.rank(piece); ok {
			out = append(out, id)
			continue
		}
		for _, b := range mergeBounds(piece, e.voc) {
			// Every merged part is in the table: all single bytes are.
			id, _ := e.voc.rank(piece[b[0]:b[1]])
			out = append(out, id)
		}
	}
	return out
}

// pieces returns the split of text, for tests.
func (e *bpe) pieces(text string) []string {
	e.load()
	s := valid(text)
	var out []string
	for i := 0; i < len(s); {
		j := e.split(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// The byte-pair merge, as in tiktoken: start from single bytes and
// repeatedly merge the adjacent pair whose concatenation has the lowest rank,
// the leftmost one on ties, until no adjacent pair is in the table.
//
// Short pieces use the direct algorithm (rescan for the minimum after each
// merge, quadratic but with tiny constants and no allocation). Long pieces,
// such as a run of Chinese characters without punctuation, use a heap so that
// their cost stays O(n log n); it picks the same (rank, position) minimum at
// every step, so the result is identical.
const heapMergeMin = 64

// smallMerge is the direct merge of a piece of at most heapMergeMin bytes.
// starts holds the start offset of every part plus len(piece); rank[k] is
// the rank of merging part k with part k+1.
type smallMerge struct {
	starts [heapMergeMin + 1]int32
	rank   [heapMergeMin + 1]int32
	n      int // number of entries in starts (parts + 1)
}

const noRank = math.MaxInt32

func (m *smallMerge) run(piece string, voc *vocab) {
	n := len(piece)
	m.n = n + 1
	for k := 0; k <= n; k++ {
		m.starts[k] = int32(k)
	}
	// pairRank is the rank of parts k and k+1 merged, if both exist.
	pairRank := func(k int) int32 {
		if k+2 < m.n {
			if r, ok := voc.rank(piece[m.starts[k]:m.starts[k+2]]); ok {
				return int32(r)
			}
		}
		return noRank
	}
	for k := 0; k < m.n-1; k++ {
		m.rank[k] = pairRank(k)
	}
	for m.n > 2 {
		best, at := int32(noRank), -1
		for k := 0; k < m.n-2; k++ {
			if m.rank[k] < best {
				best, at = m.rank[k], k
			}
		}
		if at < 0 {
			break
		}
		// Remove the boundary between parts at and at+1.
		copy(m.starts[at+1:m.n-1], m.starts[at+2:m.n])
		copy(m.rank[at+1:m.n-1], m.rank[at+2:m.n])
		m.n--
		m.rank[at] = pairRank(at)
		if at > 0 {
			m.rank[at-1] = pairRank(at - 1)
		}
	}
}

// mergeCount returns the number of tokens of a piece that is not itself a
// vocabulary entry.
func mergeCount(piece string, voc *vocab) int {
	if len(piece) <= heapMergeMin {
		var m smallMerge
		m.run(piece, voc)
		return m.n - 1
	}
	return len(heapMerge(piece, voc))
}

// mergeBounds returns the [start, end) byte offsets of the tokens of piece.
func mergeBounds(piece string, voc *vocab) [][2]int {
	if len(piece) <= heapMergeMin {
		var m smallMerge
		m.run(piece, voc)
		out := make([][2]int, m.n-1)
		for k := range out {
			out[k] = [2]int{int(m.starts[k]), int(m.starts[k+1])}
		}
		return out
	}
	return heapMerge(piece, voc)
}

// mergeBoundsSimple is the direct quadratic algorithm for any length; tests
// use it to check heapMerge.
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

// heapMerge is the merge for long pieces. Parts form a linked list indexed by
// their start offset; the heap holds (rank, start) candidates and entries
// made stale by a merge are skipped when popped. A part's pair rank names
// the bytes from its start to the end of its successor, which only grow, and
// ranks are unique per byte string, so an entry is current exactly when the
// part is alive and still has that rank.
func heapMerge(piece string, voc *vocab) [][2]int {
	n := len(piece)
	next := make([]int, n+1) // start of the following part; n for the last
	prev := make([]int, n+1)
	rank := make([]int, n+1) // rank of merging the part at k with the next
	alive := make([]bool, n+1)
	for k := 0; k <= n; k++ {
		next[k], prev[k], alive[k] = k+1, k-1, true
	}
	pairRank := func(k int) int {
		if k >= n || next[k] >= n {
			return math.MaxInt
		}
		if r, ok := voc.rank(piece[k:next[next[k]]]); ok {
			return r
		}
		return math.MaxInt
	}
	h := &mergeHeap{}
	for k := 0; k < n; k++ {
		rank[k] = pairRank(k)
		if rank[k] != math.MaxInt {
			h.items = append(h.items, mergeItem{rank[k], k})
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		it := heap.Pop(h).(mergeItem)
		k := it.start
		if !alive[k] || rank[k] != it.rank {
			continue
		}
		// Merge the part at k with its successor.
		dead := next[k]
		alive[dead] = false
		next[k] = next[dead]
		if next[k] <= n {
			prev[next[k]] = k
		}
		rank[k] = pairRank(k)
		if rank[k] != math.MaxInt {
			heap.Push(h, mergeItem{rank[k], k})
		}
		if p := prev[k]; p >= 0 {
			rank[p] = pairRank(p)
			if rank[p] != math.MaxInt {
				heap.Push(h, mergeItem{rank[p], p})
			}
		}
	}
	var out [][2]int
	for k := 0; k < n; k = next[k] {
		out = append(out, [2]int{k, next[k]})
	}
	return out
}

type mergeItem struct{ rank, start int }

// mergeHeap orders candidates by rank, then by position, as the direct
// algorithm's leftmost-minimum scan does.
type mergeHeap struct{ items []mergeItem }

func (h *mergeHeap) Len() int { return len(h.items) }
func (h *mergeHeap) Less(a, b int) bool {
	x, y := h.items[a], h.items[b]
	return x.rank < y.rank || (x.rank == y.rank && x.start < y.start)
}
func (h *mergeHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *mergeHeap) Push(x any)    { h.items = append(h.items, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}
