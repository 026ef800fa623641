package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// twoHelpers is a main agent that sends, in one message, a task to an
// isolated helper (a1) and one to a fork helper (a2); delay is each
// child's thinking time in ms, main's turns take a fifth of it.
func twoHelpers(delay int) string {
	return fmt.Sprintf(`{
  "name": "e2e-two-helpers",
  "title": "Two helpers at once",
  "prompt": "The secret code is Z-42. Ask two helpers about it.",
  "subagents": [
    {"name": "iso", "description": "Works alone.", "system_prompt": "Answer briefly."},
    {"name": "fk", "description": "Continues the conversation.", "system_prompt": "Answer briefly.", "mode": "fork"}
  ],
  "script": {
    "main": [
      {"content": "Two helpers, at once.", "tool_calls": [
        {"name": "task", "args": {"description": "ISO-TASK: tell me what you were given.", "subagent_type": "iso"}},
        {"name": "task", "args": {"description": "FORK-TASK: repeat the secret code.", "subagent_type": "fk"}}
      ], "delay_ms": %[1]d},
      {"content": "Both helpers answered.", "delay_ms": %[1]d}
    ],
    "iso": [[{"content": "ISO-ANSWER: only my task.", "delay_ms": %[2]d}]],
    "fk": [[{"content": "FORK-ANSWER: the code is Z-42.", "delay_ms": %[2]d}]]
  }
}`, delay/5, delay)
}

// delegationPage is what a session page shows of the selected delegation.
type delegationPage struct {
	Search    string   `json:"search"`
	Calls     []string `json:"calls"`
	Receipts  []string `json:"receipts"`
	Child     string   `json:"child"`
	Isolated  bool     `json:"isolated"`
	Fork      bool     `json:"fork"`
	Inherited int      `json:"inherited"` // messages in the inherited list; -1 when there is none
	InhText   string   `json:"inhText"`
	Receipt   *string  `json:"receipt"`
	Selected  []string `json:"selected"`
}

const readDelegation = `(() => {
  const pp = document.querySelector('[data-testid="parent-pane"]');
  const cp = document.querySelector('[data-testid="child-pane"]');
  const inh = cp && cp.querySelector('[data-testid="inherited"]');
  const rc = document.querySelector('[data-testid="receipt"]');
  return {
    search: location.search,
    calls: pp ? [...pp.querySelectorAll('.mark-call')].map(e => e.textContent) : [],
    receipts: pp ? [...pp.querySelectorAll('.mark-receipt')].map(e => e.textContent) : [],
    child: cp ? cp.textContent : '',
    isolated: !!(cp && cp.querySelector('[data-testid="isolated-note"]')),
    fork: !!(cp && cp.querySelector('[data-testid="fork-note"]')),
    inherited: inh ? inh.querySelectorAll('li').length : -1,
    inhText: inh ? inh.textContent : '',
    receipt: rc ? rc.textContent : null,
    selected: [...document.querySelectorAll('#tree .node-selected')].map(e => e.dataset.testid),
  };
})()`

// openInherited opens the child pane's inherited messages, which load
// when opened, and waits for them.
func openInherited(tb *tab) {
	tb.t.Helper()
	tb.do("open the inherited messages", chromedp.Click(chromedp.CSS(`[data-testid="child-pane"] [data-testid="inherited"] > summary`)))
	tb.waitFor("the inherited messages loaded", `(() => { const d = document.querySelector('[data-testid="child-pane"] [data-testid="inherited"]');
  return d.open && !d.querySelector('ol[data-lazy]') && d.querySelectorAll('li').length > 0; })()`,
		`document.querySelector('[data-testid="child-pane"] [data-testid="inherited"]').outerHTML.slice(0, 400)`)
}

// statusIs is a predicate: the session's status badge reads s.
func statusIs(s string) string {
	return `document.querySelector('[data-testid="status"]').textContent.trim() === ` + jsString(s)
}

const describeStatus = `'status ' + (document.querySelector('[data-testid="status"]') || {}).textContent + '; tree ' +
  [...document.querySelectorAll('#tree [data-testid^="node-"]')].map(n => n.dataset.testid + '(' + n.getAttribute('class') + ')').join(' ') +
  '; timeline ' + [...document.querySelectorAll('#timeline .bar')].map(b => b.id + '(' + b.getAttribute('class') + ')').join(' ')`

