package tokens

import (
	"flag"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
	tiktoken "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// The reference is github.com/pkoukk/tiktoken-go with its bundled offline
// vocabularies. Building one of its encoders takes a noticeable fraction of a
// second, so each is built once per test binary.

var (
	refOnce sync.Once
	refEncs = map[string]*tiktoken.Tiktoken{}
	refErr  error
	// refPats are the split patterns of tiktoken-go v0.1.8 (encoding.go),
	// used to show the reference's pieces when token IDs differ.
	refPats = map[string]*regexp2.Regexp{
		nameCL100K: regexp2.MustCompile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, regexp2.None),
		nameO200K: regexp2.MustCompile(strings.Join([]string{
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
			`\p{N}{1,3}`,
			` ?[^\s\p{L}\p{N}]+[\r\n/]*`,
			`\s*[\r\n]+`,
			`\s+(?!\S)`,
			`\s+`,
		}, "|"), regexp2.None),
	}
)

func reference(tb testing.TB, name string) *tiktoken.Tiktoken {
	tb.Helper()
	refOnce.Do(func() {
		tiktoken.SetBpeLoader(loader.NewOfflineLoader())
		for _, n := range []string{nameO200K, nameCL100K} {
			enc, err := tiktoken.GetEncoding(n)
			if err != nil {
				refErr = err
				return
			}
			refEncs[n] = enc
		}
	})
	if refErr != nil {
		tb.Fatalf("reference tokenizer: %v", refErr)
	}
	return refEncs[name]
}

// refPieces splits text the way the reference does: on the runes of the
// text (so invalid UTF-8 has become U+FFFD), with regexp2.
func refPieces(name, text string) []string {
	var out []string
	m, _ := refPats[name].FindStringMatch(string([]rune(text)))
	for m != nil {
		out = append(out, m.String())
		m, _ = refPats[name].FindNextMatch(m)
	}
	return out
}

func ours(name string) *bpe {
	if name == nameCL100K {
		return cl100k
	}
	return o200k
}

// checkAgainstReference compares the token IDs, the split and the count of
// text with the reference and reports the first difference.
func checkAgainstReference(t *testing.T, name, text string) {
	t.Helper()
	e := ours(name)
	want := reference(t, name).Encode(text, nil, nil)
	got := e.encode(text)
	if !slices.Equal(got, want) {
		t.Errorf("%s: token IDs of %q differ\n got  %v\n want %v\n our pieces %q\n ref pieces %q",
			name, text, got, want, e.pieces(text), refPieces(name, text))
		return
	}
	if gp, wp := e.pieces(text), refPieces(name, text); !slices.Equal(gp, wp) {
		t.Errorf("%s: pieces of %q differ\n got  %q\n want %q", name, text, gp, wp)
	}
	if n := e.Count(text); n != len(want) {
		t.Errorf("%s: Count(%q) = %d, reference has %d tokens", name, text, n, len(want))
	}
}

