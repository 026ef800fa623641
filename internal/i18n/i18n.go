// Package i18n is the studio's two languages, English and Simplified
// Chinese: one catalogue per language (locales/en.toml, locales/zh.toml,
// read with go-i18n, generated as Go ahead of time (catalogue_gen.go), plural forms by CLDR's rules), the lessons' texts in
// Chinese (locales/lessons.zh.toml, keyed by their English text, which is
// written beside each lesson's code), the choice of a language from a
// request, and numbers, dates and ages as each language writes them.
package i18n

import (
	"context"
	"fmt"
	"html"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
)

// The languages, by the code the studio uses for each (in a cookie, a
// link, the lang attribute, --lang).
const (
	English = "en"
	Chinese = "zh"
)

// Codes are the languages in the order the switch offers them.
var Codes = []string{English, Chinese}

var tags = map[string]language.Tag{English: language.English, Chinese: language.SimplifiedChinese}

// Autonym is each language's name in itself, as a switch names it.
var Autonym = map[string]string{English: "English", Chinese: "中文"}

// catalogueFile is one of locales/*.toml as go-i18n parses it, generated
// ahead of time (catalogue_gen.go, by go generate ./internal/i18n; a test
// fails when it is stale), so that no process parses TOML and a command
// that shows no catalogue message pays nothing for them.
type catalogueFile struct {
	name, code, tag string
	messages        []goi18n.Message
}

// bundle holds the catalogues' messages, made on first use.
var bundle = sync.OnceValue(func() *goi18n.Bundle {
	b := goi18n.NewBundle(language.English)
	for i := range catalogueFiles {
		f := &catalogueFiles[i]
		msgs := make([]*goi18n.Message, len(f.messages))
		for j := range f.messages {
			msgs[j] = &f.messages[j]
		}
		if err := b.AddMessages(language.MustParse(f.tag), msgs...); err != nil {
			panic(fmt.Sprintf("i18n: %s: %v", f.name, err)) // a broken catalogue is a bug, caught by this package's tests
		}
	}
	return b
})

var matcher = sync.OnceValue(func() language.Matcher {
	return language.NewMatcher([]language.Tag{language.English, language.SimplifiedChinese})
})

// Lang is one language's localizer: catalogue messages, lesson texts,
// numbers and dates.
type Lang struct {
	Code string
	loc  *goi18n.Localizer
	// fast are the catalogue's messages whose templates are only text and
	// {{.Field}}s (nearly all), by id: written without text/template,
	// which a live page's patches would otherwise spend a sixth of their
	// time in. The others go through go-i18n.
	fast map[string]*fastMessage
}

// langs are the languages by code, each made on first use: a process
// that writes no catalogue message (run, validate, export, --version)
// makes none.
var langs = map[string]func() *Lang{English: langOf(English), Chinese: langOf(Chinese)}

func langOf(code string) func() *Lang {
	return sync.OnceValue(func() *Lang {
		return &Lang{Code: code, loc: goi18n.NewLocalizer(bundle(), tags[code].String()), fast: fastMessages(code)}
	})
}

// Get is the language of that code; English for any other.
func Get(code string) *Lang {
	if l, ok := langs[code]; ok {
		return l()
	}
	return langs[English]()
}

// Tag is a language's BCP 47 tag, for lang attributes and headers:
// "en", "zh-Hans".
func Tag(code string) string { return tags[Get(code).Code].String() }

// Valid says whether code names one of the studio's languages.
func Valid(code string) bool { _, ok := langs[code]; return ok }

// Negotiate picks the language for an Accept-Language header: Chinese for
// any Chinese (zh, zh-CN, zh-Hans, zh-TW: the studio has Simplified
// Chinese only, which a reader of Traditional reads better than English),
// else English.
func Negotiate(acceptLanguage string) string {
	prefs, _, err := language.ParseAcceptLanguage(acceptLanguage)
	if err != nil || len(prefs) == 0 {
		return English
	}
	for _, p := range prefs {
		base, _ := p.Base()
		switch base.String() {
		case "zh":
			return Chinese
		case "en":
			return English
		}
	}
	_, i, conf := matcher().Match(prefs...)
	if conf == language.No || i != 1 {
		return English
	}
	return Chinese
}

type ctxKey struct{}

// With returns ctx carrying the language.
func With(ctx context.Context, l *Lang) context.Context { return context.WithValue(ctx, ctxKey{}, l) }

// From is the language ctx carries; English when it carries none.
func From(ctx context.Context) *Lang {
	if ctx != nil {
		if l, ok := ctx.Value(ctxKey{}).(*Lang); ok && l != nil {
			return l
		}
	}
	return Get(English)
}

