package tokens

import (
	"fmt"
	"iter"
	"math"
	"sync"
	"unicode/utf8"
)

// bpe is an exact tiktoken byte-pair encoder: a split function and a rank
// table, opened on first use.
type bpe struct {
	name  string
	url   string                    // where tiktoken downloads the vocabulary: the tests' reference loads it by this
	table string                    // the embedded rank table (vocab.go)
	split func(s string, i int) int // end of the piece that starts at s[i]

	once  sync.Once
	voc   *vocab      // token bytes -> token ID (its merge rank)
	cache *countCache // piece -> token count, for pieces not in voc
}

// The tests' reference (tiktoken-go with its offline loader) finds its
// bundled file by the base name of the URL tiktoken would download.
var (
	o200k = &bpe{
		name:  nameO200K,
		url:   "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		table: o200kTable,
		split: nextO200K,
	}
	cl100k = &bpe{
		name:  nameCL100K,
		url:   "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
		table: cl100kTable,
		split: nextCL100K,
	}
)

// load opens the embedded vocabulary once. It is part of the binary, so
// failure means a broken build; there is no error to return from Count, so
// it panics.
func (e *bpe) load() {
	e.once.Do(func() {
		loadClasses()
		v, err := openVocab(e.table)
		if err != nil {
			panic(fmt.Sprintf("tokens: the embedded %s table is broken (run go generate ./internal/tokens): %v", e.name, err))
		}
		e.voc = v
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
		for piece := range bounded(s[i:j]) {
			n += e.countPiece(piece)
		}
		i = j
	}
	return n
}

// countPiece returns the token count of one piece of at most maxPiece bytes.
func (e *bpe) countPiece(piece string) int {
	// Most pieces are one vocabulary entry; look there first.
	h := e.voc.hash(piece)
	if _, ok := e.voc.find(piece, h); ok {
		return 1
	}
	if c, ok := e.cache.get(piece, h); ok {
		return c
	}
	c := mergeCount(piece, e.voc)
	e.cache.put(piece, h, c)
	return c
}

// maxPiece is the most bytes one byte-pair merge works on. The split makes
// one piece of a whole run of letters, of spaces or of punctuation, so text
// without a space (30 MB of letters sent to the recording endpoint) is one
// piece; and the merge of one piece costs more per byte the longer it is,
// its heap growing out of the processor's caches (0.9 µs a byte for 4 MiB
// of random letters, 0.17 µs in parts of 16 KiB), with about 33 bytes of
// scratch per byte (1 GB for 30 MB). So a longer piece is merged maxPiece
// bytes at a time, as tiktoken's users cut such runs before encoding (Llama
// 3's tokenizer at 25,000 characters), and counting is linear in the text.
// Where a cut falls the count can differ from tiktoken's by a token, one in
// thousands; no piece of real text is this long (the reference tests'
// longest is 5,001 bytes), and every piece up to it is counted exactly.
const maxPiece = 16 << 10

// bounded yields piece in parts of at most maxPiece bytes, each ending on a
// character boundary: piece itself when it is short enough, as it nearly
// always is. piece must be valid UTF-8.
func bounded(piece string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for len(piece) > maxPiece {
			cut := maxPiece
			for !utf8.RuneStart(piece[cut]) {
				cut--
			}
			if !yield(piece[:cut]) {
				return
			}
			piece = piece[cut:]
		}
		yield(piece)
	}
}

