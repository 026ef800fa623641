package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// bigDelegation is a main agent that works through `steps` steps, then
// sends 50 tasks in one message (49 researchers and one subagent with a
// long name, plus a task for a subagent there is none of), then six review
// rounds one after the other, then answers. The children think for
// different times, so they run at once and finish out of order.
func bigDelegation(steps, fan, rounds int) string {
	sc := map[string]any{
		"name":   "e2e-big-delegation",
		"title":  "A big delegation",
		"prompt": "Study the payments service: " + strings.Repeat("every module, ", 3) + "then review it six times.",
		"agent":  map[string]any{"max_steps": steps + rounds + 10, "max_concurrency": 64},
		"subagents": []map[string]any{
			{"name": "researcher", "description": "Researches one part."},
			{"name": "security-reviewer-for-payments-service", "description": "Reviews security."},
			{"name": "reviewer", "description": "Reviews the whole.", "mode": "fork"},
		},
	}
	var main []map[string]any
	for i := range steps {
		main = append(main, map[string]any{"content": fmt.Sprintf("Looking at module %d.", i), "tool_calls": []map[string]any{{"name": "ls", "args": map[string]any{"path": "/"}}}})
	}
	var calls []map[string]any
	var researchers [][]map[string]any
	for i := range fan {
		typ := "researcher"
		if i == fan/2 {
			typ = "security-reviewer-for-payments-service"
		}
		calls = append(calls, map[string]any{"name": "task", "args": map[string]any{"subagent_type": typ,
			"description": fmt.Sprintf("Research part %d of the payments service and report what you found in one line.", i)}})
		turns := []map[string]any{
			{"tool_calls": []map[string]any{{"name": "ls", "args": map[string]any{"path": "/"}}}, "delay_ms": 150 + (i*37)%250},
			{"content": fmt.Sprintf("Part %d: nothing wrong.", i), "delay_ms": 20},
		}
		if typ == "researcher" {
			researchers = append(researchers, turns)
		} else {
			sc["security"] = turns
		}
	}
	calls = append(calls, map[string]any{"name": "task", "args": map[string]any{"subagent_type": "nobody", "description": "Anything."}})
	main = append(main, map[string]any{"content": "Fifty helpers at once.", "tool_calls": calls})
	var reviews [][]map[string]any
	for i := range rounds {
		main = append(main, map[string]any{"content": fmt.Sprintf("Review round %d.", i+1), "tool_calls": []map[string]any{{"name": "task",
			"args": map[string]any{"subagent_type": "reviewer", "description": fmt.Sprintf("Review round %d: what is still wrong?", i+1)}}}})
		reviews = append(reviews, []map[string]any{{"content": fmt.Sprintf("Round %d: fine.", i+1), "delay_ms": 30}})
	}
	main = append(main, map[string]any{"content": "The payments service is fine."})
	script := map[string]any{"main": main, "researcher": researchers, "reviewer": reviews,
		"security-reviewer-for-payments-service": [][]map[string]any{sc["security"].([]map[string]any)}}
	delete(sc, "security")
	sc["script"] = script
	b, _ := json.Marshal(sc)
	return string(b)
}

