package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/delegationstudio/studio/internal/lessons"
)

// The tests of issue 13: the studio's flows as a person uses them, each
// finding of the issue a test.

// noReload marks the page: a reload or a navigation drops the mark.
func (tb *tab) noReload() { eval[bool](tb, `window.__noReload = true`) }

func (tb *tab) reloaded() bool { return !eval[bool](tb, `window.__noReload === true`) }

// click clicks the element a CSS selector finds.
func (tb *tab) click(what, sel string) {
	tb.t.Helper()
	tb.do(what, chromedp.Click(chromedp.CSS(sel)))
}

// loaded waits for a page at a path to be loaded.
func (tb *tab) loaded(what, pathPrefix string) {
	tb.t.Helper()
	tb.waitFor(what, `location.pathname.startsWith(`+jsString(pathPrefix)+`) && document.readyState === 'complete'`, `location.href`)
}

// viewport sets the page's size.
func (tb *tab) viewport(w, h int64) {
	tb.t.Helper()
	tb.do(fmt.Sprintf("resize to %dx%d", w, h), chromedp.EmulateViewport(w, h))
}

// TestCompareUpdatesWithoutReload (finding 1): "Run in both modes" lands on
// the comparison while both sides run; it follows them to their end
// without a reload, then shows the differences.
func TestCompareUpdatesWithoutReload(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/")
	tb.click("Run in both modes on one-delegation", `[data-testid="both-one-delegation"]`)
	tb.loaded("the comparison is open", "/compare")
	tb.noReload()
	running := eval[bool](tb, `!!document.querySelector('[data-testid="compare"][data-live-fragment]')`)
	if !running {
		t.Logf("both sides were done before the page opened (a slow machine): nothing to follow")
	}
	tb.screenshot("1-running")
	tb.waitFor("both sides are done and the page stops following them",
		`document.querySelectorAll('[data-testid^="side-"] [data-testid="status"]').length === 2 &&
		 [...document.querySelectorAll('[data-testid^="side-"] [data-testid="status"]')].every(e => e.textContent.trim() === 'done') &&
		 !document.querySelector('[data-testid="compare"][data-live-fragment]')`,
		`[...document.querySelectorAll('[data-testid="status"]')].map(e => e.textContent).join(' ')`)
	if tb.reloaded() {
		t.Fatal("the page reloaded to show the end: it must follow the sessions in place")
	}
	type figures struct {
		Delta, Pct string
		Differs    bool
		Receipts   int
		Share      string
	}
	f := eval[figures](tb, `(() => {
  const row = document.querySelector('[data-figure="tokens"]');
  return {
    Delta: row.querySelector('[data-testid="delta"]').textContent.trim(),
    Pct: row.querySelector('[data-testid="pct"]').textContent.trim(),
    Differs: row.classList.contains('differs'),
    Receipts: document.querySelectorAll('[data-testid="receipt-pair"]').length,
    Share: document.querySelector('tr[data-agent="general-purpose"] [data-testid="share-b"]').textContent.trim(),
  };
})()`)
	if !strings.HasPrefix(f.Delta, "+") || !strings.HasSuffix(f.Pct, "%") || !f.Differs {
		t.Errorf("the input tokens of the fork run show delta %q, %q, highlighted %v; want a +N, a percentage, highlighted", f.Delta, f.Pct, f.Differs)
	}
	if f.Receipts == 0 || f.Share == "0" || f.Share == "—" {
		t.Errorf("receipts %d, the fork's inherited share %q", f.Receipts, f.Share)
	}
	tb.screenshot("2-done")

	// Compare is a page of its own: in the nav, a picker without ids.
	tb.click("Compare in the nav", `header nav a[href="/compare"]`)
	tb.loaded("the picker", "/compare")
	tb.waitFor("the picker offers the both-modes run", `document.querySelector('[data-testid="compare-pairs"] a') && document.querySelector('nav [aria-current="page"]').textContent === 'Compare'`, `document.body.innerText.slice(0, 300)`)
	tb.screenshot("3-picker")
}