// TestLiveDelegation watches a session with two concurrent subagents grow
// in the tree without a reload, then compares each child's context with
// its parent's.
func TestLiveDelegation(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	id := s.start(t, twoHelpers(1500))
	tb.navigate(s.URL + "/sessions/" + id)
	// Proof that no navigation happens from here on: a reload or a new
	// page would drop it.
	eval[bool](tb, `window.__noReload = true`)

	t.Run("tree grows live", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		tb.screenshot("1-opened")
		type first struct {
			Running bool     `json:"running"`
			Status  string   `json:"status"`
			Nodes   []string `json:"nodes"`
		}
		f := eval[first](tb, `(() => ({
  running: document.querySelector('.session').hasAttribute('data-running'),
  status: document.querySelector('[data-testid="status"]').textContent.trim(),
  nodes: [...document.querySelectorAll('#tree g[data-testid^="node-a"]')].map(n => n.dataset.testid + ' ' + n.getAttribute('class')),
}))()`)
		if !f.Running || f.Status != "running" {
			t.Fatalf("the page opened right after the start shows status %q, data-running %v; want a running session (is the studio or this machine that slow?)", f.Status, f.Running)
		}
		for _, n := range f.Nodes {
			if !strings.Contains(n, "node-running") {
				t.Fatalf("at first the tree shows %q: a child already finished before the page opened; want it absent or running", n)
			}
		}
		if len(f.Nodes) == 0 {
			t.Logf("the page opened before the children started")
		} else {
			t.Logf("the page opened with the children running: %v", f.Nodes)
		}

		tb.waitFor("the tree shows node-main, node-a1 and node-a2",
			`['main', 'a1', 'a2'].every(a => document.querySelector('#tree [data-testid="node-' + a + '"]'))`, describeStatus)
		kids := eval[[]string](tb, `['a1', 'a2'].map(a => document.querySelector('#tree [data-testid="node-' + a + '"]').getAttribute('class'))`)
		for _, k := range kids {
			if !strings.Contains(k, "node-running") {
				t.Errorf("when the children first showed in the tree they were %q; want them shown while they run", kids)
				break
			}
		}
		tb.waitFor("while the session runs, a child's lane shows its running call, a bar that grows",
			statusIs("running")+` && [...document.querySelectorAll('#timeline .lane.depth-1 .bar-model.running rect')].some(r => +r.getAttribute('width') > 0)`, describeStatus)
		tb.screenshot("2-children-running")
		tb.waitFor("the status shows done", statusIs("done"), describeStatus)
		tb.screenshot("3-done")

		type end struct {
			NoReload bool     `json:"noReload"`
			Running  bool     `json:"running"`
			Nodes    []string `json:"nodes"`
			Rows     []string `json:"rows"`
			Totals   string   `json:"totals"`
			Answer   string   `json:"answer"`
		}
		e := eval[end](tb, `(() => ({
  noReload: window.__noReload === true,
  running: document.querySelector('.session').hasAttribute('data-running'),
  nodes: [...document.querySelectorAll('#tree g[data-testid^="node-"]')].map(n => n.dataset.testid + ' ' + n.getAttribute('class')),
  rows: [...document.querySelectorAll('#timeline .bar-model')].map(b => b.id + ' ' + b.getAttribute('class')),
  totals: document.querySelector('[data-testid="totals"]').textContent.replace(/\s+/g, ' ').trim(),
  answer: document.querySelector('[data-testid="answer"]').textContent,
}))()`)
		if !e.NoReload {
			t.Errorf("window.__noReload is gone: the page was reloaded or left")
		}
		if e.Running {
			t.Errorf("the page still has data-running after the session finished")
		}
		// The panel shows the first delegation, and the tree marks it.
		want := []string{"node-main node node-done", "node-a1 node node-done node-selected", "node-a2 node node-done"}
		slices.Sort(e.Nodes)
		slices.Sort(want)
		if !slices.Equal(e.Nodes, want) {
			t.Errorf("the tree at the end shows %q; want %q", e.Nodes, want)
		}
		if !strings.HasPrefix(e.Totals, "3 agents · 4 model calls") {
			t.Errorf("totals read %q; want 3 agents · 4 model calls", e.Totals)
		}
		if !strings.Contains(e.Answer, "Both helpers answered.") {
			t.Errorf("the answer reads %q; want the main agent's last message", e.Answer)
		}
		if len(e.Rows) != 4 {
			t.Errorf("the timeline has %d rows %q; want the 4 model calls", len(e.Rows), e.Rows)
		}
		for _, r := range e.Rows {
			if strings.Contains(r, "running") {
				t.Errorf("timeline row %q still says running after the session finished: the live model.finished patch did not apply", r)
			}
		}
	})

	t.Run("contexts side by side", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		s.waitDone(t, id)
		tb.navigate(s.URL + "/sessions/" + id) // done: the children are in the tree now

		tb.do("click the isolated child in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-a1"]`)))
		tb.waitFor("the page of the delegation to a1 is open",
			`location.search.includes('agent=a1') && document.readyState === 'complete' && document.querySelector('[data-testid="child-pane"] [data-testid="isolated-note"]')`,
			`location.href`)
		tb.screenshot("1-isolated-a1")
		d := eval[delegationPage](tb, readDelegation)
		if len(d.Calls) != 1 || !strings.Contains(d.Calls[0], "task") {
			t.Errorf("parent pane: .mark-call elements %q; want exactly one, with the task call", d.Calls)
		}
		if len(d.Receipts) != 1 || !strings.Contains(d.Receipts[0], "ISO-ANSWER: only my task.") {
			t.Errorf("parent pane: .mark-receipt elements %q; want exactly one, with the isolated child's answer", d.Receipts)
		}
		if !strings.Contains(d.Child, "ISO-TASK: tell me what you were given.") || !strings.Contains(d.Child, "ISO-ANSWER: only my task.") {
			t.Errorf("child pane lacks the child's task or answer: %q", d.Child)
		}
		if !d.Isolated || d.Fork || d.Inherited != -1 {
			t.Errorf("child pane of the isolated child: isolated-note %v, fork-note %v, inherited messages %d; want the isolated note and nothing inherited", d.Isolated, d.Fork, d.Inherited)
		}
		if strings.Contains(d.Child, "Z-42") {
			t.Errorf("the isolated child's pane shows the parent's prompt (Z-42): %q", d.Child)
		}
		if d.Receipt == nil || !strings.Contains(*d.Receipt, "ISO-ANSWER") {
			t.Errorf("the receipt reads %v; want the isolated child's answer", d.Receipt)
		}
		if len(d.Selected) != 1 || d.Selected[0] != "node-a1" {
			t.Errorf("the tree marks %q as selected; want node-a1", d.Selected)
		}

		tb.do("click the fork child in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-a2"]`)))
		tb.waitFor("the page of the delegation to a2 is open",
			`location.search.includes('agent=a2') && document.readyState === 'complete' && document.querySelector('[data-testid="child-pane"] [data-testid="fork-note"]')`,
			`location.href`)
		openInherited(tb)
		tb.screenshot("2-fork-a2")
		d = eval[delegationPage](tb, readDelegation)
		if len(d.Calls) != 1 || !strings.Contains(d.Calls[0], "task") {
			t.Errorf("parent pane: .mark-call elements %q; want exactly one, with the task call", d.Calls)
		}
		if len(d.Receipts) != 1 || !strings.Contains(d.Receipts[0], "FORK-ANSWER: the code is Z-42.") {
			t.Errorf("parent pane: .mark-receipt elements %q; want exactly one, with the fork child's answer", d.Receipts)
		}
		if !strings.Contains(d.Child, "FORK-TASK: repeat the secret code.") || !strings.Contains(d.Child, "FORK-ANSWER") {
			t.Errorf("child pane lacks the child's task or answer: %q", d.Child)
		}
		if !d.Fork || d.Isolated {
			t.Errorf("child pane of the fork child: fork-note %v, isolated-note %v; want the fork note", d.Fork, d.Isolated)
		}
		if d.Inherited < 1 || !strings.Contains(d.InhText, "The secret code is Z-42.") {
			t.Errorf("the fork child's inherited list has %d messages (%q); want the parent's conversation, its prompt included", d.Inherited, d.InhText)
		}
		if d.Receipt == nil || *d.Receipt != "FORK-ANSWER: the code is Z-42." {
			t.Errorf("the receipt reads %v; want the fork child's answer", d.Receipt)
		}
		if len(d.Selected) != 1 || d.Selected[0] != "node-a2" {
			t.Errorf("the tree marks %q as selected; want node-a2", d.Selected)
		}
	})
}

