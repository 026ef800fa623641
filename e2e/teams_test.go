package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/delegationstudio/studio/internal/delegation"
)

// What TestTeamEditor types and expects back.
const (
	teamName       = "e2e-researchers"
	researcherDesc = "Researches one question and returns a short answer."
	teamPrompt     = "At what temperature does water boil at sea level?"
	researchAnswer = "RESEARCH: water boils at 100 C at sea level."
	finalAnswer    = "Water boils at 100 C at sea level, says the researcher."
	// teamScript is typed into the script textarea: main delegates to the
	// researcher, which answers.
	teamScript = `{"main": [{"content": "Asking the researcher.", "tool_calls": [{"name": "task", "args": {"description": "Find the boiling point of water at sea level.", "subagent_type": "researcher"}}]}, {"content": "` + finalAnswer + `"}], "researcher": [[{"content": "` + researchAnswer + `"}]]}`
)

// teamInput is the team form's input of that name.
func teamInput(name string) chromedp.CSS {
	return chromedp.CSS(`[data-testid="team-form"] [name="` + name + `"]`)
}

// typeField replaces what a form field holds with text, by key events: the
// field's text is selected, then the keys typed replace it (a Backspace
// when text is empty), so the page's input listeners fire as for a person.
func typeField(tb *tab, name, text string) {
	tb.t.Helper()
	sel := teamInput(name)
	eval[bool](tb, `(() => { const el = document.querySelector(`+jsString(string(sel))+`); el.focus(); el.select(); return true; })()`)
	keys := text
	if keys == "" {
		keys = kb.Backspace
	}
	tb.do("type into "+name, chromedp.SendKeys(sel, keys))
	if got := eval[string](tb, `document.querySelector(`+jsString(string(sel))+`).value`); got != text {
		tb.t.Fatalf("after typing into %s it holds %q; want %q", name, got, text)
	}
}

// readTeamForm is every named field of the team form, as a browser would
// send it: a checkbox group is the list of its checked values.
const readTeamForm = `(() => {
  const out = {};
  for (const el of document.querySelector('[data-testid="team-form"]').elements) {
    if (!el.name || el.type === 'submit' || el.type === 'hidden') continue;
    if (el.type === 'checkbox') {
      out[el.name] = out[el.name] || [];
      if (el.checked) out[el.name].push(el.value);
      continue;
    }
    out[el.name] = [el.value];
  }
  return out;
})()`

// shownError is a field-error list of the page and where it stands.
type shownError struct {
	Field    string   `json:"field"`
	Msgs     []string `json:"msgs"`
	Subagent string   `json:"subagent"` // data-index of the subagent fieldset it is in, "" for none
	Parent   string   `json:"parent"`   // data-testid of its parent element, "" for none
	AtInput  bool     `json:"atInput"`  // it is in the .field of the input of that name
	Invalid  bool     `json:"invalid"`  // that input has aria-invalid="true" and its .field the class invalid
}

const readShownErrors = `[...document.querySelectorAll('[data-testid="field-error"]')].map(ul => {
  const sub = ul.closest('[data-testid="subagent"]');
  const field = ul.closest('.field');
  const input = field ? [...field.querySelectorAll('[name]')].find(i => i.name === ul.dataset.field) : null;
  return {
    field: ul.dataset.field,
    msgs: [...ul.querySelectorAll('li')].map(li => li.textContent),
    subagent: sub ? sub.dataset.index : '',
    parent: ul.parentElement.dataset.testid || '',
    atInput: !!input,
    invalid: !!input && input.getAttribute('aria-invalid') === 'true' && field.classList.contains('invalid'),
  };
})`

// subIndex is N of a "subagents[N]..." key, "" for another key.
var subIndex = regexp.MustCompile(`^subagents\[(\d+)\]\.`)