// TestLessonKeepsItsTable (finding 2): a lesson's run shows its progress
// in place, its table when done, and the table is still there after going
// away and coming back.
func TestLessonKeepsItsTable(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/lessons/receipt")
	tb.waitFor("the lesson says it was not run", `document.querySelector('[data-testid="not-run"]')`, `document.body.innerText.slice(0, 300)`)
	tb.click("Run the lesson", `[data-testid="run-lesson"]`)
	tb.waitFor("the lesson's page shows its run", `location.search.startsWith('?run=') && document.readyState === 'complete'`, `location.href`)
	tb.noReload()
	if eval[bool](tb, `!!document.querySelector('meta[http-equiv="refresh"]')`) {
		t.Fatal("the running lesson page refreshes itself")
	}
	tb.waitFor("the table appears in place", `document.querySelector('[data-testid="table-computed"]') && document.querySelector('[data-testid="checks"]')`,
		`document.querySelector('[data-testid="lesson-run"]').innerText.slice(0, 300)`)
	if tb.reloaded() {
		t.Fatal("the page reloaded to show the table")
	}
	tb.screenshot("1-table")
	tb.navigate(s.URL + "/")
	tb.navigate(s.URL + "/lessons/receipt")
	tb.waitFor("the table is still there", `document.querySelector('[data-testid="table-computed"]') && !document.querySelector('[data-testid="not-run"]')`,
		`document.body.innerText.slice(0, 300)`)

	// The home card's Run runs the whole lesson, which the lesson page shows.
	tb.navigate(s.URL + "/")
	tb.click("Run on the entry-cost card", `[data-testid="start-entry-cost"]`)
	tb.loaded("the entry-cost lesson", "/lessons/entry-cost")
	tb.waitFor("its three variants ran and the table is computed",
		`document.querySelectorAll('[data-testid="lesson-run"] [data-variant] a').length === 3 && document.querySelector('[data-testid="table-computed"]')`,
		`document.querySelector('[data-testid="lesson-run"]').innerText.slice(0, 400)`)
	tb.screenshot("2-entry-cost")
}

// TestNoUnexpectedNoteOnAnyLesson (finding 3): every lesson's sessions show
// exactly the notes the lesson declares, grouped by kind.
func TestNoUnexpectedNoteOnAnyLesson(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	all := lessons.Course()
	runs := map[string]string{}
	for _, l := range all { // every lesson starts, then each is read
		tb.navigate(s.URL + "/lessons/" + l.Name)
		tb.click("Run "+l.Name, `[data-testid="run-lesson"]`)
		tb.loaded(l.Name+"'s page", "/lessons/"+l.Name)
		tb.waitFor(l.Name+"'s run is shown", `location.search.startsWith('?run=')`, `location.href`)
		runs[l.Name] = eval[string](tb, `location.href`)
	}
	for _, l := range all {
		tb.navigate(runs[l.Name])
		tb.waitFor(l.Name+" is done", `document.querySelector('[data-testid="lesson-run"]') && !document.querySelector('[data-testid="lesson-run"][data-live-fragment]')`,
			`document.querySelector('[data-testid="lesson-run"]').innerText.slice(0, 300)`)
		type variant struct{ Name, URL string }
		vs := eval[[]variant](tb, `[...document.querySelectorAll('[data-testid="lesson-run"] [data-variant]')].map(li => ({Name: li.dataset.variant, URL: (li.querySelector('a') || {}).href || ''}))`)
		for _, v := range vs {
			if v.URL == "" {
				t.Errorf("%s/%s: no session", l.Name, v.Name)
				continue
			}
			tb.navigate(v.URL)
			tb.waitFor("the session page of "+l.Name+"/"+v.Name, `document.querySelector('[data-testid="notes"]') && !document.querySelector('.session[data-running]')`, `location.href`)
			type group struct {
				Kind  string
				Count int
			}
			groups := eval[[]group](tb, `[...document.querySelectorAll('[data-testid="notes"] [data-note-kind]')].map(li => ({Kind: li.dataset.noteKind, Count: +li.dataset.count}))`)
			var got []string
			for _, g := range groups {
				for range g.Count {
					got = append(got, g.Kind)
				}
			}
			want := slices.Clone(l.Notes[v.Name])
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s/%s shows the notes %q; the lesson expects %q", l.Name, v.Name, got, want)
				tb.screenshot("notes-" + l.Name + "-" + v.Name)
			}
		}
	}
}

