package tokens

import (
	"strings"
	"sync/atomic"
)

// countCache remembers the token count of pieces that needed a byte-pair
// merge. Agent transcripts repeat the same identifiers, paths and JSON keys
// over and over, so most merges are done once.
//
// It is a direct-mapped table of immutable entries: a piece has one slot,
// chosen by its hash, and a new piece simply replaces whatever was there.
// Reads and writes are single atomic pointer operations, so concurrent
// counters never wait on a lock, and the memory is bounded by construction:
// at most cacheSlots entries, with keys of at most cacheMaxPiece bytes
// (about 2.5 MiB in the worst case, typically far less).
type countCache struct {
	slots [cacheSlots]atomic.Pointer[cacheEntry]
}

const (
	cacheBits     = 14
	cacheSlots    = 1 << cacheBits
	cacheMaxPiece = 128
)

type cacheEntry struct {
	piece string
	n     int
}

// slot picks the slot from the high bits of the piece's hash; the vocab
// table uses the low bits, so the two do not correlate.
func (c *countCache) slot(h uint64) *atomic.Pointer[cacheEntry] {
	return &c.slots[h>>(64-cacheBits)]
}

// get returns the cached count of piece, whose hash is h.
func (c *countCache) get(piece string, h uint64) (int, bool) {
	if e := c.slot(h).Load(); e != nil && e.piece == piece {
		return e.n, true
	}
	return 0, false
}

// put caches the count of piece, whose hash is h.
func (c *countCache) put(piece string, h uint64, n int) {
	if len(piece) > cacheMaxPiece {
		return
	}
	// The piece is a substring of the caller's text; clone it so the cache
	// does not keep the whole text alive.
	c.slot(h).Store(&cacheEntry{strings.Clone(piece), n})
}
