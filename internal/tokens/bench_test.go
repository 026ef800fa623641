package tokens

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Benchmark inputs: a typical 120-character English message, a 2 KB JSON
// tool-call argument and 2 KB of Chinese prose.
var (
	sentence = "The agent read the configuration file, found two stale entries, and asked the user whether to remove them, then retried."
	jsonArgs = func() string {
		src := `package main

import (
	"fmt"
	"os"
)

// main prints the arguments it was given, one per line, and exits with
// status 2 when there are none.
func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: echo-args ARG...")
		os.Exit(2)
	}
	for i, a := range os.Args[1:] {
		fmt.Printf("%d\t%q\n", i, a)
	}
}
`
		args := map[string]any{
			"path":      "cmd/echo-args/main.go",
			"content":   strings.Repeat(src, 6),
			"overwrite": true,
			"mode":      "0644",
		}
		b, err := json.Marshal(args)
		if err != nil {
			panic(err)
		}
		return cut(string(b), 2048)
	}()
	chinese = cut(strings.Repeat("代理读取了配置文件，发现了两条过期的条目，并询问用户是否应该在重试之前删除它们。"+
		"用户回答说可以删除，于是代理修改了文件并重新运行了测试，所有测试都通过了。"+
		"接下来，它总结了所做的更改，并把结果写进了报告里。", 10), 2048)
)

// cut returns a prefix of s of at most n bytes that ends on a character
// boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

var benchInputs = []struct{ name, text string }{
	{"sentence120", sentence},
	{"json2KB", jsonArgs},
	{"chinese2KB", chinese},
}

var sink int

// BenchmarkCount measures a warm Count: vocabulary loaded, cache filled.
func BenchmarkCount(b *testing.B) {
	for _, enc := range []string{nameO200K, nameCL100K} {
		c, _ := Get(enc)
		for _, in := range benchInputs {
			b.Run(enc+"/"+in.name, func(b *testing.B) {
				c.Count(in.text)
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				for b.Loop() {
					sink += c.Count(in.text)
				}
			})
		}
	}
}

// BenchmarkCountUncached measures counting with every piece that is not a
// vocabulary entry merged afresh, as Count does for text it has never seen
// (the work of Count without its piece cache).
func BenchmarkCountUncached(b *testing.B) {
	for _, enc := range []*bpe{o200k, cl100k} {
		enc.load()
		for _, in := range benchInputs {
			b.Run(enc.name+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				for b.Loop() {
					sink += countUncached(enc, in.text)
				}
			})
		}
	}
}

// countUncached is Count without the cache.
func countUncached(e *bpe, text string) int {
	s := valid(text)
	n := 0
	for i := 0; i < len(s); {
		j := e.split(s, i)
		for piece := range bounded(s[i:j]) {
			if _, ok := e.voc.rank(piece); ok {
				n++
				continue
			}
			n += mergeCount(piece, e.voc)
		}
		i = j
	}
	return n
}

// BenchmarkReferenceCount is the same work done by the reference library,
// github.com/pkoukk/tiktoken-go, for comparison.
func BenchmarkReferenceCount(b *testing.B) {
	for _, enc := range []string{nameO200K, nameCL100K} {
		ref := reference(b, enc)
		for _, in := range benchInputs {
			b.Run(enc+"/"+in.name, func(b *testing.B) {
				b.SetBytes(int64(len(in.text)))
				b.ReportAllocs()
				for b.Loop() {
					sink += len(ref.Encode(in.text, nil, nil))
				}
			})
		}
	}
}

// BenchmarkApprox is the estimate, for scale.
func BenchmarkApprox(b *testing.B) {
	c, _ := Get(nameApprox)
	b.ReportAllocs()
	for b.Loop() {
		sink += c.Count(sentence)
	}
}

// BenchmarkFirstCount opens a tokenizer and counts one sentence, as the
// first Count of a process does: with the embedded table, opening reads a
// header (building the map from the bundled text took about 150 ms).
func BenchmarkFirstCount(b *testing.B) {
	loadClasses()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		e := &bpe{name: o200k.name, table: o200k.table, split: o200k.split}
		sink = e.Count(sentence)
	}
}