// T is the catalogue's message id, with its template's data given as
// name, value pairs: T("run.started", "Age", "3m ago"). A message missing
// from the catalogue is a bug (this package's tests check that every id
// the code uses exists in both languages); it shows as its id.
func (l *Lang) T(id string, kv ...any) string {
	if m := l.fast[id]; m != nil {
		if out, ok := m.write(plural.Other, kv, "", ""); ok {
			return out
		}
	}
	return l.slowT(id, kv...)
}

// slowT is T through go-i18n, as every message was written before the
// fast path (which its test compares with it).
func (l *Lang) slowT(id string, kv ...any) string {
	out, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: data(kv)})
	if err != nil {
		return id
	}
	return out
}

// N is the plural message id for count n: "1 agent", "3 agents",
// "3 个 Agent". Its template has .Count, written as the language writes
// numbers, and the other data given as pairs.
func (l *Lang) N(id string, n int, kv ...any) string {
	if m := l.fast[id]; m != nil {
		if out, ok := m.write(plural.Cardinal.MatchPlural(tags[l.Code], abs(n), 0, 0, 0, 0), kv, "Count", l.Num(n)); ok {
			return out
		}
	}
	return l.slowN(id, n, kv...)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// slowN is N through go-i18n.
func (l *Lang) slowN(id string, n int, kv ...any) string {
	d := data(kv)
	if d == nil {
		d = map[string]any{}
	}
	d["Count"] = l.Num(n)
	out, err := l.loc.Localize(&goi18n.LocalizeConfig{MessageID: id, PluralCount: n, TemplateData: d})
	if err != nil {
		return id
	}
	return out
}

// Raw is a message as the catalogue writes it, its template unexecuted
// (the "other" form of a plural); "" when there is none.
func (l *Lang) Raw(id string) string {
	for _, f := range catalogueMessages(l.Code) {
		if m, ok := f[id]; ok {
			if m.Other != "" {
				return m.Other
			}
			return m.One
		}
	}
	return ""
}

// HTML is a catalogue message that holds markup of its own (<code>,
// <em>, <a>): the catalogue is ours and trusted, the data is not and is
// escaped.
func (l *Lang) HTML(id string, kv ...any) string {
	esc := make([]any, len(kv))
	for i, v := range kv {
		if i%2 == 1 {
			if d, ok := v.(Data); ok {
				v = `<span translate="no">` + html.EscapeString(string(d)) + `</span>`
			} else {
				v = html.EscapeString(fmt.Sprint(v))
			}
		}
		esc[i] = v
	}
	return l.T(id, esc...)
}

// Data is a value of a message that is a run's data, not the interface —
// an agent's name, a task — which HTML marks as such (translate="no"), so
// that no language translates it and a reader's tools leave it alone.
type Data string

func data(kv []any) map[string]any {
	if len(kv) == 0 {
		return nil
	}
	d := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		d[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return d
}

// Num writes an integer as the language does: 12,345 in both (CLDR's
// decimal pattern, #,##0, is the same for en and zh-Hans; the test holds
// it to x/text's printer, which a page's many numbers made a cost).
func (l *Lang) Num(n int) string { return Grouped(n) }

// Grouped writes an integer with its digits in threes: 12,345, -1,234,567.
// The one rule of digit grouping: the pages' (Num), the CLI's
// (view.Thousands).
func Grouped(n int) string {
	if n > -1000 && n < 1000 {
		return strconv.Itoa(n)
	}
	digits := strconv.Itoa(n)
	sign := ""
	if n < 0 {
		sign, digits = "-", digits[1:]
	}
	var b strings.Builder
	b.Grow(len(sign) + len(digits) + len(digits)/3)
	b.WriteString(sign)
	head := len(digits) % 3
	if head == 0 {
		head = 3
	}
	b.WriteString(digits[:head])
	for i := head; i < len(digits); i += 3 {
		b.WriteByte(',')
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// Excerpt is a value quoted in a message: whole when it has at most n
// characters, else its first n and its full length, "/aaaa…(102,400
// characters)", so that a message says which value without repeating a
// long one. The one rule of quoting a long value (schema's messages and
// field paths, the scenario's checks). It reads no further than it keeps,
// except to count.
func Excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, count := 0, 0
	for i < len(s) && count < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	if i >= len(s) {
		return s
	}
	return s[:i] + "…(" + Grouped(count+utf8.RuneCountInString(s[i:])) + " characters)"
}

// Date writes a day: "2 Dec 2026", "2026年12月2日".
func (l *Lang) Date(t time.Time) string {
	if l.Code == Chinese {
		return fmt.Sprintf("%d年%d月%d日", t.Year(), int(t.Month()), t.Day())
	}
	return t.Format("2 Jan 2006")
}

// DateTime writes a day and a time: "2 Dec 2026, 14:05", "2026年12月2日 14:05".
func (l *Lang) DateTime(t time.Time) string {
	if l.Code == Chinese {
		return l.Date(t) + " " + t.Format("15:04")
	}
	return l.Date(t) + ", " + t.Format("15:04")
}

// Age says how long ago t was, briefly: "3m ago", "3 分钟前"; a date past
// two days.
func (l *Lang) Age(t, now time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return l.T("age.seconds", "N", int(d.Seconds()))
	case d < time.Hour:
		return l.T("age.minutes", "N", int(d.Minutes()))
	case d < 48*time.Hour:
		return l.T("age.hours", "N", int(d.Hours()))
	}
	return l.Date(t)
}

// figure is a number or a quoted text in a lesson's English text: what
// Text carries over into the translation unchanged, by its place ({1},
// {2}, …), so that one translation serves every figure a run computes.
var figure = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"(?:[^"\\]|\\.)*"|“[^”]*”|\d+(?:[.,]\d+)*`) })