// TestErrorSummaryInView (finding 4): a bad scenario pasted at the bottom
// of the home page is answered where the eye is; an OTLP file given as a
// scenario is named in one sentence.
func TestErrorSummaryInView(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.viewport(1440, 900)
	for _, c := range []struct{ name, doc, want string }{
		{"bad-scenario", `{"name": "x", "subagents": [{"name": "a", "description": "d", "mode": "shared"}]}`, "problem"},
		{"otlp", `{"resourceSpans": [{"resource": {}, "scopeSpans": []}]}`, "OTLP file"},
	} {
		tb.navigate(s.URL + "/")
		tb.do("paste "+c.name, chromedp.SetValue(chromedp.CSS(`#scenario-text`), c.doc))
		tb.do("scroll to the form", chromedp.ScrollIntoView(chromedp.CSS(`[data-testid="scenario-form"] button[type=submit]`)))
		tb.click("Start the session", `[data-testid="scenario-form"] button[type=submit]`)
		tb.loaded("the page came back", "/sessions")
		tb.waitFor("the error summary is in the viewport and has the focus", `(() => {
  const el = document.getElementById('error-summary');
  if (!el) return false;
  const r = el.getBoundingClientRect();
  return r.top >= 0 && r.bottom <= innerHeight && document.activeElement === el;
})()`, `(document.getElementById('error-summary') || {}).outerHTML + ' scrollY ' + scrollY`)
		if text := eval[string](tb, `document.getElementById('error-summary').innerText`); !strings.Contains(text, c.want) {
			t.Errorf("%s: the summary says %q; want %q in it", c.name, text, c.want)
		}
		if got := eval[string](tb, `document.getElementById('scenario-text').value`); got != c.doc {
			t.Errorf("%s: the scenario textarea holds %q; want what was pasted", c.name, got)
		}
		tb.screenshot(c.name)
	}
	// The summary's link goes to the field.
	tb.navigate(s.URL + "/")
	tb.do("paste a bad scenario", chromedp.SetValue(chromedp.CSS(`#scenario-text`), `{"name": "x"}`))
	tb.click("Start the session", `[data-testid="scenario-form"] button[type=submit]`)
	tb.loaded("the page came back", "/sessions")
	tb.waitFor("a summary links to the scenario", `document.querySelector('#error-summary a[href="#scenario-text"]')`, `document.body.innerText.slice(0, 300)`)
	tb.click("the summary's link", `#error-summary a[href="#scenario-text"]`)
	tb.waitFor("the textarea is in view", `(() => { const r = document.getElementById('scenario-text').getBoundingClientRect(); return r.top < innerHeight && r.bottom > 0; })()`, `String(scrollY)`)
}

