package tokens

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// The split step. tiktoken cuts text into pieces with a regular expression
// before the byte-pair merge; the reference Go ports run that expression
// through the backtracking regexp2 engine, which costs far more than the
// merge itself. The scanners below produce exactly the pieces the expressions
// produce, by hand: at each position they try the alternatives in order and
// reproduce the greedy/backtracking choice each alternative would make.
//
// Every character can start a match of both expressions (it is a letter, a
// number, whitespace or "other"), so the matches tile the text and each one
// starts where the previous one ended; a scanner only has to answer "where
// does the match starting at i end?".
//
// Character classes are those of regexp2, which the reference uses: \p{..}
// are Go's unicode category tables and \s is unicode.IsSpace.

// Class flags of one character. A character has any combination of them;
// the regex classes are tests on these bits.
const (
	fL   = 1 << iota // \p{L}
	fN               // \p{N}
	fS               // \s (unicode.IsSpace)
	fNL              // \r or \n
	fU               // o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	fW               // o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	fEnd = 1 << 7    // past the end of the text: in no class at all
)

// isPrefix reports membership of [^\r\n\p{L}\p{N}]. fEnd is excluded so that
// the end of the text matches nothing.
func isPrefix(f uint8) bool { return f&(fL|fN|fNL|fEnd) == 0 }

// isPunct reports membership of [^\s\p{L}\p{N}].
func isPunct(f uint8) bool { return f&(fL|fN|fS|fEnd) == 0 }

// classifySlow computes the class flags of r from the unicode tables. It is
// the definition; the BMP table below is a cache of it.
func classifySlow(r rune) uint8 {
	var f uint8
	switch {
	case unicode.Is(unicode.Lu, r), unicode.Is(unicode.Lt, r):
		f = fL | fU
	case unicode.Is(unicode.Ll, r):
		f = fL | fW
	case unicode.Is(unicode.Lm, r), unicode.Is(unicode.Lo, r):
		f = fL | fU | fW
	case unicode.Is(unicode.M, r):
		f = fU | fW
	case unicode.Is(unicode.N, r):
		f = fN
	}
	if unicode.IsSpace(r) {
		f |= fS
	}
	if r == '\r' || r == '\n' {
		f |= fNL
	}
	return f
}

// bmpClasses holds the class flags of every rune in the Basic Multilingual
// Plane, so that classifying a CJK or Cyrillic character is one load instead
// of several binary searches through the unicode tables. Runes above the BMP
// (emoji, rare CJK) are rare enough to classify with classifySlow.
var (
	bmpClasses     *[0x10000]uint8
	bmpClassesOnce sync.Once
)

// loadClasses builds bmpClasses once. It fills the table from the ranges of
// the category tables rather than calling classifySlow 65536 times, which is
// an order of magnitude slower; a test checks the two agree on every rune.
func loadClasses() {
	bmpClassesOnce.Do(func() {
		t := new([0x10000]uint8)
		fill := func(tab *unicode.RangeTable, f uint8) {
			for _, rg := range tab.R16 {
				for r := uint32(rg.Lo); r <= uint32(rg.Hi); r += uint32(rg.Stride) {
					t[r] |= f
				}
			}
		}
		fill(unicode.Lu, fL|fU)
		fill(unicode.Lt, fL|fU)
		fill(unicode.Ll, fL|fW)
		fill(unicode.Lm, fL|fU|fW)
		fill(unicode.Lo, fL|fU|fW)
		fill(unicode.M, fU|fW)
		fill(unicode.N, fN)
		// unicode.IsSpace is a fixed list in Latin-1 and the White_Space
		// property above it.
		for r := rune(0); r < 0x100; r++ {
			if unicode.IsSpace(r) {
				t[r] |= fS
			}
		}
		for _, rg := range unicode.White_Space.R16 {
			for r := uint32(rg.Lo); r <= uint32(rg.Hi); r += uint32(rg.Stride) {
				if r >= 0x100 {
					t[r] |= fS
				}
			}
		}
		t['\r'] |= fNL
		t['\n'] |= fNL
		bmpClasses = t
	})
}