// TestBigDelegation looks at a session of 200 parent steps, a fan-out of
// fifty children and six sequential review rounds as a new user would, and
// checks what makes it readable: main in view, siblings told apart by
// their accessible names, rounds drawn apart from a fan-out, no label over
// another, no page wider than the window, a timeline whose bars overlap
// where children ran at once and open their calls, a scrubber that moves
// the panes, main's own context a click away.
func TestBigDelegation(t *testing.T) {
	s := startStudio(t)
	id := s.start(t, bigDelegation(200, 50, 6))
	tr := s.waitDone(t, id)
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the tree's fonts are loaded",
		`document.fonts.status === 'loaded' && document.fonts.check('bold 13px "Go Studio"') && document.fonts.check('12px "Go Studio"')`, `document.fonts.status`)
	tb.screenshot("1-page")

	t.Run("main is in view and the page is no wider than the window", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		type view struct {
			Main           []float64 `json:"main"`
			InBox          bool      `json:"inBox"`
			ScrollW, Width int
			TreeW          float64
			TreeBoxW       int
			SVG            int `json:"svg"`
		}
		v := eval[view](tb, `(() => {
  const r = document.querySelector('#tree [data-testid="node-main"] rect').getBoundingClientRect();
  const box = document.querySelector('#tree').getBoundingClientRect();
  return {main: [r.left, r.top, r.right, r.bottom], inBox: r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom,
    ScrollW: document.documentElement.scrollWidth, Width: document.documentElement.clientWidth,
    TreeW: document.querySelector('#tree svg').getBoundingClientRect().width, TreeBoxW: document.querySelector('#tree').clientWidth,
    svg: document.querySelector('#tree svg').outerHTML.length};
})()`)
		if m := v.Main; m[0] < 0 || m[1] < 0 || m[2] > 1280 || m[3] > 900 || !v.InBox {
			t.Errorf("main's box is at %v, in the tree's box %v; want it in the window (1280×900) and in the box", m, v.InBox)
		}
		if v.ScrollW > v.Width {
			t.Errorf("the page is %d px wide in a window of %d: it overflows sideways", v.ScrollW, v.Width)
		}
		if v.TreeW > float64(v.TreeBoxW)+1 {
			t.Errorf("the tree is %v px wide in a box of %d: fifty children should wrap", v.TreeW, v.TreeBoxW)
		}
		if v.SVG > 200*1024 {
			t.Errorf("the tree's SVG is %d bytes; want at most 200 KB", v.SVG)
		}
	})

	t.Run("siblings have distinct accessible names", func(t *testing.T) {
		nodes, err := chromedp.Run(tb.ctx, chromedp.Action[[]*accessibility.Node](func(ctx context.Context, tg *chromedp.Target) ([]*accessibility.Node, error) {
			res, err := cdp.Call(ctx, tg, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
			if err != nil {
				return nil, err
			}
			return res.Nodes, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range nodes {
			if n.Ignored || n.Role == nil || n.Name == nil {
				continue
			}
			var role, name string
			_ = json.Unmarshal(n.Role.Value, &role)
			_ = json.Unmarshal(n.Name.Value, &name)
			if role == "link" && (strings.Contains(name, ", the main agent,") || strings.Contains(name, " subagent, ") || strings.HasPrefix(name, "Refused delegation")) {
				names = append(names, name)
			}
		}
		if want := len(tr.Agents) + 1; len(names) != want {
			t.Fatalf("%d links in the tree's accessibility tree; want every agent and the refusal (%d): %q", len(names), want, names)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Errorf("two links are named %q", n)
			}
			seen[n] = true
		}
		if !slices.ContainsFunc(names, func(n string) bool {
			return strings.HasPrefix(n, "a26 security-reviewer-for-payments-service, isolated subagent, done") && strings.Contains(n, "Research part 25 of the payments service")
		}) {
			t.Errorf("no link names the long-named child with its mode and whole task: %q", names[:5])
		}
	})

	t.Run("rounds are drawn apart from a fan-out, and no label runs into another", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		boxes := eval[[]struct {
			ID    string  `json:"id"`
			Round int     `json:"round"`
			X     float64 `json:"x"`
			Y     float64 `json:"y"`
		}](tb, `[...document.querySelectorAll('#tree g.node')].map(g => { const r = g.querySelector('rect');
  return {id: g.dataset.testid, round: +g.dataset.round, x: +r.getAttribute('x'), y: +r.getAttribute('y')}; })`)
		rows := map[float64]int{}
		var reviews []float64
		var reviewX []float64
		for _, b := range boxes {
			switch {
			case b.Round == 1:
				rows[b.Y]++
			case b.Round > 1:
				reviews = append(reviews, b.Y)
				reviewX = append(reviewX, b.X)
			}
		}
		if len(rows) < 2 || len(rows) > 20 {
			t.Errorf("the fan-out of 51 task calls stands in %d rows; want a few rows of side-by-side boxes", len(rows))
		}
		for y, n := range rows {
			if n < 2 {
				t.Errorf("a row of the fan-out at y=%v holds %d box: parallel children stand side by side", y, n)
			}
		}
		if len(reviews) != 6 {
			t.Fatalf("%d boxes in later rounds; want the six reviews", len(reviews))
		}
		for i := 1; i < 6; i++ {
			if reviews[i] <= reviews[i-1] || reviewX[i] != reviewX[0] {
				t.Errorf("review %d is at (%v, %v) after (%v, %v): sequential rounds go one under the other", i+1, reviewX[i], reviews[i], reviewX[i-1], reviews[i-1])
			}
		}
		rounds := eval[[]string](tb, `[...document.querySelectorAll('#tree text.round')].map(t => t.textContent)`)
		if len(rounds) != 7 || !strings.HasPrefix(rounds[0], "round 1 · 51 at once") || !strings.HasPrefix(rounds[6], "round 7") {
			t.Errorf("round labels %q; want round 1 · 51 at once, then rounds 2…7", rounds)
		}
		bad := eval[[]string](tb, `(() => {
  const texts = [...document.querySelectorAll('#tree svg text')].map(t => ({t, b: t.getBBox()}));
  const out = [];
  const over = (a, b) => a.x < b.x + b.width - 0.5 && b.x < a.x + a.width - 0.5 && a.y < b.y + b.height - 0.5 && b.y < a.y + a.height - 0.5;
  for (let i = 0; i < texts.length; i++) {
    for (let j = i + 1; j < texts.length; j++) {
      if (over(texts[i].b, texts[j].b)) out.push(texts[i].t.textContent + ' / ' + texts[j].t.textContent);
    }
    const g = texts[i].t.closest('g.node');
    if (g) {
      const r = g.querySelector('rect'), x = +r.getAttribute('x'), y = +r.getAttribute('y'), w = +r.getAttribute('width'), h = +r.getAttribute('height');
      const b = texts[i].b;
      if (b.x < x + 2 || b.x + b.width > x + w - 2 || b.y < y || b.y + b.height > y + h) out.push('outside its box: ' + texts[i].t.textContent);
    }
  }
  return out;
})()`)
		if len(bad) > 0 {
			t.Errorf("%d labels run into another or out of their box: %q", len(bad), bad[:min(len(bad), 10)])
		}
		long := eval[[]string](tb, `[...document.querySelectorAll('#tree [data-testid="node-a26"] text')].map(t => t.textContent)`)
		if len(long) < 2 || !strings.HasSuffix(long[0], "…") || long[1] != "isolated" {
			t.Errorf("the long-named child's box reads %q; want its name cut and its mode shown", long)
		}
	})

	t.Run("the timeline: a lane per agent, overlapping bars, each opening its call", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		tb.navigate(s.URL + "/sessions/" + id + "?timeline=all")
		lanes := eval[int](tb, `document.querySelectorAll('#timeline li.lane').length`)
		if lanes != len(tr.Agents) {
			t.Errorf("%d lanes; want one per agent (%d)", lanes, len(tr.Agents))
		}
		spans := eval[[][2]float64](tb, `['a1', 'a2', 'a3', 'a4'].map(a => { const r = document.querySelector('#lane-' + a + ' .bar-model rect'); return [+r.getAttribute('x'), +r.getAttribute('x') + +r.getAttribute('width')]; })`)
		for i := 1; i < len(spans); i++ {
			if spans[i][0] >= spans[0][1] || spans[0][0] >= spans[i][1] {
				t.Errorf("the first calls of a1 and a%d run %v and %v: parallel children's bars should overlap", i+1, spans[0], spans[i])
			}
		}
		tb.screenshot("2-timeline")
		tb.do("click a child's bar", chromedp.Click(chromedp.CSS(`#lane-a5 a.bar-model`)))
		tb.waitFor("the bar's call opens", `location.pathname.endsWith('/calls/a5.c0') && !!document.querySelector('[data-testid="call-title"]')`, `location.href`)
		if title := eval[string](tb, `document.querySelector('[data-testid="call-title"]').textContent`); !strings.Contains(title, "a5 researcher, its call 1") {
			t.Errorf("the call page reads %q", title)
		}
	})

	t.Run("the scrubber moves the panes; main's context is a click away", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		tb.navigate(s.URL + "/sessions/" + id + "?agent=a5")
		eval[bool](tb, `window.__noReload = true`)
		readPanes := `(() => ({child: document.querySelector('[data-testid="child-pane"]').textContent.replace(/\s+/g, ' '),
  parent: document.querySelector('[data-testid="parent-pane"]').textContent.replace(/\s+/g, ' '),
  shown: document.querySelectorAll('[data-testid="parent-pane"] li.msg').length,
  jump: (document.querySelector('[data-testid="jump-call"]') || {}).hash || '',
  economics: (document.querySelector('[data-testid="counted"]') || {}).textContent || ''}))()`
		type panes struct {
			Child, Parent, Jump, Economics string
			Shown                          int
		}
		now := eval[panes](tb, readPanes)
		if !strings.Contains(now.Child, "Part 4: nothing wrong.") || now.Shown > 20 || now.Jump == "" {
			t.Errorf("a5's panes now: child %q…, parent shows %d messages, jump %q; want its answer, a folded parent, a jump to the call", now.Child[:min(200, len(now.Child))], now.Shown, now.Jump)
		}
		if !eval[bool](tb, `(() => { const m = document.getElementById(`+jsString(strings.TrimPrefix(now.Jump, "#"))+`); return !!m && m.classList.contains('mark-call') && !!m.closest('[data-testid="parent-pane"]'); })()`) {
			t.Errorf("the jump %q does not reach the marked task call in the parent pane", now.Jump)
		}
		if !strings.Contains(now.Economics, "worked through") || !strings.Contains(now.Economics, "2 model calls") || !strings.Contains(now.Economics, ": 1") {
			t.Errorf("a5's economics read %q", now.Economics)
		}
		tb.screenshot("3-delegation-now")
		step := 0
		for i, c := range tr.ModelCalls {
			if c.ID == "a5.c0" {
				step = i + 1
			}
		}
		eval[bool](tb, `(() => { const r = document.querySelector('[data-testid="scrub-range"]'); r.value = '`+fmt.Sprint(step)+`'; r.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`)
		tb.waitFor("the page moved to a5's first call", `document.querySelector('.session').dataset.scrubbedTo === '`+fmt.Sprint(step)+`'`, `document.querySelector('#scrubber').textContent`)
		then := eval[panes](tb, readPanes)
		if then.Child == now.Child || strings.Contains(then.Child, "Part 4: nothing wrong.") || !strings.Contains(then.Child, "Research part 4 of the payments service") {
			t.Errorf("at step %d a5's pane reads %q; want its context as its first call received it: the task, no answer yet", step, then.Child[:min(300, len(then.Child))])
		}
		if strings.Contains(then.Parent, "Part 4: nothing wrong.") {
			t.Errorf("at step %d the parent's pane already holds a5's receipt", step)
		}
		tb.screenshot("4-delegation-at-its-first-call")
		if !eval[bool](tb, `window.__noReload === true`) {
			t.Errorf("the scrubber reloaded the page")
		}
		tb.navigate(s.URL + "/sessions/" + id)
		tb.do("click main in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-main"]`)))
		tb.waitFor("main's own context", `location.search.includes('agent=main') && !!document.querySelector('[data-testid="agent-pane"]')`, `location.href`)
		if n := eval[int](tb, `document.querySelectorAll('[data-calls="main"] a[data-testid="call-link"]').length`); n < 10 {
			t.Errorf("main's panel links %d of its calls", n)
		}
		tb.screenshot("5-main")
	})
}

// TestTimelineFollowsTheBottom watches sequential rounds add lanes: the
// timeline's box stays at its bottom while the user leaves it there, and
// stays put once they scroll up.
func TestTimelineFollowsTheBottom(t *testing.T) {
	s := startStudio(t)
	var main []string
	var kids []string
	for i := range 40 {
		main = append(main, fmt.Sprintf(`{"tool_calls": [{"name": "task", "args": {"description": "Round %d.", "subagent_type": "general-purpose"}}]}`, i))
		kids = append(kids, fmt.Sprintf(`[{"content": "round %d done", "delay_ms": 120}]`, i))
	}
	id := s.start(t, `{"name": "e2e-rounds", "prompt": "Forty rounds.", "agent": {"max_steps": 60},
  "script": {"main": [`+strings.Join(main, ",")+`, {"content": "done"}], "general-purpose": [`+strings.Join(kids, ",")+`]}}`)
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	const box = `document.querySelector('#timeline [data-wf-body]')`
	const lanes = `document.querySelectorAll('#timeline li.lane').length`
	tb.waitFor("the lanes overflow the timeline's box", box+`.scrollHeight > `+box+`.clientHeight + 60`, lanes+` + ' lanes'`)
	tb.waitFor("it follows them, at its bottom", `(() => { const b = `+box+`; return b.scrollTop > 0 && b.scrollTop + b.clientHeight >= b.scrollHeight - 4; })()`,
		box+`.scrollTop + ' of ' + `+box+`.scrollHeight`)
	tb.screenshot("1-following")
	n := eval[int](tb, lanes)
	eval[bool](tb, box+`.scrollTop = 0; true`)
	tb.waitFor("more lanes come", lanes+` > `+fmt.Sprint(n+2), lanes+` + ' lanes'`)
	if top := eval[float64](tb, box+`.scrollTop`); top != 0 {
		t.Errorf("scrolled up, the timeline moved to %v as lanes came; want it to stay put", top)
	}
	tb.screenshot("2-scrolled-up")
	s.waitDone(t, id)
}

// TestSummarizationCut runs the summarized-fork lesson's scenario and looks
// at main's context after its history was summarized: the cut is marked
// with the messages it folded and the tokens before and after, and the
// folded history opens from it, the door code the fork lacks in it.
func TestSummarizationCut(t *testing.T) {
	doc, err := os.ReadFile("../internal/lessons/scenarios/summarized-fork.json")
	if err != nil {
		t.Fatal(err)
	}
	s := startStudio(t)
	id := s.start(t, string(doc))
	s.waitDone(t, id)
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id + "?agent=main")
	tb.waitFor("main's context shows the cut", `!!document.querySelector('[data-testid="agent-pane"] [data-testid="cut"]')`, `document.querySelector('#delegation').textContent.replace(/\s+/g, ' ')`)
	cut := eval[string](tb, `document.querySelector('[data-testid="agent-pane"] [data-testid="cut"]').textContent.replace(/\s+/g, ' ').trim()`)
	m := regexp.MustCompile(`Summarized at step (\d+): (\d+) messages folded into this summary; the context went from ([\d,]+) tokens to ([\d,]+) tokens\. The folded history: /conversation_history/main\.md`).FindStringSubmatch(cut)
	if m == nil {
		t.Fatalf("the cut reads %q; want the step, the messages folded, the tokens before and after, and the history file", cut)
	}
	num := func(s string) int { n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", "")); return n }
	if step, folded, before, after := num(m[1]), num(m[2]), num(m[3]), num(m[4]); step != 5 || folded < 2 || after >= before {
		t.Errorf("the cut says step %d, %d folded, %d → %d tokens; want step 5 (the summary call), some folded, fewer tokens after", step, folded, before, after)
	}
	tb.screenshot("1-cut")
	tb.do("open the folded history", chromedp.Click(chromedp.CSS(`[data-testid="agent-pane"] [data-testid="cut-file"]`)))
	tb.waitFor("the history file", `location.pathname.endsWith('/file') && document.body.textContent.includes('4417')`, `document.body.textContent.slice(0, 300)`)
}
