package tokens

import (
	loader "github.com/pkoukk/tiktoken-go-loader"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestNames(t *testing.T) {
	want := []string{"o200k_base", "cl100k_base", "approx"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %q, want %q", got, want)
	}
	for _, name := range want {
		c, err := Get(name)
		if err != nil {
			t.Fatalf("Get(%q): %v", name, err)
		}
		if c.Name() != name {
			t.Errorf("Get(%q).Name() = %q", name, c.Name())
		}
	}
}

func TestGetDefault(t *testing.T) {
	c, err := Get("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "o200k_base" || Default != "o200k_base" {
		t.Fatalf(`Get("").Name() = %q, Default = %q; want o200k_base`, c.Name(), Default)
	}
	// Same counter as asking for it by name.
	d, _ := Get(Default)
	if c != d {
		t.Errorf(`Get("") and Get(Default) return different counters`)
	}
}

func TestGetUnknown(t *testing.T) {
	c, err := Get("gpt2")
	if err == nil {
		t.Fatalf(`Get("gpt2") = %v, want an error`, c)
	}
	want := `unknown tokenizer "gpt2"; use one of o200k_base, cl100k_base, approx`
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if _, err := Get("O200K_BASE"); err == nil {
		t.Error("names are case-sensitive, but O200K_BASE was accepted")
	}
}

func TestApprox(t *testing.T) {
	c, _ := Get("approx")
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"abcd", 1},
		{"abcde", 2},
		{"abcdefgh", 2},
		{"abcdefghi", 3},
		// Code points, not bytes: four 3-byte characters are one token.
		{"日本語文", 1},
		{"日本語文字", 2},
		{"👍👍👍👍", 1},
		// Each invalid byte is one code point.
		{"\xff\xff\xff\xff\xff", 2},
	} {
		if got := c.Count(tc.text); got != tc.want {
			t.Errorf("approx.Count(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}

// TestKnownCounts pins a few counts that are well known from tiktoken, so a
// change in the reference cannot silently move both sides.
func TestKnownCounts(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []int
	}{
		{"cl100k_base", "hello world", []int{15339, 1917}},
		{"o200k_base", "hello world", []int{24912, 2375}},
		{"cl100k_base", "", nil},
		{"o200k_base", "", nil},
	} {
		if got := ours(tc.name).encode(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s encode(%q) = %v, want %v", tc.name, tc.text, got, tc.want)
		}
		c, _ := Get(tc.name)
		if got := c.Count(tc.text); got != len(tc.want) {
			t.Errorf("%s Count(%q) = %d, want %d", tc.name, tc.text, got, len(tc.want))
		}
	}
}

// TestConcurrentCount counts from several goroutines at once (run it with
// -race) and checks every result against a sequential count. The texts
// include pieces that need a merge, so the cache is read and written
// concurrently.
func TestConcurrentCount(t *testing.T) {
	texts := []string{
		sentence, jsonArgs[:500], chinese[:600],
		"camelCaseIdentifier snake_case_name getHTTPResponseCode",
		"/home/user/project/internal/tokens/reference_test.go",
	}
	for _, name := range Names() {
		c, _ := Get(name)
		want := make([]int, len(texts))
		for i, s := range texts {
			want[i] = c.Count(s)
		}
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k := 0; k < 20; k++ {
					i := (g + k) % len(texts)
					// Vary the text so that new pieces enter the cache.
					extra := strings.Repeat("x", g+k) + "Zq"
					if got := c.Count(texts[i]); got != want[i] {
						errs <- name
						return
					}
					c.Count(texts[i] + extra)
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for n := range errs {
			t.Errorf("%s: concurrent Count differs from sequential Count", n)
		}
	}
}

// TestCacheBounded fills the cache far beyond its capacity and checks that
// it stays bounded and never returns a count stored for another piece.
func TestCacheBounded(t *testing.T) {
	o200k.load()
	var c countCache
	var b strings.Builder
	key := func(i int) string {
		b.Reset()
		b.WriteString("piece")
		for v := i; v > 0; v /= 26 {
			b.WriteByte(byte('a' + v%26))
		}
		return b.String()
	}
	const n = cacheSlots * 3
	for i := 0; i < n; i++ {
		k := key(i)
		h := o200k.voc.hash(k)
		c.put(k, h, i)
		if got, ok := c.get(k, h); !ok || got != i {
			t.Fatalf("get(%q) = %d, %v right after put", k, got, ok)
		}
	}
	entries, hits := 0, 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			entries++
		}
	}
	for i := 0; i < n; i++ {
		k := key(i)
		if got, ok := c.get(k, o200k.voc.hash(k)); ok {
			hits++
			if got != i {
				t.Fatalf("get(%q) = %d, want %d", k, got, i)
			}
		}
	}
	if entries > cacheSlots || hits > cacheSlots || hits == 0 {
		t.Errorf("%d entries, %d hits after %d puts into %d slots", entries, hits, n, cacheSlots)
	}
	long := strings.Repeat("z", cacheMaxPiece+1)
	c.put(long, o200k.voc.hash(long), 3)
	if _, ok := c.get(long, o200k.voc.hash(long)); ok {
		t.Error("a piece longer than cacheMaxPiece was cached")
	}
}

// TestVocab checks the rank table against the loader's map: every token is
// found with its rank, and strings that are not tokens are not found.
func TestVocab(t *testing.T) {
	for _, e := range []*bpe{o200k, cl100k} {
		e.load()
		ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(e.url)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range ranks {
			if got, ok := e.voc.rank(k); !ok || got != want {
				t.Fatalf("%s: rank(%q) = %d, %v; want %d", e.name, k, got, ok, want)
			}
		}
		for _, s := range []string{"", "zzzzzzzzzzzzzzzzzzzzzqx", "\xff\xfe\xfd\xfc", strings.Repeat("a", 200)} {
			if _, ok := ranks[s]; ok {
				continue
			}
			if r, ok := e.voc.rank(s); ok {
				t.Errorf("%s: rank(%q) = %d, but it is not a token", e.name, s, r)
			}
		}
	}
}