// TestReloadMidRun reloads a running session's page: the timeline must
// then hold every model call once, in order, none missing.
func TestReloadMidRun(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	const lsTurns = 12
	var turns []string
	for range lsTurns {
		turns = append(turns, `{"tool_calls": [{"name": "ls", "args": {"path": "/"}}], "delay_ms": 250}`)
	}
	turns = append(turns, `{"content": "Listed it twelve times.", "delay_ms": 250}`)
	id := s.start(t, `{"name": "e2e-slow-ls", "prompt": "List the root, slowly.", "files": {"/a.md": "a"},
  "script": {"main": [`+strings.Join(turns, ",\n")+`]}}`)

	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the timeline has 3 bars", `document.querySelectorAll('#timeline .bar-model').length >= 3`, describeStatus)
	tb.screenshot("1-before-reload")
	tb.do("reload", chromedp.Reload())
	if !eval[bool](tb, `document.querySelector('.session').hasAttribute('data-running')`) {
		t.Fatalf("the session finished before the reload: the test did not reload mid-run")
	}
	reloadedRows := eval[int](tb, `document.querySelectorAll('#timeline .bar-model').length`)
	// The call running at the reload, rendered by the server, counts its
	// elapsed time from when it started.
	// One look at every running row at once: a row patched in between two
	// looks reads "running" until the page's timer next ticks.
	tb.waitFor("the running calls' bars reach from when they started to now",
		`[...document.querySelectorAll('#timeline .bar.running rect')].every(r => {
			const w = +r.getAttribute('width');
			return w >= 0 && w <= 60000;
		})`, describeStatus)
	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.screenshot("2-done")

	tr := s.trace(t, id)
	if len(tr.ModelCalls) != lsTurns+1 {
		t.Fatalf("the trace has %d model calls; want %d", len(tr.ModelCalls), lsTurns+1)
	}
	var want []string
	for i, c := range tr.ModelCalls {
		if c.ID != fmt.Sprintf("main.c%d", i) {
			t.Fatalf("model call %d of the trace is %q; want main.c%d", i, c.ID, i)
		}
		want = append(want, "bar-"+c.ID)
	}
	rows := eval[[]string](tb, `[...document.querySelectorAll('#timeline .bar-model')].map(b => b.id)`)
	if strings.Join(rows, " ") != strings.Join(want, " ") {
		t.Errorf("after a reload mid-run (at %d rows) the timeline rows are\n%q\nwant each model call once, in order:\n%q", reloadedRows, rows, want)
	}
	if still := eval[[]string](tb, `[...document.querySelectorAll('#timeline .bar.running')].map(b => b.id)`); len(still) > 0 {
		t.Errorf("after the session finished these rows still show a running call: %q", still)
	}
}

