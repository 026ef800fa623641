package delegation

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"
)

// Limits of the virtual filesystem's inputs. Paths and patterns come from
// models and from scenario files: without limits one call could make a
// tool's work as large as a path times a pattern.
const (
	MaxPathLen    = 4096 // bytes of a path
	MaxPatternLen = 256  // characters of a glob pattern, once runs of '*' are collapsed
	MaxSearchLen  = 4096 // bytes of grep's search text
)

// A glob is a compiled glob pattern: * matches within one path segment, **
// across segments, **/ zero or more whole directories, ? one character
// (not '/'), [...] a class ([!...] negated), anything else itself.
//
// It is matched as a small automaton whose states are bits of a few words,
// all advanced at once for each character of the path: a match costs the
// path's length times the pattern's length in words (at most five), never
// the product of the two lengths, and there is no backtracking to blow up.
type glob struct {
	toks  []globTok
	words int    // the words of a bitset the pattern uses
	loops bitset // tokens that repeat: * and **
	skips bitset // the entries of **/ groups, which match nothing: from one, the group or what follows it
	ascii [utf8.RuneSelf]bitset
	// For characters beyond ASCII: tokens that match any rune but '/'
	// (?, *, **), and the literal and class tokens that need a look.
	anyRune bitset
	special []int
}

type globKind uint8

const (
	globLit   globKind = iota // one given character
	globOne                   // ?: one character but '/'
	globClass                 // [...]
	globStar                  // *: any run without '/'
	globAny                   // **: any run at all
	globSkip                  // the entry of **/, which is "(**/)?": it matches no character
)

type globTok struct {
	kind   globKind
	r      rune
	ranges []rune // a class's ranges, lo-hi pairs
	negate bool
}

func (t *globTok) matches(r rune) bool {
	switch t.kind {
	case globLit:
		return r == t.r
	case globOne, globStar:
		return r != '/'
	case globAny:
		return true
	case globSkip:
		return false
	}
	in := false
	for i := 0; i+1 < len(t.ranges); i += 2 {
		if t.ranges[i] <= r && r <= t.ranges[i+1] {
			in = true
			break
		}
	}
	return in != t.negate
}

// bitset holds one bit per token, and one past the last for "matched".
type bitset [maxGlobWords]uint64

// maxGlobWords holds MaxPatternLen tokens and the "matched" state.
const maxGlobWords = (MaxPatternLen + 1 + 63) / 64

func (b *bitset) set(i int)      { b[i>>6] |= 1 << (i & 63) }
func (b *bitset) has(i int) bool { return b[i>>6]&(1<<(i&63)) != 0 }

// maxRawPattern bounds a pattern before its stars are collapsed.
const maxRawPattern = 64 << 10

var starRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\*\*+`) })

// collapseStars rewrites stars to the shortest form that means the same: a
// run of two or more is "**", and "**/**" is "**" (so "**/**/" is "**/").
func collapseStars(p string) string {
	if !strings.Contains(p, "**") {
		return p
	}
	p = starRun().ReplaceAllLiteralString(p, "**")
	for strings.Contains(p, "**/**") {
		p = strings.ReplaceAll(p, "**/**", "**")
	}
	return p
}

// compileGlob checks a pattern and compiles it.
func compileGlob(pattern string) (*glob, error) {
	if strings.IndexByte(pattern, 0) >= 0 {
		return nil, toolErrorf("Invalid glob pattern: it contains a NUL character.")
	}
	if len(pattern) > maxRawPattern {
		return nil, toolErrorf("Invalid glob pattern '%s': it is %d bytes long; the most is %d characters.", shortText(pattern), len(pattern), MaxPatternLen)
	}
	pattern = collapseStars(pattern)
	if n := utf8.RuneCountInString(pattern); n > MaxPatternLen {
		return nil, toolErrorf("Invalid glob pattern '%s': it is %d characters long; the most is %d.", shortText(pattern), n, MaxPatternLen)
	}
	g := &glob{}
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch {
		case c == '*' && strings.HasPrefix(pattern[i:], "**/"):
			g.skips.set(len(g.toks))
			g.loops.set(len(g.toks) + 1)
			g.toks = append(g.toks, globTok{kind: globSkip}, globTok{kind: globAny}, globTok{kind: globLit, r: '/'})
			i += 3
		case c == '*' && strings.HasPrefix(pattern[i:], "**"):
			g.loops.set(len(g.toks))
			g.toks = append(g.toks, globTok{kind: globAny})
			i += 2
		case c == '*':
			g.loops.set(len(g.toks))
			g.toks = append(g.toks, globTok{kind: globStar})
			i++
		case c == '?':
			g.toks = append(g.toks, globTok{kind: globOne})
			i++
		case c == '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				return nil, toolErrorf("Invalid glob pattern '%s': '[' is not closed.", shortText(pattern))
			}
			tok, ok := parseClass(pattern[i+1 : i+j])
			if !ok {
				return nil, toolErrorf("Invalid glob pattern '%s'.", shortText(pattern))
			}
			g.toks = append(g.toks, tok)
			i += j + 1
		default:
			r, size := utf8.DecodeRuneInString(pattern[i:])
			g.toks = append(g.toks, globTok{kind: globLit, r: r})
			i += size
		}
	}
	g.words = (len(g.toks) + 1 + 63) / 64
	for i := range g.toks {
		t := &g.toks[i]
		for r := rune(0); r < utf8.RuneSelf; r++ {
			if t.matches(r) {
				g.ascii[r].set(i)
			}
		}
		switch t.kind {
		case globOne, globStar, globAny:
			g.anyRune.set(i)
		case globLit, globClass:
			g.special = append(g.special, i)
		}
	}
	return g, nil
}

// parseClass reads the inside of [...]: what a regular expression's class
// would mean, with '!' for negation as in shells.
func parseClass(class string) (globTok, bool) {
	tok := globTok{kind: globClass}
	if strings.HasPrefix(class, "!") {
		tok.negate, class = true, class[1:]
	} else if strings.HasPrefix(class, "^") {
		tok.negate, class = true, class[1:]
	}
	re, err := syntax.Parse("["+class+"]", syntax.Perl)
	if err != nil {
		return tok, false
	}
	switch re.Op {
	case syntax.OpCharClass:
		tok.ranges = re.Rune
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			tok.ranges = append(tok.ranges, r, r)
		}
	case syntax.OpAnyCharNotNL:
		tok.ranges = []rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}
	case syntax.OpAnyChar:
		tok.ranges = []rune{0, utf8.MaxRune}
	default:
		return tok, false
	}
	return tok, true
}

// closure adds, in place, the states reachable without a character: past a
// * or **, which may match nothing, and from the entry of a **/ into it or
// past it.
func (g *glob) closure(s *bitset) {
	n := g.words
	for {
		changed := false
		var carry1, carry3 uint64
		for w := 0; w < n; w++ {
			loops, skips := s[w]&g.loops[w], s[w]&g.skips[w]
			// Shifted left by one (loops and skips) and by three (skips).
			in := loops | skips
			add := in<<1 | carry1 | skips<<3 | carry3
			carry1, carry3 = in>>63, skips>>61
			if next := s[w] | add; next != s[w] {
				s[w], changed = next, true
			}
		}
		if !changed {
			return
		}
	}
}

// match reports whether the whole of s matches the pattern.
func (g *glob) match(s string) bool {
	n := g.words
	var cur bitset
	cur.set(0)
	g.closure(&cur)
	for i := 0; i < len(s); {
		var m bitset
		if c := s[i]; c < utf8.RuneSelf {
			m = g.ascii[c]
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if r != '/' {
				m = g.anyRune
			}
			for _, t := range g.special {
				if g.toks[t].matches(r) {
					m.set(t)
				}
			}
		}
		// A live repeating token stays where it is; any other moves on.
		var carry uint64
		alive := false
		for w := 0; w < n; w++ {
			live := cur[w] & m[w]
			moving := live &^ g.loops[w]
			next := live&g.loops[w] | moving<<1 | carry
			carry = moving >> 63
			cur[w] = next
			alive = alive || next != 0
		}
		if !alive {
			return false
		}
		g.closure(&cur)
	}
	return cur.has(len(g.toks))
}

// shortText is a model's or user's text cut short for an error message.
func shortText(s string) string {
	const n = 120
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