// TestTeamFieldErrorsClearAsTyped (finding 5): the team editor checks as
// one types: an error shows at its field, goes when the field is fixed,
// the last good preview stays, and a save says it saved.
func TestTeamFieldErrorsClearAsTyped(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/teams/new")
	tb.waitFor("the form", `document.querySelector('#team-preview [data-testid="task-description"]')`, describeForm)
	addSubagent(tb, 1)
	tb.noReload()
	typeField(tb, "subagents[0].name", "helper")
	typeField(tb, "subagents[0].description", "Helps with anything.")
	tb.waitFor("the preview lists the helper", `document.querySelector('#team-preview [data-testid="task-description"]').textContent.includes('- helper: Helps with anything.')`, describePreview)
	tb.do("pick fork", chromedp.SendKeys(teamInput("subagents[0].mode"), "f"))
	tb.waitFor("a fork's tool boxes are off", `[...document.querySelectorAll('[name="subagents[0].tools"]')].every(c => c.disabled) && !document.querySelector('[data-key="subagents[0].tools"] [data-fork-tools]').hidden`, describeForm)
	typeField(tb, "subagents[0].skills", "web")
	tb.waitFor("the skills error shows at its field, the banner counts it, the last preview stays",
		`(() => {
  const ul = document.querySelector('ul.field-errors[data-field="subagents[0].skills"]');
  return ul && ul.closest('.field').querySelector('[name="subagents[0].skills"]') &&
    document.querySelector('#team-notice').textContent.includes('1 problem') &&
    document.querySelector('#team-preview [data-testid="task-description"]').textContent.includes('- helper: Helps with anything.') &&
    !document.querySelector('[data-stale-note]').hidden;
})()`, describeForm)
	tb.screenshot("1-error")
	typeField(tb, "subagents[0].skills", "")
	tb.waitFor("the error is gone as the field is fixed, and the banner with it",
		`!document.querySelector('ul.field-errors') && document.querySelector('#team-notice').textContent.trim() === '' && document.querySelector('[data-stale-note]').hidden`, describeForm)
	if tb.reloaded() {
		t.Fatal("the page reloaded while checking")
	}
	tb.click("Save", `[data-testid="save"]`)
	tb.waitFor("the save is confirmed", `document.querySelector('[data-testid="saved"]')`, `document.body.innerText.slice(0, 300)`)
	tb.screenshot("2-saved")
}

// mainPages are the pages a person opens, each a path.
func mainPages(t *testing.T, s *studio, tb *tab) map[string]string {
	t.Helper()
	pages := map[string]string{"home": "/", "lessons": "/lessons", "teams": "/teams", "team-new": "/teams/new", "compare-picker": "/compare"}
	// A lesson with a run (its table), its sessions, and their comparison.
	tb.navigate(s.URL + "/lessons/order-number")
	tb.click("Run the lesson", `[data-testid="run-lesson"]`)
	tb.loaded("the lesson's run", "/lessons/order-number")
	tb.waitFor("the lesson's table", `document.querySelector('[data-testid="table-computed"]')`, `document.body.innerText.slice(0, 300)`)
	pages["lesson"] = eval[string](tb, `location.pathname + location.search`)
	session := eval[string](tb, `new URL(document.querySelector('[data-testid="lesson-run"] [data-variant] a').href).pathname`)
	pages["session"] = session
	pages["session-a2"] = session + "?agent=a2"
	tb.navigate(s.URL + "/lessons/receipt")
	tb.click("Run the receipt lesson", `[data-testid="run-lesson"]`)
	tb.loaded("the receipt lesson", "/lessons/receipt")
	tb.waitFor("its comparison link", `document.querySelector('[data-testid="compare-runs"]') && document.querySelector('[data-testid="table-computed"]')`, `document.body.innerText.slice(0, 300)`)
	pages["compare"] = eval[string](tb, `new URL(document.querySelector('[data-testid="compare-runs"]').href).pathname + new URL(document.querySelector('[data-testid="compare-runs"]').href).search`)
	tb.navigate(s.URL + "/teams")
	tb.click("Clone order-number", `[data-testid="clone-order-number"]`)
	tb.loaded("the team", "/teams/")
	pages["team"] = eval[string](tb, `location.pathname`)
	return pages
}