const (
	xssScript = `<script>window.__pwned=1</script>`
	xssImg    = `<img src=x onerror="window.__pwned=2">`
	xssLink   = `<a href="javascript:window.__pwned=3">javascript:window.__pwned=3</a>`
	xss       = xssScript + xssImg + xssLink + ` [click](javascript:window.__pwned=4)`
)

// TestXSSStaysInert runs a session whose every text holds markup and
// checks it shows as text and runs nowhere, live and reloaded. The page's
// Content-Security-Policy is bypassed in this tab, so that only the
// escaping stands between a payload and window.__pwned.
func TestXSSStaysInert(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	sc := map[string]any{
		"name":   "e2e-xss",
		"title":  "Title " + xss,
		"prompt": "Prompt " + xss,
		"subagents": []map[string]any{{
			"name": "helper", "description": "Helps " + xss, "system_prompt": "System " + xss,
		}},
		"files": map[string]string{"/readme.md": "File " + xss},
		"script": map[string]any{
			"main": []map[string]any{
				{"content": "Writing " + xss, "delay_ms": 150, "tool_calls": []map[string]any{
					{"name": "write_file", "args": map[string]string{"file_path": "/page.html", "content": "Written " + xss}},
				}},
				{"content": "Delegating " + xss, "delay_ms": 150, "tool_calls": []map[string]any{
					{"name": "task", "args": map[string]string{"description": "Task " + xss, "subagent_type": "helper"}},
				}},
				{"content": "Final " + xss, "delay_ms": 150},
			},
			"helper": [][]map[string]any{{{"content": "Receipt " + xss, "delay_ms": 400}}},
		},
	}
	doc, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	id := s.start(t, string(doc))
	tb.do("bypass the page's CSP", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
		return err
	}))

	inert := func(where string) {
		t.Helper()
		// An injected <img onerror> would fire once its load failed: look
		// once every image has loaded or failed.
		tb.waitFor("every image has loaded or failed", `[...document.images].every(i => i.complete)`, `document.images.length + " images"`)
		type check struct {
			Pwned   string   `json:"pwned"`
			Scripts []string `json:"scripts"`
			Bad     []string `json:"bad"`
		}
		c := eval[check](tb, `(() => ({
  pwned: typeof window.__pwned === 'undefined' ? '' : String(window.__pwned),
  scripts: [...document.scripts].map(s => s.getAttribute('src') || s.textContent),
  bad: [...document.querySelectorAll('*')].filter(e =>
      [...e.attributes].some(a => /^on/i.test(a.name) || /^\s*javascript:/i.test(a.value)) ||
      (e.tagName === 'IMG' && e.getAttribute('src') === 'x')).map(e => e.outerHTML.slice(0, 200)),
}))()`)
		if c.Pwned != "" {
			t.Errorf("%s: window.__pwned = %s: a payload ran", where, c.Pwned)
		}
		if len(c.Scripts) != 1 || c.Scripts[0] != "/static/app.js" {
			t.Errorf("%s: the page has scripts %q; want only /static/app.js", where, c.Scripts)
		}
		if len(c.Bad) > 0 {
			t.Errorf("%s: payload markup became elements: %q", where, c.Bad)
		}
	}
	texts := func(sel string) []string {
		t.Helper()
		return eval[[]string](tb, `[...document.querySelectorAll(`+jsString(sel)+`)].map(e => e.textContent)`)
	}
	hasPayload := func(where, sel, prefix string) {
		t.Helper()
		for _, txt := range texts(sel) {
			if strings.Contains(txt, prefix+" "+xssScript+xssImg) && strings.Contains(txt, "javascript:window.__pwned=3") {
				return
			}
		}
		t.Errorf("%s: no %s shows %q as text; they read %q", where, sel, prefix+" "+xss, texts(sel))
	}

	// Live: the session runs while the page watches, so the timeline rows,
	// the answer and the files arrive as patches.
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.screenshot("1-live")
	inert("the page patched live")
	hasPayload("the page patched live", `[data-testid="answer"] pre`, "Final")
	hasPayload("the page patched live", `[data-testid="files"] pre`, "Written")
	hasPayload("the page patched live", `.prompt`, "Prompt")

	// Reloaded, with the delegation open: the contexts and the receipt.
	tb.navigate(s.URL + "/sessions/" + id + "?agent=a1")
	tb.screenshot("2-delegation")
	inert("the delegation view")
	hasPayload("the delegation view", `[data-testid="receipt"]`, "Receipt")
	hasPayload("the delegation view", `[data-testid="child-pane"] pre.body`, "Task")
	hasPayload("the delegation view", `[data-testid="parent-pane"] pre.body`, "Delegating")
	hasPayload("the delegation view", `.head p.muted`, "Title")
	// A tool call's arguments show as their JSON text.
	if args := strings.Join(texts(`[data-testid="parent-pane"] .toolcall .args`), "\n"); !strings.Contains(args, `"content":"Written `) || !strings.Contains(args, "window.__pwned=1") {
		t.Errorf("the delegation view: the write_file call's arguments do not show as text: %q", args)
	}
	if got := strings.Join(texts(`[data-testid="scrub-call"] q`), "\n"); !strings.Contains(got, "Final "+xssScript+xssImg) {
		t.Errorf("the scrubber does not show the newest call's answer as text: %q", got)
	}
	hasPayload("the delegation view", `[data-testid="child-pane"] details.system pre`, "System")
	hasPayload("the delegation view", `[data-testid="files"] pre`, "File")
}

