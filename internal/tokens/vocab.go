package tokens

import (
	"hash/maphash"
	"math/bits"
	"strings"
)

// vocab is the rank table of an encoding: token bytes -> token ID, which in
// tiktoken is also the token's merge priority.
//
// Counting is mostly lookups in this table (one per piece, several per
// merge), so it is an open-addressing table laid out for them instead of a
// map[string]int: the token bytes live in one string, and a slot holds a
// hash tag, the length, the offset and the rank, so a lookup touches one slot
// and then compares bytes. With 200k entries a Go map needs several
// dependent loads (directory, group, control word, key header, key bytes)
// per lookup; this needs two. Replacing the map with it cut the time of
// Count by about a quarter.
type vocab struct {
	seed  maphash.Seed
	mask  uint64 // len(slots)-1; len(slots) is a power of two
	slots []vslot
	arena string // the bytes of every token, concatenated
	maxN  int    // length of the longest token
}

// vslot is one table slot; n == 0 marks an empty slot (no token is empty).
type vslot struct {
	tag  uint16 // top 16 bits of the hash, to skip most byte comparisons
	n    uint16 // token length in bytes
	off  uint32 // token offset in arena
	rank uint32
}

// newVocab builds the table from the loader's map. The table is at most
// about 40% full, which keeps linear probe sequences short.
func newVocab(ranks map[string]int) *vocab {
	var b strings.Builder
	total := 0
	for k := range ranks {
		total += len(k)
	}
	b.Grow(total)
	size := 1 << bits.Len(uint(len(ranks)*5/2))
	v := &vocab{
		seed:  maphash.MakeSeed(),
		mask:  uint64(size - 1),
		slots: make([]vslot, size),
	}
	// Keys are unique, so insertion needs no comparison and the arena can
	// be built in the same pass.
	for k, r := range ranks {
		h := v.hash(k)
		i := h & v.mask
		for v.slots[i].n != 0 {
			i = (i + 1) & v.mask
		}
		v.slots[i] = vslot{tag: uint16(h >> 48), n: uint16(len(k)), off: uint32(b.Len()), rank: uint32(r)}
		b.WriteString(k)
		v.maxN = max(v.maxN, len(k))
	}
	v.arena = b.String()
	return v
}

// hash is the hash lookups take, computed once per piece and shared with
// the count cache.
func (v *vocab) hash(s string) uint64 { return maphash.String(v.seed, s) }

// find returns the rank of piece, whose hash is h.
func (v *vocab) find(piece string, h uint64) (int, bool) {
	tag := uint16(h >> 48)
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := &v.slots[i]
		if s.n == 0 {
			return 0, false
		}
		if s.tag == tag && int(s.n) == len(piece) && v.arena[s.off:s.off+uint32(s.n)] == piece {
			return int(s.rank), true
		}
	}
}

// rank returns the rank of piece. Strings longer than any token are
// rejected without hashing them, which matters in the merge of a long piece.
func (v *vocab) rank(piece string) (int, bool) {
	if len(piece) > v.maxN {
		return 0, false
	}
	return v.find(piece, v.hash(piece))
}