// checkShownErrors checks that the page shows exactly want (field →
// messages), each subagent's in its fieldset at its input, marked invalid,
// and nothing in the list of problems with no field.
func checkShownErrors(tb *tab, want map[string][]string) {
	t := tb.t
	t.Helper()
	shown := eval[[]shownError](tb, readShownErrors)
	got := map[string]shownError{}
	for _, e := range shown {
		if _, dup := got[e.Field]; dup {
			t.Errorf("two error lists for %s", e.Field)
		}
		got[e.Field] = e
	}
	for _, field := range slices.Sorted(maps.Keys(want)) {
		e, ok := got[field]
		if !ok {
			t.Errorf("no error shown at %s; want %q", field, want[field])
			continue
		}
		if !slices.Equal(e.Msgs, want[field]) {
			t.Errorf("at %s the page shows %q; want %q", field, e.Msgs, want[field])
		}
		if m := subIndex.FindStringSubmatch(field); m != nil {
			if e.Subagent != m[1] {
				t.Errorf("the error at %s stands in subagent fieldset %q; want %q", field, e.Subagent, m[1])
			}
			if !e.AtInput || !e.Invalid {
				t.Errorf("the error at %s: next to its input %v, input marked invalid %v; want both", field, e.AtInput, e.Invalid)
			}
		} else if field == "subagents" && e.Parent != "subagents" {
			t.Errorf("the error at subagents stands in %q; want the subagents fieldset", e.Parent)
		}
	}
	for field, e := range got {
		if _, ok := want[field]; !ok {
			t.Errorf("unexpected error at %s: %q", field, e.Msgs)
		}
	}
	if top := eval[string](tb, `[...document.querySelectorAll('[data-testid="errors"]')].map(e => e.textContent).join(' | ')`); top != "" {
		t.Errorf("problems shown with no field of their own: %q", top)
	}
}

// checkFormValues checks the form's fields hold want.
func checkFormValues(tb *tab, when string, want map[string][]string) {
	tb.t.Helper()
	got := eval[map[string][]string](tb, readTeamForm)
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			tb.t.Errorf("%s: the form has no field %s", when, k)
			continue
		}
		if !slices.Equal(g, want[k]) {
			tb.t.Errorf("%s: %s holds %q; want %q", when, k, g, want[k])
		}
	}
}

// taskPreview is the live preview's task description and its size.
type taskPreview struct {
	Text  string `json:"text"`
	Chars int    `json:"chars"`
}

const readTaskPreview = `(() => {
  const d = document.querySelector('#team-preview [data-testid="task-description"]');
  const s = document.querySelector('#team-preview [data-testid="task-size"]');
  return {text: d ? d.textContent : '', chars: s ? parseInt(s.dataset.chars, 10) : -1};
})()`

const describePreview = `'preview' + (document.querySelector('#team-preview').classList.contains('stale') ? ' (stale)' : '') + ': ' +
  document.querySelector('#team-preview').textContent.replace(/\s+/g, ' ').slice(0, 1500)`

// previewHasLine is a predicate: the preview's task description has the
// line exactly, and its size is chars characters.
func previewHasLine(line string, chars int) string {
	return `(() => {
  const d = document.querySelector('#team-preview [data-testid="task-description"]');
  const s = document.querySelector('#team-preview [data-testid="task-size"]');
  return !!d && d.textContent.split('\n').includes(` + jsString(line) + `) && parseInt(s.dataset.chars, 10) === ` + fmt.Sprint(chars) + `;
})()`
}

// subagentCount is a predicate: the loaded form has n subagent fieldsets.
func subagentCount(n int) string {
	return `document.readyState === 'complete' && document.querySelectorAll('[data-testid="team-form"] [data-testid="subagent"]').length === ` + fmt.Sprint(n)
}

const describeForm = `location.pathname + ' ' + document.readyState + '; ' +
  document.querySelectorAll('[data-testid="subagent"]').length + ' subagents; notice: ' +
  ((document.querySelector('[data-testid="notice"]') || {}).textContent || '')`

// addSubagent clicks the add button and waits for the form to come back
// with n subagents.
func addSubagent(tb *tab, n int) {
	tb.t.Helper()
	tb.do("click Add a subagent", chromedp.Click(chromedp.CSS(`[data-testid="add-subagent"]`)))
	tb.waitFor(fmt.Sprintf("the form comes back with %d subagents", n), subagentCount(n), describeForm)
}

