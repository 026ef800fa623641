package e2e

import (
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/delegationstudio/studio/internal/i18n"
)

// The tests of issue 23: the studio in the articles' language.

// articleTerms are the words the Chinese articles themselves leave in
// English — names of things, not interface — and so may a Chinese page.
var articleTerms = []string{"Agent", "AI", "API", "task", "fork", "isolated", "token", "mode", "schema", "JSON", "OTLP",
	"OpenTelemetry", "OpenInference", "protobuf", "deepagents", "DeepAgents", "span", "URL", "ID", "compat", "delta", "snapshot",
	"approx", "scripted", "openai", "OpenAI", "Findings", "Verdict", "spec", "bug", "docs", "md", "ms", "JS",
	"ls", "delete", "glob", "grep", // the tools, by their names
	"skills", "Schema", "FilesystemMiddleware", // a class of deepagents; a spec's field; JSON Schema, a standard's name
	"anthropic", "Anthropic", "Messages"} // the third article's provider and its API's name ("Messages API")

// englishLeft lists each English word left on the page outside what is
// not interface: code (<code>, <pre>, a textarea's text), a run's data
// (marked translate="no": names, prompts, receipts, tasks), and what is in
// another language on purpose (the switch to English names itself in
// English, lang="en"). Identifiers (with _, -, . or digits) are code too.
// A word of the page's data is data wherever it is quoted (an agent's name
// in a tree box's title, a task in its accessible name).
func englishLeft(tb *tab) []string {
	tb.t.Helper()
	return eval[[]string](tb, `(function(allowed){
		const ok = new Set(allowed);
		const skipSel = 'code, pre, textarea, script, style, noscript, [translate="no"], [lang]:not([lang^="zh"])';
		const skip = el => el.closest(skipSel);
		const words = t => t.match(/[A-Za-z][A-Za-z0-9_.\-\/]*/g) || [];
		const data = new Set();
		for (const el of document.querySelectorAll('code, pre, textarea, [translate="no"]')) {
			for (const w of words(el.textContent)) data.add(w.replace(/[.\-]+$/, ''));
		}
		const english = w => w.length >= 2 && !/[_\-.\/0-9]/.test(w) && !ok.has(w) && !data.has(w);
		const out = [];
		const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n = walker.nextNode(); n; n = walker.nextNode()) {
			const el = n.parentElement;
			if (!el || skip(el) || el.closest('[hidden]')) continue;
			for (const tok of words(n.textContent)) {
				const w = tok.replace(/[.\-]+$/, '');
				if (english(w)) out.push(w + ' in <' + el.tagName.toLowerCase() + '> "' + n.textContent.trim().slice(0, 60) + '"');
			}
		}
		for (const el of document.querySelectorAll('[title], [placeholder], [aria-label]')) {
			if (skip(el)) continue;
			for (const a of ['title', 'placeholder', 'aria-label']) {
				const v = el.getAttribute(a) || '';
				if (/^[{\[]/.test(v)) continue; // a JSON example
				for (const w of words(v)) {
					if (english(w)) out.push(w + ' in ' + a + '="' + v.slice(0, 60) + '"');
				}
			}
		}
		return out;
	})(`+jsList(articleTerms)+`)`)
}

// englishMessages lists the interface's English messages (their fixed
// parts, from the English catalogue) that the page still shows: a check
// of the words above that no data can hide.
func englishMessages(tb *tab) []string {
	tb.t.Helper()
	// The page's text without its data (code, a run's texts), and the
	// attributes a person reads.
	text := eval[string](tb, `(function(){
		const body = document.body.cloneNode(true);
		body.querySelectorAll('code, pre, textarea, script, style, noscript, [translate="no"], [lang]:not([lang^="zh"])').forEach(e => e.remove());
		return body.textContent + ' ' + [...body.querySelectorAll('[title],[aria-label],[placeholder]')].map(e => [e.getAttribute('title'), e.getAttribute('aria-label'), e.getAttribute('placeholder')].join(' ')).join(' ');
	})()`)
	var out []string
	for _, f := range englishFragments() {
		if strings.Contains(text, f) {
			out = append(out, f)
		}
	}
	return out
}

// englishFragments are the fixed parts of every English catalogue message
// of three words or more (its text between template actions and markup).
func englishFragments() []string {
	en, zh := i18n.Get(i18n.English), i18n.Get(i18n.Chinese)
	split := regexp.MustCompile(`\{\{[^}]*\}\}|<[^>]*>|&[a-z]+;`)
	var out []string
	for _, id := range i18n.IDs(i18n.English) {
		if strings.HasPrefix(id, "text.") {
			continue
		}
		msg := en.Raw(id)
		if msg == zh.Raw(id) {
			continue
		}
		for _, part := range split.Split(msg, -1) {
			part = strings.TrimSpace(part)
			if len(strings.Fields(part)) >= 3 {
				out = append(out, part)
			}
		}
	}
	return out
}

func jsList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = jsString(s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// inChinese checks the page is in Chinese — lang set, the switch offering
// English and keeping the page — and that no English interface is left,
// and keeps its screenshot.
func (tb *tab) inChinese(page string) {
	tb.t.Helper()
	if lang := eval[string](tb, `document.documentElement.lang`); lang != "zh-Hans" {
		tb.t.Fatalf("%s: <html lang=%q>, want zh-Hans", page, lang)
	}
	if href := eval[string](tb, `(document.querySelector('[data-testid="lang-switch"] a[data-lang="en"]') || {}).pathname || ''`); href != eval[string](tb, `location.pathname`) {
		tb.t.Errorf("%s: the switch to English goes to %q, not this page", page, href)
	}
	tb.screenshot(page)
	if left := englishLeft(tb); len(left) > 0 {
		tb.t.Errorf("%s in Chinese still shows English:\n  %s", page, strings.Join(left, "\n  "))
	}
	if left := englishMessages(tb); len(left) > 0 {
		tb.t.Errorf("%s in Chinese still shows the English interface's messages:\n  %s", page, strings.Join(left, "\n  "))
	}
}

// newChineseTab is a tab of a browser that asks for Chinese first
// (Accept-Language), as a reader in China's does.
func newChineseTab(t *testing.T) *tab {
	t.Helper()
	tb := newTab(t)
	if _, err := chromedp.Call(tb.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tb.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}}); err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestChinese: a browser that asks for Chinese gets the studio in Chinese —
