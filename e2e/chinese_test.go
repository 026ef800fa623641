package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The tests of issue 23: the studio in the articles' language.

// articleTerms are the words the Chinese articles themselves leave in
// English — names of things, not interface — and so may a Chinese page.
var articleTerms = []string{"Agent", "AI", "API", "task", "fork", "isolated", "token", "mode", "schema", "JSON", "OTLP",
	"OpenTelemetry", "OpenInference", "protobuf", "deepagents", "DeepAgents", "span", "URL", "ID", "compat", "delta", "snapshot",
	"approx", "scripted", "openai", "OpenAI", "Findings", "Verdict", "spec", "bug", "docs", "md", "ms", "JS",
	"ls", "delete", "glob", "grep"} // the tools, by their names

// englishLeft is a JavaScript expression listing each English word left
// on the page outside what is not interface: code (<code>, <pre>, a
// textarea's text), a run's data (marked translate="no": names,
// messages, receipts), and what is in another language on purpose (the
// switch to English names itself in English, lang="en"). Identifiers (with
// _, -, . or digits) are code too.
func englishLeft(tb *tab) []string {
	tb.t.Helper()
	return eval[[]string](tb, `(function(allowed){
		const ok = new Set(allowed);
		const skip = el => el.closest('code, pre, textarea, script, style, [translate="no"], [lang]:not([lang^="zh"])');
		const out = [];
		const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n = walker.nextNode(); n; n = walker.nextNode()) {
			const el = n.parentElement;
			if (!el || skip(el) || el.closest('[hidden]') || getComputedStyle(el).display === 'none') continue;
			for (const tok of n.textContent.match(/[A-Za-z][A-Za-z0-9_.\-\/]*/g) || []) {
				const w = tok.replace(/[.\-]+$/, '');
				if (w.length < 2 || /[_\-.\/0-9]/.test(w) || ok.has(w)) continue;
				out.push(w + ' in <' + el.tagName.toLowerCase() + (el.className ? '.' + el.className : '') + '> "' + n.textContent.trim().slice(0, 60) + '"');
			}
		}
		for (const el of document.querySelectorAll('[title], [placeholder], [aria-label]')) {
			if (skip(el)) continue;
			for (const a of ['title', 'placeholder', 'aria-label']) {
				const v = el.getAttribute(a) || '';
				if (/^[{\[]/.test(v)) continue; // a JSON example
				for (const tok of v.match(/[A-Za-z][A-Za-z0-9_.\-\/]*/g) || []) {
					if (tok.length < 2 || /[_\-.\/0-9]/.test(tok) || ok.has(tok)) continue;
					out.push(tok + ' in ' + a + '="' + v.slice(0, 60) + '"');
				}
			}
		}
		return out;
	})(`+jsList(articleTerms)+`)`)
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
}

// TestChinese: a browser that asks for Chinese gets the studio in Chinese —
// the home page, a lesson run from it with its table, and one of the
// lesson's sessions — with nothing of the interface left in English; the
// switch shows the same page in English and is remembered.
func TestChinese(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	if _, err := chromedp.Call(tb.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tb.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}}); err != nil {
		t.Fatal(err)
	}
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