// TestTeamEditor creates a team in the editor as a person would: it
// watches the live preview follow the typing, triggers every spec error of
// delegation.md §2 the form can hold, fixes them, saves, and runs the team.
func TestTeamEditor(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)

	// 1. A new team: the preview shows general-purpose only.
	tb.navigate(s.URL + "/teams/new")
	tb.waitFor("the new-team form and its preview are shown",
		`document.readyState === 'complete' && document.querySelector('[data-testid="team-form"]') && document.querySelector('#team-preview [data-testid="task-description"]')`,
		describeForm)
	if h := eval[string](tb, `document.querySelector('h1').textContent.trim()`); h != "New team" {
		t.Errorf("the page's heading is %q; want New team", h)
	}
	typeField(tb, "name", teamName)
	before := eval[taskPreview](tb, readTaskPreview)
	gpLine := "- general-purpose: " + delegation.GeneralPurpose.Description
	if !slices.Contains(strings.Split(before.Text, "\n"), gpLine) || strings.Contains(before.Text, "- researcher") {
		t.Fatalf("the new team's task description lacks the general-purpose line or has a researcher:\n%s", before.Text)
	}
	if n := len([]rune(before.Text)); before.Chars != n {
		t.Errorf("the preview says %d characters; its task description has %d", before.Chars, n)
	}
	tb.screenshot("1-new")

	// 2. The preview follows the typing, without a submission.
	addSubagent(tb, 1)
	checkFormValues(tb, "after adding a subagent", map[string][]string{
		"name": {teamName}, "subagents[0].name": {""}, "subagents[0].mode": {"isolated"},
	})
	eval[bool](tb, `window.__noReload = true`)
	typeField(tb, "subagents[0].name", "researcher")
	typeField(tb, "subagents[0].description", researcherDesc)
	researcherLine := "- researcher: " + researcherDesc
	withResearcher := before.Chars + len([]rune("\n"+researcherLine))
	tb.waitFor("the preview shows the researcher's line and grows by it", previewHasLine(researcherLine, withResearcher), describePreview)
	tb.screenshot("2-preview-researcher")

	// The mode is a select: fork is picked with a key, as on a closed
	// select a person's key does.
	tb.do("pick fork", chromedp.SendKeys(teamInput("subagents[0].mode"), "f"))
	if m := eval[string](tb, `document.querySelector(`+jsString(string(teamInput("subagents[0].mode")))+`).value`); m != "fork" {
		t.Fatalf("after the key f the mode select holds %q; want fork", m)
	}
	forkLine := researcherLine + delegation.ForkSuffix
	tb.waitFor("the researcher's line ends with the fork suffix", previewHasLine(forkLine, withResearcher+len([]rune(delegation.ForkSuffix))), describePreview)
	if !eval[bool](tb, `window.__noReload === true`) {
		t.Fatalf("the page was reloaded or left while the preview updated: the preview must follow the typing without a submission")
	}
	tb.screenshot("3-preview-fork")

	// 3. Every §2 error the form can hold, at once.
	// The mode is a select of isolated and fork, and the tools are
	// checkboxes of the stack: an invalid mode or an unknown tool cannot be
	// entered in the browser (the HTTP tests post them).
	if opts := eval[[]string](tb, `[...document.querySelector(`+jsString(string(teamInput("subagents[0].mode")))+`).options].map(o => o.value)`); !slices.Equal(opts, []string{"isolated", "fork"}) {
		t.Errorf("the mode select offers %q; want isolated and fork only", opts)
	}
	if tools := eval[[]string](tb, `[...document.querySelectorAll('[data-testid="team-form"] input[name="subagents[0].tools"]')].map(i => i.value)`); !slices.Equal(tools, delegation.StackToolNames()) {
		t.Errorf("the subagent's tool checkboxes are %q; want the stack %q", tools, delegation.StackToolNames())
	}
	typeField(tb, "subagents[0].skills", "web, math") // skills on a fork
	addSubagent(tb, 2)
	typeField(tb, "subagents[1].name", "researcher") // a duplicate name
	typeField(tb, "subagents[1].description", "Double-checks the findings.")
	typeField(tb, "subagents[1].response_format", `"Findings"`) // a string, not a schema
	addSubagent(tb, 3)
	typeField(tb, "subagents[2].description", "Has no name yet.") // no name
	addSubagent(tb, 4)
	typeField(tb, "subagents[3].name", "writer") // no description
	typed := map[string][]string{
		"name":                         {teamName},
		"agent.general_purpose":        {"on"},
		"subagents[0].name":            {"researcher"},
		"subagents[0].description":     {researcherDesc},
		"subagents[0].mode":            {"fork"},
		"subagents[0].skills":          {"web, math"},
		"subagents[1].name":            {"researcher"},
		"subagents[1].description":     {"Double-checks the findings."},
		"subagents[1].mode":            {"isolated"},
		"subagents[1].response_format": {`"Findings"`},
		"subagents[2].name":            {""},
		"subagents[2].description":     {"Has no name yet."},
		"subagents[3].name":            {"writer"},
		"subagents[3].description":     {""},
	}
	checkFormValues(tb, "before saving", typed)
	tb.do("click Save", chromedp.Click(chromedp.CSS(`[data-testid="save"]`)))
	tb.waitFor("the form comes back with its problems",
		`document.readyState === 'complete' && document.querySelector('[data-testid="notice"]') && document.querySelectorAll('[data-testid="subagent"]').length === 4`, describeForm)
	tb.screenshot("4-errors")
	if got, want := eval[string](tb, `location.pathname`), "/teams"; got != want {
		t.Errorf("the form with errors is at %s; want %s (nothing saved)", got, want)
	}
	if got, want := eval[string](tb, `document.querySelector('[data-testid="notice"]').textContent`), "5 problems: each is shown at its field below. Nothing was saved."; got != want {
		t.Errorf("the notice reads %q; want %q", got, want)
	}
	checkShownErrors(tb, map[string][]string{
		"subagents[0].skills":          {"SubAgent 'researcher' cannot set skills under mode='fork'; the parent's skills are inherited instead."},
		"subagents[1].name":            {"Duplicate subagent name 'researcher'; each subagent must have a unique name."},
		"subagents[1].response_format": {`SubAgent 'researcher' has unsupported response_format of type string; expected a JSON Schema object with a "title"`},
		"subagents[2].name":            {"every subagent needs a name: it is what the parent puts in subagent_type"},
		"subagents[3].description":     {"SubAgent 'writer' needs a description: it is the line the parent reads when choosing whom to delegate to"},
	})
	checkFormValues(tb, "after the 400", typed)

	// General-purpose off and no subagent: a submission of its own, in a
	// tab of its own.
	t.Run("general-purpose off with no subagent", func(t *testing.T) {
		tb2 := newTab(t)
		tb2.navigate(s.URL + "/teams/new")
		typeField(tb2, "name", "e2e-nobody")
		tb2.do("uncheck general-purpose", chromedp.Click(teamInput("agent.general_purpose")))
		// The live check puts the problem at its field and keeps the last
		// preview that built, saying so.
		tb2.waitFor("the live check says the team does not build",
			`[...document.querySelectorAll('ul.field-errors[data-field="subagents"] li')].some(li => li.textContent.trim() === 'At least one subagent must be specified') &&
			 !document.querySelector('[data-stale-note]').hidden && document.querySelector('#team-preview [data-testid="task-description"]')`,
			describePreview)
		// The live check has put a notice on this page already: wait for
		// the page the submission brings back, not for this one.
		tb2.noReload()
		tb2.do("click Save", chromedp.Click(chromedp.CSS(`[data-testid="save"]`)))
		tb2.waitFor("the form comes back with its problem",
			`window.__noReload !== true && document.readyState === 'complete' && document.querySelector('[data-testid="notice"]')`, describeForm)
		tb2.screenshot("5-no-subagent")
		if got, want := eval[string](tb2, `document.querySelector('[data-testid="notice"]').textContent`), "1 problem: each is shown at its field below. Nothing was saved."; got != want {
			t.Errorf("the notice reads %q; want %q", got, want)
		}
		checkShownErrors(tb2, map[string][]string{"subagents": {"At least one subagent must be specified"}})
		checkFormValues(tb2, "after the 400", map[string][]string{"name": {"e2e-nobody"}, "agent.general_purpose": {}})
	})

	// 4. Fixed, with a prompt and a script, it saves.
	typeField(tb, "subagents[0].skills", "")
	typeField(tb, "subagents[1].name", "reviewer")
	typeField(tb, "subagents[1].response_format", "")
	typeField(tb, "subagents[2].name", "editor")
	typeField(tb, "subagents[3].description", "Writes the report.")
	typeField(tb, "prompt", teamPrompt)
	typeField(tb, "script", teamScript)
	tb.waitFor("the live preview builds the fixed team",
		`!document.querySelector('#team-preview').classList.contains('stale') && (document.querySelector('#team-preview [data-testid="task-description"]') || {textContent: ''}).textContent.split('\n').includes('- writer: Writes the report.')`,
		describePreview)
	fixed := eval[taskPreview](tb, readTaskPreview)
	wantLines := []string{gpLine, forkLine, "- reviewer: Double-checks the findings.", "- editor: Has no name yet.", "- writer: Writes the report."}
	// The subagent list is the first run of "- " lines; the usage notes
	// come after it, past a blank line.
	var gotLines []string
	for _, l := range strings.Split(fixed.Text, "\n") {
		if strings.HasPrefix(l, "- ") {
			gotLines = append(gotLines, l)
		} else if len(gotLines) > 0 {
			break
		}
	}
	if !slices.Equal(gotLines, wantLines) {
		t.Errorf("the fixed team's subagent lines are\n%q\nwant\n%q", gotLines, wantLines)
	}
	tb.screenshot("6-fixed")
	tb.do("click Save", chromedp.Click(chromedp.CSS(`[data-testid="save"]`)))
	tb.waitFor("the saved team's page is open",
		`/^\/teams\/[^/]+$/.test(location.pathname) && document.readyState === 'complete' && document.querySelector('[data-testid="run"]')`, describeForm)
	tb.screenshot("7-saved")
	teamPath := eval[string](tb, `location.pathname`)
	// POST /teams answered 303: the page is the GET it redirected to.
	if nav := eval[string](tb, `(() => { const n = performance.getEntriesByType('navigation')[0]; return n.type + ' ' + n.redirectCount; })()`); nav != "navigate 1" {
		t.Errorf("the saved team's page came by %q; want a navigation after 1 redirect (303 then GET)", nav)
	}
	if h := eval[string](tb, `document.querySelector('h1').textContent.trim()`); h != teamName {
		t.Errorf("the saved team's heading is %q; want %q", h, teamName)
	}
	if n := eval[int](tb, `document.querySelectorAll('[data-testid="notice"], [data-testid="field-error"], [data-testid="errors"]').length`); n != 0 {
		t.Errorf("the saved team's page shows %d problems: %s", n, eval[string](tb, describeForm))
	}
	checkFormValues(tb, "the saved team", map[string][]string{
		"name":                         {teamName},
		"agent.general_purpose":        {"on"},
		"subagents[0].name":            {"researcher"},
		"subagents[0].description":     {researcherDesc},
		"subagents[0].mode":            {"fork"},
		"subagents[0].skills":          {""},
		"subagents[1].name":            {"reviewer"},
		"subagents[1].description":     {"Double-checks the findings."},
		"subagents[1].mode":            {"isolated"},
		"subagents[1].response_format": {""},
		"subagents[2].name":            {"editor"},
		"subagents[2].description":     {"Has no name yet."},
		"subagents[3].name":            {"writer"},
		"subagents[3].description":     {"Writes the report."},
		"prompt":                       {teamPrompt},
	})
	if n := eval[int](tb, `document.querySelectorAll('[data-testid="subagent"]').length`); n != 4 {
		t.Errorf("the saved team shows %d subagents; want 4", n)
	}
	// The script comes back indented: the same JSON.
	savedScript := eval[string](tb, `document.querySelector(`+jsString(string(teamInput("script")))+`).value`)
	var want, got any
	if err := json.Unmarshal([]byte(teamScript), &want); err != nil {
		t.Fatalf("the test's script: %v", err)
	}
	if err := json.Unmarshal([]byte(savedScript), &got); err != nil || !jsonEqual(got, want) {
		t.Errorf("the saved script reads\n%s\nwant the JSON typed:\n%s", savedScript, teamScript)
	}
	if t.Failed() {
		t.FailNow()
	}

	// 5. Run it: the session page, the researcher in the tree, its answer
	// as the receipt.
	tb.do("click Run", chromedp.Click(chromedp.CSS(`[data-testid="run"]`)))
	tb.waitFor("the new session's page is open",
		`location.pathname.startsWith('/sessions/') && document.readyState === 'complete' && document.querySelector('.session[data-session]')`,
		`location.href`)
	id := eval[string](tb, `document.querySelector('.session').dataset.session`)
	if path := eval[string](tb, `location.pathname`); path != "/sessions/"+id {
		t.Fatalf("Run on %s landed on %s; want /sessions/%s", teamPath, path, id)
	}
	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.screenshot("8-session-done")
	type run struct {
		Name   string   `json:"name"`
		Nodes  []string `json:"nodes"`
		A1     string   `json:"a1"`
		Answer string   `json:"answer"`
	}
	r := eval[run](tb, `(() => ({
  name: document.querySelector('.session h1').textContent.trim(),
  nodes: [...document.querySelectorAll('#tree g[data-testid^="node-"]')].map(n => n.dataset.testid + ' ' + n.getAttribute('class').replace(' node-selected', '')).sort(),
  a1: [...document.querySelectorAll('#tree [data-testid="node-a1"] text.name, #tree [data-testid="node-a1"] text.mode')].map(t => t.textContent.trim()).join(' '),
  answer: (document.querySelector('[data-testid="answer"] pre') || {}).textContent || '',
}))()`)
	if r.Name != teamName {
		t.Errorf("the session is named %q; want the team's name %q", r.Name, teamName)
	}
	if want := []string{"node-a1 node node-done", "node-main node node-done"}; !slices.Equal(r.Nodes, want) {
		t.Errorf("the tree shows %q; want %q", r.Nodes, want)
	}
	if r.A1 != "researcher fork" {
		t.Errorf("node-a1 is labelled %q; want researcher fork", r.A1)
	}
	if r.Answer != finalAnswer {
		t.Errorf("the answer reads %q; want %q", r.Answer, finalAnswer)
	}
	tb.do("click the researcher in the tree", chromedp.Click(chromedp.CSS(`#tree [data-testid="node-a1"]`)))
	tb.waitFor("the delegation to a1 is open",
		`location.search.includes('agent=a1') && document.readyState === 'complete' && document.querySelector('[data-testid="receipt"]')`, `location.href`)
	tb.screenshot("9-receipt")
	d := eval[delegationPage](tb, readDelegation)
	if d.Receipt == nil || *d.Receipt != researchAnswer {
		t.Errorf("the researcher's receipt reads %v; want %q", d.Receipt, researchAnswer)
	}
	if !d.Fork || !strings.Contains(d.Child, "Find the boiling point of water at sea level.") {
		t.Errorf("the researcher's pane: fork note %v, task shown %v; want a fork given the script's task", d.Fork, strings.Contains(d.Child, "Find the boiling point"))
	}
	tr := s.trace(t, id)
	if tr.Session.Status != "done" || len(tr.Agents) != 2 || tr.Agents[1].ID != "a1" || tr.Agents[1].Name != "researcher" ||
		tr.Agents[1].Mode == nil || *tr.Agents[1].Mode != "fork" {
		t.Errorf("the session's trace: status %s, agents %+v; want done, main and a1 the researcher as a fork", tr.Session.Status, tr.Agents)
	}
}

// jsonEqual compares two decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