// the home page, a lesson run from it with its table, and one of the
// lesson's sessions — with nothing of the interface left in English; the
// switch shows the same page in English and is remembered.
func TestChinese(t *testing.T) {
	s := startStudio(t)
	tb := newChineseTab(t)
	tb.navigate(s.URL + "/")
	tb.loaded("the home page", "/")
	tb.inChinese("home")

	tb.click("运行第一课", `[data-testid="start-here-run"]`)
	tb.loaded("the lesson's page", "/lessons/")
	tb.waitFor("the lesson's table", `!!document.querySelector('[data-testid="lesson-table"] [data-testid="checks"]')`,
		`(document.querySelector('[data-testid="lesson-run"]') || document.body).innerText.slice(0, 300)`)
	tb.inChinese("lesson")
	lesson := eval[string](tb, `location.pathname`)

	tb.click("the first variant's session", `[data-testid="runs"] a[href^="/sessions/"]`)
	tb.loaded("the session page", "/sessions/")
	tb.waitFor("the session is done", `(document.querySelector('#status') || {}).dataset?.status === 'done' || /完成/.test((document.querySelector('#status') || {}).textContent || '')`,
		`(document.querySelector('#status') || document.body).textContent.slice(0, 200)`)
	tb.inChinese("session")

	// The other pages too.
	call := eval[string](tb, `(document.querySelector('[data-testid="pane-call"]') || {}).pathname || ''`)
	if call == "" {
		t.Fatal("the session page links to no call")
	}
	for _, pg := range []struct{ name, path string }{
		{"call", call},
		{"lessons", "/lessons"}, {"compare", "/compare"}, {"teams", "/teams"}, {"team-editor", "/teams/new"},
		{"files", eval[string](tb, `location.pathname`) + "/files"},
	} {
		tb.navigate(s.URL + pg.path)
		tb.loaded(pg.name, pg.path)
		tb.inChinese(pg.name)
	}
	tb.navigate(s.URL + lesson)
	tb.click("the first variant's session", `[data-testid="runs"] a[href^="/sessions/"]`)
	tb.loaded("the session page", "/sessions/")

	// The switch: the same page in English, remembered on the next one.
	session := eval[string](tb, `location.pathname`)
	tb.click("English", `[data-testid="lang-switch"] a[data-lang="en"]`)
	tb.waitFor("the same page in English", `document.documentElement.lang === 'en' && location.pathname === `+jsString(session)+` && !location.search.includes('lang=')`,
		`document.documentElement.lang + ' ' + location.href`)
	tb.navigate(s.URL + lesson)
	if lang := eval[string](tb, `document.documentElement.lang`); lang != "en" {
		t.Fatalf("after switching to English, the next page is in %q: the choice is not remembered", lang)
	}
	if h := eval[string](tb, `document.querySelector('h1').textContent`); !strings.Contains(h, "One delegation") {
		t.Errorf("the lesson in English is titled %q", h)
	}
	tb.screenshot("lesson-en")
}

// TestChineseLive: a Chinese page of a session opened while it runs is
// patched in Chinese to its end — the counts of its files and calls too —
// with nothing of the interface left in English, and says what a reload
// in Chinese says.
func TestChineseLive(t *testing.T) {
	s := startStudio(t)
	tb := newChineseTab(t)
	id := s.start(t, `{"name": "live-zh", "prompt": "Write three notes.", "script": {"main": [
  {"content": "First.", "delay_ms": 1500, "tool_calls": [{"name": "write_file", "args": {"file_path": "/a.md", "content": "a"}}]},
  {"content": "Second.", "delay_ms": 300, "tool_calls": [{"name": "write_file", "args": {"file_path": "/b.md", "content": "b"}}]},
  {"content": "Third.", "delay_ms": 300, "tool_calls": [{"name": "write_file", "args": {"file_path": "/c.md", "content": "c"}}]},
  {"content": "Three notes written.", "delay_ms": 300}]}}`)
	tb.navigate(s.URL + "/sessions/" + id)
	tb.loaded("the running session's page", "/sessions/")
	if eval[bool](tb, `document.querySelectorAll('#files [data-file]').length > 0`) {
		t.Fatal("the page was opened after the first file was written: the scenario's first turn is too short")
	}
	tb.noReload()
	tb.waitFor("the session is done", `(document.querySelector('#status') || {}).dataset?.status === 'done'`,
		`(document.querySelector('#status') || document.body).textContent.slice(0, 200)`)
	if tb.reloaded() {
		t.Fatal("the page reloaded: it was not patched live")
	}
	const counts = `[...document.querySelectorAll('#files [data-files-count], [data-calls-count]')].map(e => e.textContent.trim()).join(' | ')`
	live := eval[string](tb, counts)
	tb.inChinese("session-live")
	tb.navigate(s.URL + "/sessions/" + id)
	tb.loaded("the session's page, reloaded", "/sessions/")
	if reload := eval[string](tb, counts); live != reload || !strings.Contains(live, "3 个文件") {
		t.Errorf("the live page's counts %q; a reload's %q (want 3 个文件 in both)", live, reload)
	}
}