// asciiClasses are the class flags of ASCII, which most text is. The hot
// loops test an ASCII byte with one load from this table, which needs
// nothing loaded first; it has 256 entries, only the first 128 used, so
// indexing it with a byte needs no bounds check.
var asciiClasses = func() (t [256]uint8) {
	for r := range utf8.RuneSelf {
		t[r] = classifySlow(rune(r))
	}
	return t
}()

// classAt returns the class flags and byte size of the character at s[i],
// or fEnd and 0 at the end of s. s must be valid UTF-8.
func classAt(s string, i int) (uint8, int) {
	if i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			return asciiClasses[c], 1
		}
	}
	return classAtSlow(s, i)
}

// classAtSlow is classAt for the end of s and non-ASCII characters;
// loadClasses must have run.
func classAtSlow(s string, i int) (uint8, int) {
	if i >= len(s) {
		return fEnd, 0
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r <= 0xFFFF {
		return bmpClasses[r], n
	}
	return classifySlow(r), n
}

// lowerAt returns unicode.ToLower of the character at s[i] and its size, or
// -1 at the end of s. regexp2 matches case-insensitive text by lowering the
// input character and comparing it with the lowered pattern character.
func lowerAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		return rune(c), 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return unicode.ToLower(r), n
}

// contractionAt returns the byte length of (?i:'s|'t|'re|'ve|'m|'ll|'d)
// matched at s[i], or 0. The alternatives start with different letters, so
// at most one of them can match and their order does not matter.
func contractionAt(s string, i int) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	r1, n1 := lowerAt(s, i+1)
	switch r1 {
	case 's', 't', 'm', 'd':
		return 1 + n1
	case 'r', 'v', 'l':
		want := 'e'
		if r1 == 'l' {
			want = 'l'
		}
		if r2, n2 := lowerAt(s, i+1+n1); r2 == want {
			return 1 + n1 + n2
		}
	}
	return 0
}

// spanOf advances from s[i] over characters having any of the flags in mask
// and returns the end of the run. It is the scanners' inner loop, so it
// tests ASCII inline rather than through classAt, whose slow-path call keeps
// it from being inlined.
func spanOf(s string, i int, mask uint8) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClasses[c]&mask == 0 {
				return i
			}
			i++
			continue
		}
		f, n := classAtSlow(s, i)
		if f&mask == 0 {
			return i
		}
		i += n
	}
	return i
}

// numbersAt matches \p{N}{1,3} at s[i], which holds a number.
func numbersAt(s string, i int) int {
	for k := 0; k < 3; k++ {
		f, n := classAt(s, i)
		if f&fN == 0 {
			break
		}
		i += n
	}
	return i
}

// punctAt matches ` ?[^\s\p{L}\p{N}]+` followed by characters of the trailer
// class ([\r\n]* for cl100k, [\r\n/]* for o200k) at s[i], or returns -1.
// The optional space is greedy but gives itself back when no punctuation
// follows it; the trailer is optional so nothing after the punctuation run
// can fail.
func punctAt(s string, i int, slash bool) int {
	j := i
	if s[i] == ' ' {
		if f, _ := classAt(s, i+1); isPunct(f) {
			j = i + 1
		}
	}
	f, n := classAt(s, j)
	if !isPunct(f) {
		return -1
	}
	j += n
	for {
		f, n = classAt(s, j)
		if !isPunct(f) {
			break
		}
		j += n
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n' || (slash && s[j] == '/')) {
		j++
	}
	return j
}