// TestNoPageScrollsSideways (finding 6): at 360, 390 and 414 px no main
// page is wider than the screen; the headers wrap. Every page is kept as a
// screenshot at 1440×900 and 390×844.
func TestNoPageScrollsSideways(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	pages := mainPages(t, s, tb)
	names := make([]string, 0, len(pages))
	for n := range pages {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, size := range []struct{ w, h int64 }{{1440, 900}, {390, 844}, {360, 740}, {414, 896}} {
		tb.viewport(size.w, size.h)
		for _, n := range names {
			tb.navigate(s.URL + pages[n])
			tb.waitFor(n+" is loaded", `document.readyState === 'complete'`, `location.href`)
			// innerWidth, as the issue asks; and the width left beside a
			// scroll bar, which headless Chromium shows and a phone does not.
			type width struct{ Scroll, Inner, Client int }
			w := eval[width](tb, `({Scroll: document.documentElement.scrollWidth, Inner: innerWidth, Client: document.documentElement.clientWidth})`)
			if w.Scroll > w.Inner || w.Scroll > w.Client {
				wide := eval[string](tb, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 8).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right)).join('; ')`)
				t.Errorf("%s at %d px: the page is %d px wide, the screen %d (%s)", n, size.w, w.Scroll, w.Client, wide)
			}
			if size.w == 390 || size.w == 1440 {
				tb.screenshot(fmt.Sprintf("%dx%d-%s", size.w, size.h, n))
			}
		}
	}
	// The session page's header keeps its title readable: its buttons wrap
	// below it rather than squeeze it.
	tb.viewport(390, 844)
	tb.navigate(s.URL + pages["session"])
	if w := eval[int](tb, `Math.round(document.querySelector('.session .head h1').getBoundingClientRect().width)`); w < 250 {
		t.Errorf("at 390 px the session's title is %d px wide: the header squeezes it", w)
	}
}

// TestStopAsksFirst (finding 7): Stop is not the primary action and asks
// before stopping; once stopped, the main node and the session agree, and
// the page says why at the top.
func TestStopAsksFirst(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	id := s.start(t, twoHelpers(20000))
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the session runs", `document.querySelector('.session[data-running] [data-testid="stop"] button.danger')`, describeStatus)
	// A declined confirmation stops nothing.
	eval[bool](tb, `(window.confirm = () => false, true)`)
	tb.click("Stop, declined", `[data-testid="stop"] button`)
	if eval[string](tb, `document.querySelector('[data-testid="status"]').textContent.trim()`) != "running" {
		t.Fatal("a declined Stop stopped the session")
	}
	eval[bool](tb, `(window.confirm = () => true, true)`)
	tb.click("Stop, confirmed", `[data-testid="stop"] button`)
	tb.loaded("the session page after the stop", "/sessions/")
	tb.waitFor("the session is interrupted, its main node too, and the page says why", `(() => {
  const st = document.querySelector('[data-testid="status"]').textContent.trim();
  const main = document.querySelector('#tree [data-testid="node-main"]');
  const why = document.querySelector('[data-testid="session-error"]');
  return st === 'interrupted' && main && main.getAttribute('class').includes('node-interrupted') && why && why.textContent.trim() !== '';
})()`, describeStatus)
	tb.screenshot("stopped")
}

// TestTeamClosesTheLoop (finding 5): a lesson cloned into a team is named
// apart from it; the team's page lists its runs and, once the lesson has
// run, compares a run with it; a team without a script gets a skeleton to
// fill in, and then runs.
func TestTeamClosesTheLoop(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/teams")
	tb.click("Clone order-number", `[data-testid="clone-order-number"]`)
	tb.loaded("the team", "/teams/")
	team := eval[string](tb, `location.pathname`)
	if name := eval[string](tb, `document.querySelector('[name="name"]').value`); name != "order-number-team" {
		t.Fatalf("the clone is named %q: its sessions could not be told from the lesson's", name)
	}
	tb.click("Run the team", `[data-testid="run"]`)
	tb.loaded("the team's session", "/sessions/")
	tb.waitFor("the session is done", `document.querySelector('[data-testid="status"]').textContent.trim() === 'done'`, describeStatus)
	tb.navigate(s.URL + team)
	tb.waitFor("the team lists its run and says how to compare it with its lesson",
		`document.querySelectorAll('[data-testid="team-run"]').length === 1 && document.querySelector('[data-testid="source-not-run"]')`,
		`document.querySelector('[data-testid="team-runs"]').innerText`)
	tb.click("run the lesson first", `[data-testid="source-not-run"]`)
	tb.loaded("the lesson", "/lessons/order-number")
	tb.click("Run the lesson", `[data-testid="run-lesson"]`)
	tb.waitFor("the lesson's table", `location.search.startsWith('?run=') && document.querySelector('[data-testid="table-computed"]')`, `document.body.innerText.slice(0, 300)`)
	tb.navigate(s.URL + team)
	tb.click("compare with the lesson", `[data-testid="compare-source"]`)
	tb.loaded("the comparison", "/compare")
	type sides struct{ A, B string }
	tb.waitFor("the lesson's session beside the team's", `[...document.querySelectorAll('[data-testid="side-a"] [data-testid="status"], [data-testid="side-b"] [data-testid="status"]')].filter(e => e.textContent.trim() === 'done').length === 2`, `document.body.innerText.slice(0, 300)`)
	if got := eval[sides](tb, `({A: document.querySelector('[data-testid="side-a"] h2 a').textContent, B: document.querySelector('[data-testid="side-b"] h2 a').textContent})`); got != (sides{"order-number", "order-number-team"}) {
		t.Errorf("compared %+v; want the lesson's session beside the team's", got)
	}
	tb.screenshot("1-compare")

	// A team of its own, with no script: a skeleton, then a run.
	tb.navigate(s.URL + "/teams/new")
	tb.waitFor("the form", `document.querySelector('#team-preview [data-testid="task-description"]')`, describeForm)
	typeField(tb, "name", "e2e-solo")
	typeField(tb, "prompt", "Have the helper say hello.")
	addSubagent(tb, 1)
	typeField(tb, "subagents[0].name", "helper")
	typeField(tb, "subagents[0].description", "Says hello.")
	tb.noReload()
	tb.click("Save", `[data-testid="save"]`)
	tb.waitFor("saved, with no script", `window.__noReload !== true && document.readyState === 'complete' && document.querySelector('[data-testid="saved"]')`, describeForm)
	tb.click("Run", `[data-testid="run"]`)
	tb.waitFor("the page says a script is needed", `document.readyState === 'complete' && document.querySelector('[data-testid="needs-script"] [data-testid="skeleton"]')`, describeForm)
	if h := eval[string](tb, `document.querySelector('#error-summary h2').textContent`); !strings.Contains(h, "nothing was run") {
		t.Errorf("the refused run is headed %q: it must say the run did not start, not that nothing was saved", h)
	}
	tb.screenshot("2-needs-script")
	tb.noReload()
	tb.click("Fill in a script skeleton", `[data-testid="needs-script"] [data-testid="skeleton"]`)
	tb.waitFor("the script holds a turn for main and for the helper", `window.__noReload !== true && document.readyState === 'complete' && (() => {
  try { const s = JSON.parse(document.querySelector('[name="script"]').value); return !!s.main && !!s.helper; } catch (e) { return false; }
})()`, `document.querySelector('[name="script"]').value`)
	tb.noReload()
	tb.click("Save", `[data-testid="save"]`)
	tb.waitFor("saved", `window.__noReload !== true && document.readyState === 'complete' && document.querySelector('[data-testid="saved"]')`, describeForm)
	tb.click("Run", `[data-testid="run"]`)
	tb.loaded("the skeleton's session", "/sessions/")
	tb.waitFor("the skeleton runs to its end", `document.querySelector('[data-testid="status"]').textContent.trim() === 'done'`, describeStatus)
	tb.screenshot("3-skeleton-ran")
}
