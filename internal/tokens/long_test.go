package tokens

import (
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// letters returns n random lowercase letters: text without a space, which
// the split makes one piece of.
func letters(n int, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}

// TestLongPieceIsMergedInParts checks that a piece longer than maxPiece is
// merged in parts of at most maxPiece bytes, cut on character boundaries,
// that together are the piece; and that a piece of maxPiece bytes, the
// longest merged whole, is still counted as tiktoken counts it.
func TestLongPieceIsMergedInParts(t *testing.T) {
	// Three-byte letters astride the cuts: no cut may split one.
	piece := letters(maxPiece-1, 1) + "中文" + letters(maxPiece-2, 2) + "中" + letters(maxPiece/2, 3)
	if got := o200k.pieces(piece); len(got) != 1 {
		t.Fatalf("the test's text splits into %d pieces, want one", len(got))
	}
	var whole strings.Builder
	sum := 0
	for part := range bounded(piece) {
		if len(part) == 0 || len(part) > maxPiece {
			t.Fatalf("a part of %d bytes; want 1 to %d", len(part), maxPiece)
		}
		if !strings.HasPrefix(piece[whole.Len():], part) || !validStart(part) {
			t.Fatalf("the part at byte %d is not the piece's next bytes, cut on a character boundary", whole.Len())
		}
		whole.WriteString(part)
		sum += o200k.Count(part)
	}
	if whole.String() != piece {
		t.Fatalf("the parts hold %d bytes of the piece's %d", whole.Len(), len(piece))
	}
	if n := o200k.Count(piece); n != sum {
		t.Errorf("Count of the long piece = %d, the sum of its parts' counts = %d", n, sum)
	}
	for _, name := range []string{nameO200K, nameCL100K} {
		checkAgainstReference(t, name, letters(maxPiece, 4))
	}
}

// validStart reports whether s starts on a character boundary.
func validStart(s string) bool { return s == "" || s[0] < 0x80 || s[0] >= 0xC0 }

// BenchmarkRunWithoutSpaces counts 512 KiB and 4 MiB of letters without a
// space, in one run: how the cost grows with the size (x8; linear is 8) and
// the cost per byte of the larger. The cost is the process's CPU time, which
// other work on a shared machine moves far less than the wall clock.
func BenchmarkRunWithoutSpaces(b *testing.B) {
	small, large := letters(512<<10, 5), letters(4<<20, 6)
	o200k.load()
	var ratio, perByte float64
	for b.Loop() {
		start := cpuTime()
		sink += o200k.Count(small)
		t0 := cpuTime() - start
		start = cpuTime()
		sink += o200k.Count(large)
		t1 := cpuTime() - start
		ratio += float64(t1) / float64(t0)
		perByte += float64(t1.Nanoseconds()) / float64(len(large))
	}
	n := float64(b.N)
	b.ReportMetric(ratio/n, "size-x8")
	b.ReportMetric(perByte/n, "cpu-ns/byte-4MiB")
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
