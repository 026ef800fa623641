package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
)

// TestReasoningAndCutOff: in the browser, a reasoning model's thinking is a
// part of its message of its own, folded until opened; an answer cut off at
// the length limit is an error on its call in the timeline and in its
// child's receipt.
func TestReasoningAndCutOff(t *testing.T) {
	ep := openaitest.NewServer(t, openaitest.ThinkerAndRambler)
	// The studio calls only the endpoints it was started with: the
	// scenario names it instead of giving its URL.
	s := startStudio(t, "--endpoint", "fake="+ep.URL+"/v1")
	doc := strings.Replace(openaitest.ThinkerAndRamblerScenario(ep.URL+"/v1"), `"base_url": "`+ep.URL+`/v1"`, `"endpoint": "fake"`, 1)
	id := s.start(t, doc)
	tr := s.waitDone(t, id)
	var thinker, rambler string
	for _, a := range tr.Agents {
		switch a.Name {
		case "thinker":
			thinker = a.ID
		case "rambler":
			rambler = a.ID
		}
	}
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	tb.waitFor("the cut-off call in the timeline",
		`[...document.querySelectorAll('#timeline .bar.error title')].some(e => e.textContent.includes('finish_reason "length"'))`,
		`document.querySelector('#timeline').innerText`)

	tb.do("click the thinker in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-`+thinker+`"]`)))
	tb.waitFor("the thinker's answer with its reasoning part, folded",
		`(() => { const d = document.querySelector('[data-testid="reasoning"]'); return !!d && !d.open; })()`,
		`document.querySelector('#delegation') && document.querySelector('#delegation').innerText`)
	tb.do("open the reasoning", chromedp.Click(chromedp.CSS(`[data-testid="reasoning"] summary`)))
	tb.waitFor("the reasoning shown",
		`(() => { const p = document.querySelector('[data-testid="reasoning"] pre'); return !!p && p.offsetHeight > 0 && p.textContent === 'Six sevens: 7, 14, 21, 28, 35, 42.'; })()`,
		`document.querySelector('[data-testid="reasoning"]').outerHTML`)
	tb.screenshot("1-reasoning")

	tb.do("click the rambler in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-`+rambler+`"]`)))
	tb.waitFor("the rambler's receipt marked as an error that says the answer was cut off",
		`[...document.querySelectorAll('.receipt.error, .msg-error')].some(e => e.textContent.includes('cut off'))`,
		`document.querySelector('#delegation') && document.querySelector('#delegation').innerText`)
	tb.screenshot("2-cut-off")
}