// TestLessonFromSessionsPage starts the order-number lesson with its Run
// button: only the fork child can see the order number.
func TestLessonFromSessionsPage(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/")
	tb.screenshot("1-sessions-page")
	tb.do("click Run on the order-number lesson", chromedp.Click(chromedp.CSS(`[data-testid="start-order-number"]`)))
	tb.waitFor("the lesson's page shows the run",
		`location.pathname === '/lessons/order-number' && location.search.startsWith('?run=') && document.readyState === 'complete'`,
		`location.href`)
	tb.waitFor("the run is done and its session linked", `document.querySelector('[data-testid="table-computed"]') && document.querySelector('[data-testid="lesson-run"] [data-variant] a')`,
		`document.body.innerText.slice(0, 300)`)
	tb.do("open the session", chromedp.Click(chromedp.CSS(`[data-testid="lesson-run"] [data-variant] a`)))
	tb.waitFor("the session's page is open",
		`location.pathname.startsWith('/sessions/') && document.readyState === 'complete' && document.querySelector('.session[data-session]')`,
		`location.href`)
	id := eval[string](tb, `document.querySelector('.session').dataset.session`)
	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.screenshot("2-done")

	tb.navigate(s.URL + "/sessions/" + id + "?agent=a2")
	tb.screenshot("3-fork-a2")
	d := eval[delegationPage](tb, readDelegation)
	if !d.Fork {
		t.Errorf("a2 is not shown as the fork child")
	}
	if d.Receipt == nil || strings.TrimSpace(*d.Receipt) != "A-7731" {
		t.Errorf("the fork child's receipt reads %v; want A-7731", d.Receipt)
	}

	tb.navigate(s.URL + "/sessions/" + id + "?agent=a1")
	tb.screenshot("4-isolated-a1")
	d = eval[delegationPage](tb, readDelegation)
	if !d.Isolated {
		t.Errorf("a1 is not shown as the isolated child")
	}
	if d.Receipt == nil || !strings.Contains(*d.Receipt, "cannot see") || strings.Contains(*d.Receipt, "A-7731") {
		t.Errorf("the isolated child's receipt reads %v; want that it cannot see the number", d.Receipt)
	}
}