// corpus holds the texts the differential test checks: the shapes of text an
// agent's model receives and the corners of the split patterns.
var corpus = []string{
	"",
	"Hello, world!",
	"The quick brown fox jumps over the lazy dog. It wasn't the dog's fault, really.",
	"Please read the file at /home/user/project/src/main.go and summarise what it does in two sentences.",
	"You are a helpful assistant. Use the tools when you need to; never guess a file's contents.",
	// Contractions in every case, and near misses.
	"I'm, you're, we've, they'll, he'd, she's, it's, don't",
	"I'M YOU'RE WE'VE THEY'LL HE'D SHE'S IT'S DON'T",
	"You'Re We'vE they'Ll i'M 'S 'T 'Re 'rE 'LL 'lL 'x 'ss ''s '",
	"HELLO'S WORLD'S ÀÉ'S ǅ'll Ǆ'RE",
	"'s's's 'll'll 're're",
	"x'", "'", "''", "'r", "'l", "'v",
	// Code.
	"func (e *bpe) Count(text string) int {\n\tn := 0\n\tfor i := 0; i < len(s); {\n\t\tj := e.split(s, i)\n\t}\n\treturn n\n}\n",
	"def f(x):\r\n    return x**2  # square\r\n\r\n\r\nprint(f(3))\n",
	"if (a && b || !c) { x += 1; } else { y -= 2; } // done\n",
	"<div class=\"row\"><span>{{ item.name }}</span></div>",
	"SELECT id, name FROM users WHERE email LIKE '%@example.com' ORDER BY id DESC;",
	"camelCaseIdentifier snake_case_name SCREAMING_CASE PascalCase XMLHttpRequest getHTTPResponseCode",
	// JSON with tool-call arguments.
	`{"name":"read_file","arguments":{"path":"internal/tokens/bpe.go","offset":0,"limit":200}}`,
	`{"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"search","arguments":"{\"query\":\"regexp2 backtracking\",\"max_results\":10}"}}]}`,
	"{\n  \"command\": \"go test ./...\",\n  \"timeout_ms\": 120000,\n  \"env\": {\"GOFLAGS\": \"-count=1\"}\n}",
	// Paths and URLs.
	"/path/to//x", "C:\\Users\\me\\file.txt", "./a/b/../c", "https://example.com/a/b?c=d&e=f#g",
	"//", "///", "a//b", "/\n/", ".\n/\n//x", "+\n/\r\n//y", " //", " /\n", "x/\r\n\r\n/",
	// Numbers of many lengths.
	"1", "12", "123", "1234", "12345", "123456", "1234567", "3.14159265358979", "-42", "1,000,000", "0x1F2E3D",
	"v1.2.3 2024-05-13T10:20:30Z 192.168.0.1:8080", "½ ¾ ² ³ ١٢٣٤ ४२ Ⅻ ⅷ",
	"abc123def 123abc", "a1b2c3", " 1 22 333 4444",
	// Non-Latin scripts.
	"我们今天去公园散步，天气很好。你想一起来吗？",
	"这是一个很长的中文句子没有任何标点符号用来测试长片段的字节对合并是否正确无误并且足够快速地完成所有的工作内容",
	"日本語のテキストです。カタカナとひらがなと漢字が混ざっています。",
	"Привет, мир! Как дела? ПРИВЕТ Мир",
	"مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "안녕하세요 세계",
	"Ελληνικά ΚΕΦΑΛΑΙΑ ǅungla ǈj ǋ",
	// Emoji, symbols, combining marks.
	"Great job! 🎉🎉 👍🏽 👨‍👩‍👧‍👦 🇫🇷",
	"e\u0301 a\u0300b \u0301abc \u0301 \u0301\u0301 A\u0301B x\u20dd",
	"\u0301", " \u0301", "\u0301AB", "\u0301ABc", "A\u0301", "AB\u0301C", "ab\u0301C", "\u0301'S",
	"ʰʰʰ ʰA Aʰ ʰa aʰ Aʰ'S ʰ's",
	"Ǆ ǅ ǆ ǅa Aǅ ǅA",
	"€100 £5 ¥ © ® ™ → ← ∑ ∫ ≠",
	// Whitespace.
	"   ", " ", "\t", "\n", "\r\n", "\n\n\n", "a   b", "a \t b", "a\t\tb", "  leading", "trailing  ", "trailing\n",
	"line one\nline two\r\nline three\rline four",
	"  \n  x", " \n \n y", "\n \t\n", "x  \r\n  y", "x\u00a0\u00a0y", "x\u3000y", "\u2003\u2003abc", "\v\f x",
	"a \u0085 b", "\u0085\u0085", "x \n", "x\n ", "x \t",
	// Punctuation runs.
	"!!!", "?!?!", "...", "—–-", "a!!!b", " !!!", "!!! ", "!!!\n\n", " (){}[]<>", ":)", "))\r\n", "#!/bin/sh\n",
	"<|endoftext|>", "<|endofprompt|> hi <|fim_prefix|>",
	// Invalid UTF-8.
	"\xff", "\xfe\xff", "abc\xffdef", "\xe2\x82", "\xe2\x82\xac", "a\xe2\x82b", "\xed\xa0\x80", "\xc0\xaf", " \xff ", "\xffs", "'\xff",
	"\x80abc", "日\x80本", "\xf0\x9f\x98",
	// Control characters.
	"\x00", "a\x00b", "\x1b[31mred\x1b[0m", "\x1c\x1d\x1e\x1f",
}

