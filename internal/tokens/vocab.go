package tokens

import (
	_ "embed"
	"fmt"
	"math/bits"
)

// vocab is the rank table of an encoding: token bytes -> token ID, which in
// tiktoken is also the token's merge priority.
//
// The table is generated from the tiktoken vocabulary when the tables change
// (go generate; the test TestVocabFilesFresh fails when the files are stale)
// and embedded, so loading it costs nothing: no parse, no allocation, and
// only the pages a lookup touches are read from the binary. Building a
// map[string]int from the bundled text instead took about 90% of a
// `studio run` (42 MB in 600,000 allocations to keep 7.7 MB).
//
// The file is little-endian uint32s, then bytes:
//
//	n, tableBits, maxN, arenaLen    header
//	offs[n+1]                       token r is arena[offs[r]:offs[r+1]]
//	slots[1<<tableBits]             0 = empty, else tag<<rankBits | (r+1)
//	arena[arenaLen]                 the bytes of every token, in rank order
//
// slots is an open-addressing table with linear probing, at most about 40%
// full so that probe sequences stay short. A slot's tag is 14 more bits of
// the hash, which skips almost every byte comparison of a miss. Counting is
// mostly lookups in this table (one per piece, several per merge), and a
// lookup touches one slot, then one offset pair and the bytes.
type vocab struct {
	n     int
	mask  uint64
	offs  string // n+1 little-endian uint32s
	slots string // mask+1 little-endian uint32s
	arena string
	maxN  int // length of the longest token
}

const (
	vocabHeader = 4 * 4
	rankBits    = 18 // ranks+1 below 2^18: o200k has 199,998 tokens
	rankMask    = 1<<rankBits - 1
	tagBits     = 32 - rankBits
	tagMask     = 1<<tagBits - 1
)

var (
	//go:embed data/o200k_base.bin
	o200kTable string
	//go:embed data/cl100k_base.bin
	cl100kTable string
)

// le32 reads the i-th little-endian uint32 of s; the compiler turns it into
// one load.
func le32(s string, i int) uint32 {
	s = s[4*i : 4*i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// openVocab reads the header of an embedded table and slices it; nothing is
// copied.
func openVocab(data string) (*vocab, error) {
	if len(data) < vocabHeader {
		return nil, fmt.Errorf("the table has %d bytes, fewer than its header", len(data))
	}
	n, tb, maxN, arenaLen := int(le32(data, 0)), int(le32(data, 1)), int(le32(data, 2)), int(le32(data, 3))
	offsLen, slotsLen := 4*(n+1), 4<<tb
	if tb > 30 || n >= rankMask || len(data) != vocabHeader+offsLen+slotsLen+arenaLen {
		return nil, fmt.Errorf("the table's header (n %d, bits %d, arena %d) does not match its size %d", n, tb, arenaLen, len(data))
	}
	rest := data[vocabHeader:]
	v := &vocab{n: n, mask: uint64(1)<<tb - 1, maxN: maxN}
	v.offs, rest = rest[:offsLen], rest[offsLen:]
	v.slots, v.arena = rest[:slotsLen], rest[slotsLen:]
	return v, nil
}

// encodeVocab writes the table of tokens, given in rank order (token r has
// rank r). It is the generator's half of openVocab.
func encodeVocab(tokens []string) ([]byte, error) {
	if len(tokens) >= rankMask {
		return nil, fmt.Errorf("%d tokens; the table holds fewer than %d", len(tokens), rankMask)
	}
	tb := bits.Len(uint(len(tokens) * 5 / 2))
	arenaLen, maxN := 0, 0
	for _, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("an empty token")
		}
		arenaLen += len(t)
		maxN = max(maxN, len(t))
	}
	out := make([]byte, 0, vocabHeader+4*(len(tokens)+1)+4<<tb+arenaLen)
	put := func(x uint32) { out = append(out, byte(x), byte(x>>8), byte(x>>16), byte(x>>24)) }
	put(uint32(len(tokens)))
	put(uint32(tb))
	put(uint32(maxN))
	put(uint32(arenaLen))
	off := 0
	for _, t := range tokens {
		put(uint32(off))
		off += len(t)
	}
	put(uint32(off))
	mask := uint64(1)<<tb - 1
	slots := make([]uint32, 1<<tb)
	for r, t := range tokens {
		h := hashPiece(t)
		i := h & mask
		for slots[i] != 0 {
			i = (i + 1) & mask
		}
		slots[i] = tagOf(h)<<rankBits | uint32(r+1)
	}
	for _, s := range slots {
		put(s)
	}
	for _, t := range tokens {
		out = append(out, t...)
	}
	return out, nil
}

// hashPiece is the hash lookups take, computed once per piece and shared
// with the count cache. It is fixed (not maphash's per-process seed)
// because the table is built ahead of time: 8 bytes at a time, each mixed
// with a multiply, then murmur3's finalizer so every output bit depends on
// every input bit (the slot uses the low bits, the tag and the cache the
// high ones).
func hashPiece(s string) uint64 {
	const m = 0x9E3779B97F4A7C15
	h := uint64(len(s)) * m
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		h = bits.RotateLeft64(h^w*m, 31) * m
		s = s[8:]
	}
	if len(s) > 0 {
		var w uint64
		for i := len(s) - 1; i >= 0; i-- {
			w = w<<8 | uint64(s[i])
		}
		h = bits.RotateLeft64(h^w*m, 31) * m
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func tagOf(h uint64) uint32 { return uint32(h>>32) & tagMask }

// hash is hashPiece, as a method for the callers that hold a vocab.
func (v *vocab) hash(s string) uint64 { return hashPiece(s) }

// find returns the rank of piece, whose hash is h.
func (v *vocab) find(piece string, h uint64) (int, bool) {
	tag := tagOf(h)
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := le32(v.slots, int(i))
		if s == 0 {
			return 0, false
		}
		if s>>rankBits == tag {
			r := int(s&rankMask) - 1
			if off, end := le32(v.offs, r), le32(v.offs, r+1); int(end-off) == len(piece) && v.arena[off:end] == piece {
				return r, true
			}
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