// encode returns the token IDs of text, as tiktoken's encode_ordinary would.
// It is used by the tests to compare with the reference token by token.
func (e *bpe) encode(text string) []int {
	e.load()
	s := valid(text)
	var out []int
	for i := 0; i < len(s); {
		j := e.split(s, i)
		for piece := range bounded(s[i:j]) {
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
		i = j
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
	m := heapMerges.Get().(*heapMerge)
	defer heapMerges.Put(m)
	return m.run(piece, voc)
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
	return heapBounds(piece, voc)
}

// heapBounds is mergeBounds for long pieces.
func heapBounds(piece string, voc *vocab) [][2]int {
	m := heapMerges.Get().(*heapMerge)
	defer heapMerges.Put(m)
	out := make([][2]int, 0, m.run(piece, voc))
	for k := 0; k < len(piece); k = int(m.next[k]) {
		out = append(out, [2]int{k, int(m.next[k])})
	}
	return out
}

// heapMerge is the merge for long pieces. Parts form a linked list indexed by
// their start offset; the heap holds (rank, start) candidates and entries
// made stale by a merge are skipped when popped. A part's pair rank names
// the bytes from its start to the end of its successor, which only grow, and
// ranks are unique per byte string, so an entry is current exactly when the
// part is alive and still has that rank.
//
// Its arrays are kept for the next long piece (heapMerges): a piece is at
// most maxPiece bytes, so they stay a few hundred kilobytes, which the
// processor's caches hold.
type heapMerge struct {
	next, prev []int32 // start of the following and preceding part
	rank       []int32 // rank of merging the part at k with the next
	alive      []bool
	h          mergeHeap
}

var heapMerges = sync.Pool{New: func() any { return new(heapMerge) }}

// run merges piece and returns its number of tokens; m.next then links the
// start of each token to the next one's (len(piece) after the last).
func (m *heapMerge) run(piece string, voc *vocab) int {
	n := len(piece)
	m.next, m.prev = grow(m.next, n+1), grow(m.prev, n+1)
	m.rank, m.alive = grow(m.rank, n+1), grow(m.alive, n+1)
	next, prev, rank, alive := m.next, m.prev, m.rank, m.alive
	for k := 0; k <= n; k++ {
		next[k], prev[k], alive[k] = int32(k+1), int32(k-1), true
	}
	pairRank := func(k int32) int32 {
		if int(k) >= n || int(next[k]) >= n {
			return noRank
		}
		if r, ok := voc.rank(piece[k:next[next[k]]]); ok {
			return int32(r)
		}
		return noRank
	}
	h := m.h[:0]
	for k := int32(0); int(k) < n; k++ {
		rank[k] = pairRank(k)
		if rank[k] != noRank {
			h = append(h, mergeKey(rank[k], k))
		}
	}
	h.init()
	parts := n
	for len(h) > 0 {
		r, k := h.pop()
		if !alive[k] || rank[k] != r {
			continue
		}
		// Merge the part at k with its successor.
		parts--
		dead := next[k]
		alive[dead] = false
		next[k] = next[dead]
		if int(next[k]) <= n {
			prev[next[k]] = k
		}
		if rank[k] = pairRank(k); rank[k] != noRank {
			h.push(mergeKey(rank[k], k))
		}
		if p := prev[k]; p >= 0 {
			if rank[p] = pairRank(p); rank[p] != noRank {
				h.push(mergeKey(rank[p], p))
			}
		}
	}
	m.h = h
	return parts
}

// grow returns s with length n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// mergeHeap is a binary min-heap of merge candidates, each packed as
// rank<<32 | start so that comparing keys orders by rank and then by
// position, as the direct algorithm's leftmost-minimum scan does. Ranks are
// below 2^18 and a piece longer than 4 GiB is not a concern.
type mergeHeap []uint64

func mergeKey(rank, start int32) uint64 { return uint64(rank)<<32 | uint64(start) }

func (h mergeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mergeHeap) push(x uint64) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if s[parent] <= s[i] {
			break
		}
		s[parent], s[i] = s[i], s[parent]
		i = parent
	}
}

// pop removes the smallest candidate and returns its rank and start.
func (h *mergeHeap) pop() (rank, start int32) {
	s := *h
	x := s[0]
	last := len(s) - 1
	s[0] = s[last]
	*h = s[:last]
	h.down(0)
	return int32(x >> 32), int32(x & math.MaxUint32)
}

func (h mergeHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