// spaceAt matches the whitespace alternatives `\s*[\r\n]+|\s+(?!\S)|\s+` at
// s[i], which holds whitespace:
//   - \s*[\r\n]+ takes the whitespace run up to and including its last \r
//     or \n (the greedy \s* backs off until [\r\n]+ can match);
//   - otherwise \s+(?!\S) takes the whole run at the end of the text, or all
//     but its last character before a non-space, so that the last space can
//     join the next word (" word");
//   - otherwise (a run of one character before a non-space) \s+ takes it.
func spaceAt(s string, i int) int {
	j, last, afterNL, runes := i, i, -1, 0
	for {
		f, n := classAt(s, j)
		if f&fS == 0 {
			break
		}
		if f&fNL != 0 {
			afterNL = j + n
		}
		last = j
		j += n
		runes++
	}
	switch {
	case afterNL >= 0:
		return afterNL
	case j == len(s) || runes == 1:
		return j
	default:
		return last
	}
}

// nextCL100K returns the end of the cl100k_base pattern's match at s[i]:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func nextCL100K(s string, i int) int {
	if m := contractionAt(s, i); m > 0 {
		return i + m
	}
	f, n := classAt(s, i)
	if f&fL != 0 {
		return spanOf(s, i+n, fL)
	}
	if isPrefix(f) {
		if f2, n2 := classAt(s, i+n); f2&fL != 0 {
			return spanOf(s, i+n+n2, fL)
		}
	}
	if f&fN != 0 {
		return numbersAt(s, i)
	}
	if j := punctAt(s, i, false); j >= 0 {
		return j
	}
	// Not a letter, number or punctuation: whitespace.
	return spaceAt(s, i)
}

// o200kWordAt matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// followed by an optional contraction at s[p], or returns -1 (the first
// o200k alternative after its optional prefix character).
//
// The "upper" star is greedy. If the character after the upper run is a
// lower-class character, the lower plus takes the lower run from there.
// Otherwise the star backs off one character at a time until the lower plus
// can match, that is, to the last character of the upper run that is also in
// the lower class (Lm, Lo, M); the lower plus then holds just that character,
// because the next one is not in the lower class.
func o200kWordAt(s string, p int) int {
	j, lastW := p, -1
	for j < len(s) {
		var f uint8
		n := 1
		if c := s[j]; c < utf8.RuneSelf {
			f = asciiClasses[c]
		} else {
			f, n = classAtSlow(s, j)
		}
		if f&fU == 0 {
			break
		}
		j += n
		if f&fW != 0 {
			lastW = j
		}
	}
	if f, n := classAt(s, j); f&fW != 0 {
		j = spanOf(s, j+n, fW)
		return j + contractionAt(s, j)
	}
	if lastW >= 0 {
		return lastW + contractionAt(s, lastW)
	}
	return -1
}

// o200kUpperAt matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// followed by an optional contraction at s[p], or returns -1 (the second
// o200k alternative after its optional prefix character). Only the plus can
// fail, so no backtracking is needed.
func o200kUpperAt(s string, p int) int {
	f, n := classAt(s, p)
	if f&fU == 0 {
		return -1
	}
	j := spanOf(s, p+n, fU)
	j = spanOf(s, j, fW)
	return j + contractionAt(s, j)
}

// nextO200K returns the end of the o200k_base pattern's match at s[i]:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//	\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// Each of the first two alternatives first tries with the optional prefix
// character taken and then without it. A mark (\p{M}) is both a possible
// prefix and a letter-class character, so both attempts matter for it.
func nextO200K(s string, i int) int {
	f, n := classAt(s, i)
	pre := isPrefix(f)
	if pre {
		if j := o200kWordAt(s, i+n); j >= 0 {
			return j
		}
	}
	if f&(fU|fW) != 0 {
		if j := o200kWordAt(s, i); j >= 0 {
			return j
		}
	}
	if pre {
		if j := o200kUpperAt(s, i+n); j >= 0 {
			return j
		}
	}
	if f&fU != 0 {
		return o200kUpperAt(s, i)
	}
	if f&fN != 0 {
		return numbersAt(s, i)
	}
	if j := punctAt(s, i, true); j >= 0 {
		return j
	}
	return spaceAt(s, i)
}
