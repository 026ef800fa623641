package delegation

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

// referenceGlob is the regular expression the glob language was first
// written as: * within a segment, ** across segments, **/ zero or more
// directories, ? one character, [...] a class. The automaton must agree
// with it on every pattern and path.
func referenceGlob(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch c {
		case '*':
			if i+1 < len(pattern) && pattern[i+1] == '*' {
				i++
				if i+1 < len(pattern) && pattern[i+1] == '/' {
					i++
					b.WriteString("(?:.*/)?")
				} else {
					b.WriteString(".*")
				}
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		case '[':
			j := strings.IndexByte(pattern[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("'[' is not closed")
			}
			class := pattern[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		default:
			// The byte itself: the first version wrote string(c), the
			// rune U+00XX, so no literal beyond ASCII ever matched.
			b.WriteString(regexp.QuoteMeta(pattern[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

func TestGlobAgreesWithTheReference(t *testing.T) {
	fixed := []struct{ pattern, path string }{
		{"*.md", "a.md"}, {"*.md", "d/a.md"}, {"**/*.md", "a.md"}, {"**/*.md", "d/e/a.md"},
		{"**.md", "d/a.md"}, {"d/**", "d/a/b"}, {"d/**", "d"}, {"?.md", "é.md"}, {"[!a]*", "/x"},
		{"[a-c]?", "bz"}, {"[é]", "é"}, {"**/**/x", "x"}, {"**/**/x", "a/b/x"}, {"a/**/b", "a/b"},
		{"a/**/b", "a/x/y/b"}, {"a**/b", "a/c/b"}, {"*a*a*a*b", strings.Repeat("a", 50)},
		{"x\\y", "x\\y"}, {".*", ".hidden"}, {"*", ""}, {"", ""}, {"***", "a/b"}, {"***/x", "x"},
	}
	for _, c := range fixed {
		checkAgainstReference(t, c.pattern, c.path)
	}
	rng := rand.New(rand.NewPCG(21, 5))
	atoms := []string{"a", "b", "/", "*", "**", "**/", "?", "[ab]", "[!a]", ".", "é", "[a-z]"}
	chars := []string{"a", "b", "/", ".", "é", "c"}
	for range 20000 {
		var p, s strings.Builder
		for range rng.IntN(7) {
			p.WriteString(atoms[rng.IntN(len(atoms))])
		}
		for range rng.IntN(10) {
			s.WriteString(chars[rng.IntN(len(chars))])
		}
		checkAgainstReference(t, p.String(), s.String())
	}
}

func checkAgainstReference(t *testing.T, pattern, path string) {
	t.Helper()
	re, rerr := referenceGlob(pattern)
	g, gerr := compileGlob(pattern)
	if (rerr != nil) != (gerr != nil) {
		t.Fatalf("pattern %q: reference error %v, glob error %v", pattern, rerr, gerr)
	}
	if rerr != nil {
		return
	}
	if strings.Contains(pattern, "***") {
		// The reference reads runs of three or more stars pair by pair
		// ("***/" as ".*[^/]*/"); the glob reads any run as "**".
		if re, rerr = referenceGlob(starRun().ReplaceAllLiteralString(pattern, "**")); rerr != nil {
			t.Fatal(rerr)
		}
	}
	want := re.MatchString(path)
	if got := g.match(path); got != want {
		t.Fatalf("pattern %q on %q: glob says %v, the reference %v", pattern, path, got, want)
	}
}

// Finding 5 of issue 21: '*' became [^/]* in a regular expression, so a
// 100 KB path and a 4,000-star pattern took 8 s, and paths and patterns had
// no limit (NUL accepted).
func TestGlobBomb(t *testing.T) {
	w := newWorkspace(nil)
	long := "/" + strings.Repeat("a", MaxPathLen-1)
	w.write(long, "x")
	for i := range 200 {
		w.write(fmt.Sprintf("/%d/%s", i, strings.Repeat("a", MaxPathLen-10)), "x")
	}
	run := func(tool string, args map[string]any) (string, error) {
		b, _ := json.Marshal(args)
		return stackTool(tool).run(context.Background(), w, b)
	}
	t.Run("a 100 KB path is refused", func(t *testing.T) {
		_, err := run("write_file", map[string]any{"file_path": "/" + strings.Repeat("a", 100<<10), "content": "x"})
		if err == nil || !strings.Contains(err.Error(), "the most is 4096") {
			t.Fatalf("got %v", err)
		}
		if len(err.Error()) > 300 {
			t.Fatalf("the error repeats the path: %d bytes", len(err.Error()))
		}
	})
	t.Run("a NUL in a path is refused", func(t *testing.T) {
		_, err := run("read_file", map[string]any{"file_path": "/a\x00b"})
		if err == nil || !strings.Contains(err.Error(), "NUL") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("4,000 stars collapse and match at once", func(t *testing.T) {
		out, err := run("glob", map[string]any{"pattern": strings.Repeat("*", 4000) + "b"})
		if err != nil || !strings.HasPrefix(out, "No files match") {
			t.Fatalf("got %q, %v", out, err)
		}
	})
	t.Run("a pattern past 256 characters is refused", func(t *testing.T) {
		_, err := run("glob", map[string]any{"pattern": strings.Repeat("*a", 200)})
		if err == nil || !strings.Contains(err.Error(), "the most is 256") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("the worst pattern allowed on the longest paths", func(t *testing.T) {
		// 128 stars between literals: the regular expression's cost was the
		// path's length times the pattern's.
		start := time.Now()
		out, err := run("grep", map[string]any{"pattern": "x", "glob": "**" + strings.Repeat("*a", 126) + "b"})
		if err != nil || !strings.HasPrefix(out, "No matches") {
			t.Fatalf("got %q, %v", out, err)
		}
		t.Logf("201 paths of 4 KiB against a 256-character pattern: %v", time.Since(start))
	})
	t.Run("a glob stops when its context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := stackTool("glob").run(ctx, w, json.RawMessage(`{"pattern": "**"}`))
		if err != context.Canceled {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	})
}

// BenchmarkGlob measures, in one run, how a match's cost grows when the
// path grows eight times (linear: about x8) and when the pattern does (its
// states are advanced 64 at a time: well under x8), and the automaton
// against the regular expression it replaced on the largest case.
func BenchmarkGlob(b *testing.B) {
	cost := func(pattern, path string, useRE bool) float64 { // per match
		reps := 200
		if useRE {
			reps = 10 // it is that much slower
		}
		g, err := compileGlob(pattern)
		if err != nil {
			b.Fatal(err)
		}
		re, _ := referenceGlob(pattern)
		start := time.Now()
		for range reps {
			if useRE {
				re.MatchString(path)
			} else {
				g.match(path)
			}
		}
		return float64(time.Since(start)) / float64(reps)
	}
	short, long := strings.Repeat("a", 512), strings.Repeat("a", 4096)
	small, big := "**"+strings.Repeat("*a", 15)+"b", "**"+strings.Repeat("*a", 126)+"b"
	var path8, pattern8, vsRE float64
	for b.Loop() {
		base := cost(small, short, false)
		path8 += cost(small, long, false) / base
		pattern8 += cost(big, short, false) / base
		vsRE += cost(big, long, false) / cost(big, long, true)
	}
	n := float64(b.N)
	b.ReportMetric(path8/n, "path-x8")
	b.ReportMetric(pattern8/n, "pattern-x8")
	b.ReportMetric(vsRE/n, "ours/regexp")
}