// Key is the catalogue key of a lesson's English text: its figures and
// quotations as {1}, {2}, …, and those figures in order.
func Key(english string) (string, []string) {
	var figs []string
	key := figure().ReplaceAllStringFunc(english, func(m string) string {
		figs = append(figs, m)
		return "{" + strconv.Itoa(len(figs)) + "}"
	})
	return key, figs
}

var placeholder = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\{(\d+)\}`) })

// Text is a lesson's text (a title, a heading, a note, a check) in the
// language: in Chinese the catalogue's translation of its key with the
// text's own figures put back; the English text itself when the language
// is English or the catalogue has none (a table cell holding a run's data
// has none, and is data, not interface).
func (l *Lang) Text(english string) string {
	if l.Code == English || english == "" {
		return english
	}
	if out, ok := l.lookup(english); ok {
		return out
	}
	// "row: column", as a lesson names a cell: each part on its own.
	if a, b, ok := strings.Cut(english, ": "); ok {
		ta, oka := l.lookup(a)
		tb, okb := l.lookup(b)
		if oka || okb {
			if !oka {
				ta = a
			}
			if !okb {
				tb = b
			}
			return ta + l.T("punct.colon") + tb
		}
	}
	return english
}

// HasText says whether the catalogue translates the English text.
func (l *Lang) HasText(english string) bool {
	_, ok := l.lookup(english)
	return ok
}

func (l *Lang) lookup(english string) (string, bool) {
	key, figs := Key(english)
	msg, ok := "", false
	if m := l.fast["text."+key]; m != nil {
		msg, ok = m.write(plural.Other, nil, "", "")
	}
	if !ok {
		var err error
		if msg, err = l.loc.Localize(&goi18n.LocalizeConfig{MessageID: "text." + key}); err != nil {
			return "", false
		}
	}
	return placeholder().ReplaceAllStringFunc(msg, func(m string) string {
		i, _ := strconv.Atoi(m[1 : len(m)-1])
		if i < 1 || i > len(figs) {
			return m
		}
		return figs[i-1]
	}), true
}

// IDs are the catalogue's message ids in a language, sorted (the lesson
// texts' keys included, "text." before them).
func IDs(code string) []string {
	var out []string
	for _, f := range catalogueMessages(code) {
		for id := range f {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

var parsed = sync.OnceValue(func() map[string][]map[string]*goi18n.Message {
	out := map[string][]map[string]*goi18n.Message{}
	for i := range catalogueFiles {
		f := &catalogueFiles[i]
		m := make(map[string]*goi18n.Message, len(f.messages))
		for j := range f.messages {
			m[f.messages[j].ID] = &f.messages[j]
		}
		out[f.code] = append(out[f.code], m)
	}
	return out
})

// catalogueMessages are each of a language's files, message by id.
func catalogueMessages(code string) []map[string]*goi18n.Message { return parsed()[code] }

// StopKey is the catalogue's id for why a session or agent was stopped
// from outside, from its stopped_by code (delegation.Stop*); a code it does
// not know reads as stopped from outside.
func StopKey(code string) string {
	switch code {
	case "user":
		return "stop.user"
	case "shutdown":
		return "stop.shutdown"
	case "signal":
		return "stop.signal"
	case "lapsed":
		return "stop.lapsed"
	}
	return "stop.outside"
}

// ErrorKey is the catalogue's id for an error code with words of its own:
// why a session failed, from the code its session.finished carries
// (delegation.EFULL: the store's disk filled), or why a request was refused
// (delegation.ESTOPPING); "" for a code with none, so the stored error is
// said instead.
func ErrorKey(code string) string {
	switch code {
	case "full":
		return "error.disk_full"
	case "read_only":
		return "error.read_only"
	case "stopping":
		return "error.stopping"
	}
	return ""
}
