package i18n

import (
	"strings"
	"testing"
	"time"
)

// Every message of one language's catalogue is in the other's: a page
// never falls back to English in Chinese, nor shows an id in English. The
// lessons' Chinese texts are keyed by their English text, which lives in
// the lessons' code: internal/lessons checks those.
func TestCataloguesHaveTheSameIDs(t *testing.T) {
	en, zh := set(IDs(English)), set(IDs(Chinese))
	if len(en) < 20 {
		t.Fatalf("the English catalogue has %d messages: not loaded?", len(en))
	}
	for id := range en {
		if !zh[id] {
			t.Errorf("%q is in en.toml but not in zh.toml", id)
		}
	}
	for id := range zh {
		if strings.HasPrefix(id, "text.") {
			continue
		}
		if !en[id] {
			t.Errorf("%q is in zh.toml but not in en.toml", id)
		}
	}
}

// Each message renders in both languages: its template parses and runs
// with the data the code gives it, and the Chinese differs from the
// English unless it is a name.
func TestEveryMessageRenders(t *testing.T) {
	for _, id := range IDs(English) {
		e, z := Get(English).T(id), Get(Chinese).T(id)
		if e == id || z == id {
			t.Errorf("%q does not render: en %q, zh %q", id, e, z)
		}
		// A name, a symbol or a JSON example may read the same; a sentence
		// may not.
		if e == z && strings.Contains(e, " ") && !strings.HasPrefix(e, "{") && !strings.Contains(e, "<no value>") {
			t.Errorf("%q is the same in both languages: %q", id, e)
		}
	}
}

func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestNegotiate(t *testing.T) {
	for h, want := range map[string]string{
		"":                          English,
		"zh-CN,zh;q=0.9,en;q=0.8":   Chinese,
		"zh":                        Chinese,
		"zh-Hans":                   Chinese,
		"zh-TW":                     Chinese,
		"en-US,en;q=0.9,zh;q=0.8":   English,
		"fr-FR,fr;q=0.9":            English,
		"fr-FR,zh-CN;q=0.5":         Chinese,
		"de, en;q=0.5, zh;q=0.9":    Chinese, // by weight, not order
		"not a ; header ,,, q=what": English,
	} {
		if got := Negotiate(h); got != want {
			t.Errorf("Negotiate(%q) = %s, want %s", h, got, want)
		}
	}
}

func TestPluralsNumbersDates(t *testing.T) {
	en, zh := Get(English), Get(Chinese)
	for _, c := range []struct {
		l    *Lang
		n    int
		want string
	}{{en, 1, "1 problem"}, {en, 2, "2 problems"}, {en, 12345, "12,345 problems"}, {zh, 1, "1 个问题"}, {zh, 12345, "12,345 个问题"}} {
		if got := c.l.N("summary.problems", c.n); got != c.want {
			t.Errorf("%s N(%d) = %q, want %q", c.l.Code, c.n, got, c.want)
		}
	}
	day := time.Date(2026, 12, 1, 14, 5, 0, 0, time.UTC)
	if got := en.DateTime(day); got != "1 Dec 2026, 14:05" {
		t.Errorf("en date %q", got)
	}
	if got := zh.DateTime(day); got != "2026年12月1日 14:05" {
		t.Errorf("zh date %q", got)
	}
	if got := zh.Age(day.Add(-3*time.Minute), day); got != "3 分钟前" {
		t.Errorf("zh age %q", got)
	}
	if got := en.Age(day.Add(-72*time.Hour), day); got != "28 Nov 2026" {
		t.Errorf("en age of three days %q", got)
	}
}

func TestKeyCarriesFiguresOver(t *testing.T) {
	key, figs := Key(`the receipt is "42", 1,234 tokens against 286`)
	if key != "the receipt is {1}, {2} tokens against {3}" || strings.Join(figs, "|") != `"42"|1,234|286` {
		t.Fatalf("Key: %q %q", key, figs)
	}
}

// HTML escapes a message's data, and marks a run's data as such.
func TestHTMLEscapesAndMarksData(t *testing.T) {
	got := Get(Chinese).HTML("sess.call_title", "Step", 4, "ID", Data("<a1>"), "Name", "x&y", "N", 2)
	want := `第 4 步：<span translate="no">&lt;a1&gt;</span> x&amp;y 的第 2 次调用——它的完整上下文和回答`
	if got != want {
		t.Errorf("HTML = %q, want %q", got, want)
	}
}