// TestScrubber moves the step scrubber of a finished session to its first
// model call and back: the whole page moves with it — the tree shows only
// main, running; the panel main's context as that call received it; the
// timeline the one bar, marked — without a reload, and the address says
// the step.
func TestScrubber(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	id := s.start(t, twoHelpers(0))
	tr := s.waitDone(t, id)
	tb.navigate(s.URL + "/sessions/" + id)

	const describeScrub = `document.querySelector('[data-testid="scrubber"]').textContent.replace(/\s+/g, ' ')`
	type scrub struct {
		Max, Value string
		Rows       []string
		Call       string
		Nodes      []string
		Bars       int
		TreeAt     string
		PanelAt    string
		Panel      string
	}
	readScrub := `(() => ({
  Max: document.querySelector('[data-testid="scrub-range"]').max,
  Value: document.querySelector('[data-testid="scrub-range"]').value,
  Rows: [...document.querySelectorAll('[data-testid="scrub-table"] tbody tr')].map(r => (r.classList.contains('current') ? '* ' : '') + [...r.cells].map(c => c.textContent.trim()).join(' ')),
  Call: document.querySelector('[data-testid="scrub-call"]').textContent.replace(/\s+/g, ' ').trim(),
  Nodes: [...document.querySelectorAll('#tree g.node')].map(g => g.dataset.testid + ' ' + g.getAttribute('class')),
  Bars: document.querySelectorAll('#timeline .bar-model').length,
  TreeAt: document.querySelector('#tree').dataset.at || '',
  PanelAt: document.querySelector('#delegation').dataset.at || '',
  Panel: document.querySelector('#delegation').textContent.replace(/\s+/g, ' '),
}))()`
	eval[bool](tb, `window.__noReload = true`)
	before := eval[scrub](tb, readScrub)
	if want := fmt.Sprint(len(tr.ModelCalls)); before.Max != want || before.Value != want {
		t.Errorf("the scrubber starts at %s of %s; want %s of %s", before.Value, before.Max, want, want)
	}
	if len(before.Rows) != 3 || strings.Contains(strings.Join(before.Rows, "|"), "not started yet") || before.TreeAt != "" || len(before.Nodes) != 3 {
		t.Errorf("at the last step the scrub table reads %q and the tree %q (at %q); want main, iso and fk, all started", before.Rows, before.Nodes, before.TreeAt)
	}
	move := func(step string) {
		eval[bool](tb, `(() => {
  const r = document.querySelector('[data-testid="scrub-range"]');
  r.value = `+jsString(step)+`;
  r.dispatchEvent(new Event('input', {bubbles: true}));
  return true;
})()`)
		tb.waitFor("the page moved to step "+step, `document.querySelector('.session').dataset.scrubbedTo === `+jsString(step), describeScrub)
	}
	move("1")
	tb.screenshot("step-1")
	after := eval[scrub](tb, readScrub)
	want := []string{"* main main 1 1", "a1 iso not started yet", "a2 fk not started yet"}
	for i, w := range want {
		if i >= len(after.Rows) || !strings.HasPrefix(after.Rows[i], w) {
			t.Errorf("at step 1 the scrub table reads %q; want rows starting %q", after.Rows, want)
			break
		}
	}
	if !strings.HasPrefix(after.Call, "Step 1 of 4: main main, its call 1") {
		t.Errorf("the scrubber reads %q; want Step 1 of 4: main main, its call 1", after.Call)
	}
	if after.TreeAt != "1" || len(after.Nodes) != 1 || !strings.Contains(after.Nodes[0], "node-main node node-running") {
		t.Errorf("at step 1 the tree (at %q) shows %q; want main alone, running", after.TreeAt, after.Nodes)
	}
	if after.PanelAt != "1" || !strings.Contains(after.Panel, "Its context at step 1") || !strings.Contains(after.Panel, "The secret code is Z-42.") {
		t.Errorf("at step 1 the panel (at %q) reads %q; want main's context at step 1", after.PanelAt, after.Panel)
	}
	if after.Bars != 1 || !eval[bool](tb, `!!document.querySelector('#timeline[data-at="1"] .marker') && !!document.querySelector('#timeline .bar.current')`) {
		t.Errorf("at step 1 the timeline shows %d bars; want the first, marked", after.Bars)
	}
	// It moved without a reload, and the address says the step, so a
	// reload shows it again.
	if !eval[bool](tb, `window.__noReload === true`) || eval[string](tb, `location.search`) != "?step=1" {
		t.Errorf("the scrubber navigated or did not say its step in the address: %s", eval[string](tb, `location.href`))
	}
	tb.do("reload", chromedp.Reload())
	if got := eval[scrub](tb, readScrub); got.TreeAt != "1" || got.Value != "1" || len(got.Nodes) != 1 {
		t.Errorf("reloaded at ?step=1 the page shows step %s, tree at %q with %q", got.Value, got.TreeAt, got.Nodes)
	}
	eval[bool](tb, `window.__noReload = true`)
	move("4")
	back := eval[scrub](tb, readScrub)
	if back.TreeAt != "" || len(back.Nodes) != 3 || back.Bars != 4 || eval[string](tb, `location.search`) != "" {
		t.Errorf("back at the newest step the tree (at %q) shows %q and the timeline %d bars (address %q); want the whole session now",
			back.TreeAt, back.Nodes, back.Bars, eval[string](tb, `location.search`))
	}
}