func TestMatchesReference(t *testing.T) {
	for _, name := range []string{nameO200K, nameCL100K} {
		for _, text := range corpus {
			checkAgainstReference(t, name, text)
		}
		// Long texts: the whole corpus at once, and long pieces, which take
		// the heap merge path.
		checkAgainstReference(t, name, strings.Join(corpus, " "))
		for _, long := range []string{
			strings.Repeat("ab", 300) + strings.Repeat("中文", 100),
			strings.Repeat("a", 5000),
			strings.Repeat(" ", 3000) + "x" + strings.Repeat("\t", 2000),
			strings.Repeat("\u0301", 1000),
			"x" + strings.Repeat("\n", 3000),
		} {
			checkAgainstReference(t, name, long)
		}
	}
}

// randomN is how many random texts TestRandomMatchesReference checks per
// encoding; raise it for a longer run: go test -run=Random -tokens.random=1000000
var randomN = flag.Int("tokens.random", 1000, "number of random texts TestRandomMatchesReference checks per encoding")

// alphabet holds the characters and fragments where the split patterns make
// decisions: contraction letters in both cases, every letter category
// (Lu, Ll, Lt, Lm, Lo), combining marks, numbers of several kinds, each sort
// of whitespace, the o200k slash rule, punctuation, emoji and invalid
// UTF-8; a few are listed twice to make them likelier. Random byte strings
// from the fuzzer seldom form these characters.
var alphabet = []string{
	"'", "'", "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d", "D", "x", "Q",
	"é", "É", "ǅ", "ǈ", "ʰ", "ˆ", "中", "ア", "\u0301", "\u0300", "\u20dd", "\u093f", "\u0e31",
	"1", "0", "9", "½", "²", "١", "Ⅻ",
	" ", " ", " ", "\t", "\n", "\r", "\r\n", "\u00a0", "\u3000", "\u2003", "\u0085", "\v", "\f",
	"/", "//", ".", ",", "!", "?", "-", "_", "(", ")", "{", "\"", ":", "\\", "#", "€", "😀", "👍🏽",
	"\xff", "\xe2\x82", "\x00", "\x1f",
}

// TestRandomMatchesReference compares with the reference on random texts
// drawn from alphabet.
func TestRandomMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for _, name := range []string{nameO200K, nameCL100K} {
		for k := 0; k < *randomN && !t.Failed(); k++ {
			b.Reset()
			for n := 1 + rng.IntN(12); n > 0; n-- {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			checkAgainstReference(t, name, b.String())
		}
	}
}

// FuzzMatchesReference compares token IDs with the reference for random text
// in both encodings.
func FuzzMatchesReference(f *testing.F) {
	for _, s := range corpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		// The reference's merge is quadratic in the length of a piece: a
		// 100 KB run of one letter takes it seconds, and the fuzzing engine
		// kills a worker whose call runs over 10 s. TestMatchesReference
		// and TestHeapMergeMatchesSimple cover long pieces.
		if len(text) > 8<<10 {
			t.Skip("longer than the reference handles quickly")
		}
		for _, name := range []string{nameO200K, nameCL100K} {
			checkAgainstReference(t, name, text)
		}
	})
}

// TestContractionCase checks which characters the reference's case-insensitive
// contraction matches, so that our lowering agrees with regexp2's for every
// rune, not only the ASCII letters.
func TestContractionCase(t *testing.T) {
	re := regexp2.MustCompile(`^(?i:'s|'t|'re|'ve|'m|'ll|'d)`, regexp2.None)
	for r := rune(1); r < 0x10000; r++ {
		if r >= 0xD800 && r < 0xE000 {
			continue
		}
		for _, tail := range []string{"", "e", "l"} {
			s := "'" + string(r) + tail
			m, _ := re.FindStringMatch(s)
			want := 0
			if m != nil {
				want = len(m.String())
			}
			if got := contractionAt(s, 0); got != want {
				t.Fatalf("contraction %q: got %d bytes, want %d", s, got, want)
			}
		}
	}
}
