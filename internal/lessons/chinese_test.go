package lessons

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/i18n"
)

// The lessons' texts are written in English beside their code; their
// Chinese is in the Chinese catalogue, keyed by the English text with its
// figures as {1}, {2}, … (i18n.Key). Every lesson's texts are checked
// against it here, as TestEveryLesson computes each table.

// chineseTexts are the texts of every lesson computed so far, English,
// each with whether it must be translated (a title, a heading, a note, a
// check) or may be (a cell or a detail: a run's data unless the catalogue
// says otherwise).
var chineseTexts = struct {
	sync.Mutex
	must, may map[string]bool
}{must: map[string]bool{}, may: map[string]bool{}}

var latinWord = regexp.MustCompile(`[A-Za-z]{2,}`)

// checkChinese holds a lesson's texts to the Chinese catalogue: each text
// a reader reads as the lesson's own (its title, explanation, variants,
// table title, headings, note, checks) has a translation.
func checkChinese(t *testing.T, l Lesson, tab Table) {
	t.Helper()
	zh := i18n.Get(i18n.Chinese)
	must := []string{l.Title, l.Summary(), tab.Title, tab.Note}
	for _, v := range l.Variants {
		must = append(must, v.Label)
	}
	for _, c := range l.Cites {
		if c.Article == nil {
			must = append(must, c.Own)
		}
	}
	must = append(must, tab.Columns...)
	if tab.Article != nil {
		must = append(must, tab.Article.Columns...)
	}
	if c := tab.Chart; c != nil {
		must = append(must, c.Title)
		for _, g := range c.Groups {
			must = append(must, g.Title, g.Unit)
			for _, b := range g.Bars {
				must = append(must, b.Label)
				for _, p := range b.Parts {
					must = append(must, p.Name)
				}
			}
		}
	}
	var may []string
	for _, x := range tab.Versus {
		must = append(must, x.Why)
		may = append(may, x.What, x.Article, x.Ours)
		if x.Counted != nil {
			must = append(must, x.Counted.Gap)
		}
	}
	for _, c := range tab.Checks {
		must = append(must, c.Claim)
		may = append(may, c.Detail)
	}
	for _, r := range tab.Rows {
		may = append(may, r...)
	}
	if tab.Article != nil {
		for _, r := range tab.Article.Rows {
			may = append(may, r...)
		}
	}
	chineseTexts.Lock()
	defer chineseTexts.Unlock()
	for _, s := range must {
		if s == "" {
			continue
		}
		chineseTexts.must[s] = true
		if !zh.HasText(s) {
			k, _ := i18n.Key(s)
			t.Errorf("no Chinese for the lesson's text %q (key %q in locales/lessons.zh.toml)", s, k)
		}
	}
	for _, s := range may {
		if latinWord.MatchString(s) {
			chineseTexts.may[s] = true
		}
	}
}

// TestMain runs the lessons' tests, then, when every lesson was computed,
// fails on a Chinese text that no lesson has any longer (a translation
// left behind when its English changed). STUDIO_LESSON_TEXTS=file writes
// the keys that have no Chinese yet, for a translator.
func TestMain(m *testing.M) {
	code := m.Run()
	chineseTexts.Lock()
	defer chineseTexts.Unlock()
	if len(chineseTexts.must) == 0 || !ranEveryLesson() {
		os.Exit(code)
	}
	used := map[string]bool{}
	var missing []string
	for _, set := range []map[string]bool{chineseTexts.must, chineseTexts.may} {
		for s := range set {
			k, _ := i18n.Key(s)
			used["text."+k] = true
			if !i18n.Get(i18n.Chinese).HasText(s) {
				missing = append(missing, k)
			}
		}
	}
	for _, id := range i18n.IDs(i18n.Chinese) {
		if strings.HasPrefix(id, "text.") && !used[id] && !usedByParts(id, used) {
			println("lessons.zh.toml: no lesson has the text", strings.TrimPrefix(id, "text."), "any longer: drop or update its translation")
			code = 1
		}
	}
	if f := os.Getenv("STUDIO_LESSON_TEXTS"); f != "" {
		sort.Strings(missing)
		_ = os.WriteFile(f, []byte(strings.Join(dedupe(missing), "\n")+"\n"), 0o644)
	}
	os.Exit(code)
}

// usedByParts: a key used as a part of a text joined by ": " (a versus
// row's "who: tools").
func usedByParts(id string, used map[string]bool) bool {
	part := strings.TrimPrefix(id, "text.")
	for u := range used {
		for _, p := range strings.Split(strings.TrimPrefix(u, "text."), ": ") {
			if p == part {
				return true
			}
		}
	}
	return false
}

func dedupe(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// ranEveryLesson: the run computed every lesson's table (not a -run that
// picked a few).
var computed = struct {
	sync.Mutex
	names map[string]bool
}{names: map[string]bool{}}

func ranEveryLesson() bool {
	computed.Lock()
	defer computed.Unlock()
	return len(computed.names) == len(registry)
}
