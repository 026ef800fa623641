package lessons

import (
	"context"
	"encoding/json"
	"io/fs"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	pageview "github.com/delegationstudio/studio/internal/view"
	"github.com/delegationstudio/studio/web/templates"
)

// specific holds each lesson's own assertions, beyond "every check is OK".
var specific = map[string]func(t *testing.T, tab Table, runs map[string]*trace.Trace){
	"tool-stack":            testToolStack,
	"task-description":      testTaskDescription,
	"one-delegation":        testOneDelegation,
	"parent-after":          testParentAfter,
	"receipt":               testReceipt,
	"files-and-todos":       testFilesAndTodos,
	"nested-delegation":     testNestedDelegation,
	"config-errors":         testConfigErrors,
	"order-number":          testOrderNumber,
	"system-prompt":         testSystemPrompt,
	"entry-cost":            testEntryCost,
	"cache-and-cost":        testCacheAndCost,
	"summarized-fork":       testSummarizedFork,
	"pipeline":              testPipeline,
	"fan-out":               testFanOut,
	"review-loop":           testReviewLoop,
	"read-only-explorer":    testReadOnlyExplorer,
	"failure-isolation":     testFailureIsolation,
	"lost-update":           testLostUpdate,
	"when-to-delegate":      testWhenToDelegate,
	"what-a-child-inherits": testWhatAChildInherits,
	"isolated-or-fork":      testIsolatedOrFork,
	"structured-fork":       testStructuredFork,
	"received-deepagents":   testReceivedDeepagents,
	"big-reads":             testBigReads,
	"article-loop":          testArticleLoop,
}

// TestEveryLesson runs every lesson, all its variants, through session.Run
// and trace.Build, computes its table, and checks it: the table's shape,
// every Check OK, and the lesson's own assertions.
func TestEveryLesson(t *testing.T) {
	t.Parallel()
	all := All()
	if len(all) != len(registry) {
		t.Fatalf("All() = %d lessons, the registry has %d", len(all), len(registry))
	}
	// Every lesson starts at once, whatever -parallel allows: lessons
	// mostly wait out their delays, made for watching.
	type result struct {
		runs map[string]*trace.Trace
		err  error
		done chan struct{}
	}
	results := map[string]*result{}
	for _, l := range all {
		r := &result{done: make(chan struct{})}
		results[l.Name] = r
		go func() {
			defer close(r.done)
			r.runs, r.err = l.Run(context.Background())
		}()
	}
	for _, l := range all {
		t.Run(l.Name, func(t *testing.T) {
			t.Parallel()
			r := results[l.Name]
			<-r.done
			checkMetadata(t, l)
			runs, err := r.runs, r.err
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			var took time.Duration
			for _, v := range l.Variants {
				tr := runs[v.Name]
				if tr.Session.Status != v.Expect {
					t.Fatalf("variant %s ended %s, want %s: %s", v.Name, tr.Session.Status, v.Expect, tr.Session.Error)
				}
				took += playTime(t, tr)
				checkNotes(t, l, v, tr)
			}
			// About 4 s for every variant one after another: what a person
			// waits for, the model calls (their delays) on the longest path.
			t.Logf("%d variant(s), %v to watch one after another", len(l.Variants), took)
			if took > 4200*time.Millisecond {
				t.Errorf("the lesson's runs take %v one after another; keep them to about 4 s", took)
			}
			tab, err := l.Table(runs)
			if err != nil {
				t.Fatalf("table: %v", err)
			}
			checkShape(t, tab)
			checkCounted(t, tab)
			checkTexts(t, l, tab)
			checkChinese(t, l, tab)
			computed.Lock()
			computed.names[l.Name] = true
			computed.Unlock()
			for _, c := range tab.Checks {
				if !c.OK {
					t.Errorf("check failed: %s (%s)", c.Claim, c.Detail)
				}
			}
			f := specific[l.Name]
			if f == nil {
				t.Fatalf("no specific test for lesson %s", l.Name)
			}
			f(t, tab, runs)
		})
	}
}

// checkCounted holds every figure counted as the article counts to the
// 15 % rule: further off than that, the table says why; within it, no
// reason is left over from an earlier gap.
func checkCounted(t *testing.T, tab Table) {
	t.Helper()
	for _, x := range tab.Versus {
		c := x.Counted
		switch {
		case c == nil:
		case c.Off() && c.Gap == "":
			t.Errorf("%q counted as the article counts is %d against the article's %d (%s), more than 15 %% off, and the table does not say why",
				x.What, c.Ours, c.Article, c.Diff())
		case !c.Off() && c.Gap != "":
			t.Errorf("%q counted as the article counts is %d against %d (%s), within 15 %%, yet keeps a reason for a gap: %q",
				x.What, c.Ours, c.Article, c.Diff(), c.Gap)
		}
	}
}

// countedOf is the Versus named what, which must carry a counted figure.
func countedOf(t *testing.T, tab Table, what string) Counted {
	t.Helper()
	for _, x := range tab.Versus {
		if x.What == what {
			if x.Counted == nil {
				t.Fatalf("%q has no figure counted as the article counts", what)
			}
			return *x.Counted
		}
	}
	t.Fatalf("no figure %q beside the article's", what)
	return Counted{}
}

// checkNotes holds a variant's session to the notes its lesson expects
// ("Worth a look"): exactly those kinds, in that order, and no other.
func checkNotes(t *testing.T, l Lesson, v Variant, tr *trace.Trace) {
	t.Helper()
	st, err := pageview.FromTrace(tr, pageview.BudgetOf(tr.Scenario))
	if err != nil {
		t.Fatalf("variant %s: fold its log: %v", v.Name, err)
	}
	var got []string
	for _, n := range st.Notes {
		got = append(got, n.Kind)
	}
	if want := l.Notes[v.Name]; !slices.Equal(got, want) {
		var texts []string
		for _, n := range st.Notes {
			texts = append(texts, n.Kind+": "+n.Text)
		}
		t.Errorf("variant %s shows the notes %q, want %q (declare a note the lesson means in its notes; mend a rule that cries wolf):\n%s",
			v.Name, got, want, strings.Join(texts, "\n"))
	}
}

// playTime is how long a run takes to watch: each agent's model calls one
// after another, and the children of one message side by side (the longest
// of them). A call takes the delay_ms of the scripted turn it played (the
// longest of a turn's cases): what a person waits for, whatever the load
// on the machine that ran it.
func playTime(t *testing.T, tr *trace.Trace) time.Duration {
	t.Helper()
	var doc struct {
		Script map[string]json.RawMessage `json:"script"`
	}
	if err := json.Unmarshal(tr.Scenario, &doc); err != nil {
		t.Fatalf("the run's scenario: %v", err)
	}
	type scriptTurn struct {
		DelayMS int  `json:"delay_ms"`
		Summary *any `json:"summary"`
		Cases   []struct {
			DelayMS int `json:"delay_ms"`
		} `json:"cases"`
	}
	delay := func(st scriptTurn) time.Duration {
		d := st.DelayMS
		for _, c := range st.Cases {
			d = max(d, c.DelayMS)
		}
		return time.Duration(d) * time.Millisecond
	}
	turnsOf := func(a trace.Agent) []scriptTurn {
		raw, ok := doc.Script[a.Name]
		if !ok {
			return nil
		}
		var turns []scriptTurn
		if a.ParentID == nil {
			_ = json.Unmarshal(raw, &turns)
			return turns
		}
		var invocations [][]scriptTurn
		if json.Unmarshal(raw, &invocations) == nil && a.Invocation < len(invocations) {
			return invocations[a.Invocation]
		}
		return nil
	}
	callMsg := map[string]string{} // task call id → the message holding it
	for _, m := range tr.Messages {
		for _, tc := range m.ToolCalls {
			callMsg[tc.ID] = m.ID
		}
	}
	children := map[string][]trace.Agent{} // message id → the children it started
	for _, a := range tr.Agents {
		if a.TaskCallID != nil {
			id := callMsg[*a.TaskCallID]
			children[id] = append(children[id], a)
		}
	}
	var of func(a trace.Agent) time.Duration
	of = func(a trace.Agent) time.Duration {
		turns := turnsOf(a)
		next := 0
		var d time.Duration
		for _, c := range tr.ModelCalls {
			if c.AgentID != a.ID {
				continue
			}
			// A summary call plays a summary turn when one is next, and
			// none otherwise; any other call plays the next turn.
			if next < len(turns) && (c.Purpose != string(delegation.PurposeSummary) || turns[next].Summary != nil) {
				d += delay(turns[next])
				next++
			}
			if c.OutputMessageID == nil {
				continue
			}
			var longest time.Duration
			for _, ch := range children[*c.OutputMessageID] {
				longest = max(longest, of(ch))
			}
			d += longest
		}
		return d
	}
	for _, a := range tr.Agents {
		if a.ParentID == nil {
			return of(a)
		}
	}
	return 0
}

func checkMetadata(t *testing.T, l Lesson) {
	t.Helper()
	if l.Title == "" || len(l.Description) < 80 || l.Article == "" {
		t.Fatalf("lesson %s needs a title, an article and an explanation of 80 characters or more", l.Name)
	}
	if !strings.HasPrefix(l.Description, strings.SplitN(l.Article, ",", 2)[0]) && !strings.HasPrefix(l.Description, "Ours") {
		t.Errorf("the description should open by naming the article: %q", l.Description)
	}
	if len(l.Variants) == 0 || string(l.Scenario) != string(l.Variants[0].Scenario) {
		t.Fatalf("Scenario must be the first variant's")
	}
	seen := map[string]bool{}
	for _, v := range l.Variants {
		if v.Name == "" || v.Label == "" || seen[v.Name] {
			t.Fatalf("variant %q: needs a unique name and a label", v.Name)
		}
		seen[v.Name] = true
		if v.Recorded != nil {
			if _, err := recordedTrace(v.Recorded); err != nil {
				t.Fatalf("variant %s: the recorded trace: %v", v.Name, err)
			}
			continue
		}
		sc, err := scenario.Parse(v.Scenario)
		if err != nil {
			t.Fatalf("variant %s: invalid: %v", v.Name, err)
		}
		if len(sc.Warnings) > 0 {
			t.Fatalf("variant %s: warnings: %v", v.Name, sc.Warnings)
		}
		if got, want := sc.File.Name+".json", fileName(l.Name, v.Name); got != want {
			t.Errorf("variant %s: scenario name gives %s, the file is %s", v.Name, got, want)
		}
		if sc.File.Title == "" || len(sc.File.Description) < 80 {
			t.Errorf("variant %s: the scenario needs a title and a description that explains it", v.Name)
		}
	}
}

func checkShape(t *testing.T, tab Table) {
	t.Helper()
	if tab.Title == "" || len(tab.Columns) == 0 || len(tab.Rows) == 0 || tab.Note == "" || len(tab.Checks) == 0 {
		t.Fatalf("table incomplete: %+v", tab)
	}
	for i, r := range tab.Rows {
		if len(r) != len(tab.Columns) {
			t.Errorf("row %d has %d cells for %d columns: %q", i, len(r), len(tab.Columns), r)
		}
	}
	if a := tab.Article; a != nil {
		for i, r := range a.Rows {
			if len(r) != len(a.Columns) {
				t.Errorf("article row %d has %d cells for %d columns", i, len(r), len(a.Columns))
			}
		}
	}
	for _, c := range tab.Checks {
		if c.Claim == "" || c.Detail == "" {
			t.Errorf("check without a claim or a detail: %+v", c)
		}
	}
	// The page shows the article and ours row by row.
	if len(tab.Versus) == 0 {
		t.Errorf("no row sets the article's figures (or deepagents' behaviour) beside ours")
	}
	for _, v := range tab.Versus {
		if v.What == "" || v.Article == "" || v.Ours == "" || v.Why == "" {
			t.Errorf("a versus row lacks a part: %+v", v)
		}
	}
}

// cell returns the cell of the row whose first cell is first.
func cell(t *testing.T, tab Table, first, column string) string {
	t.Helper()
	ci := slices.Index(tab.Columns, column)
	if ci < 0 {
		t.Fatalf("no column %q in %q", column, tab.Columns)
	}
	for _, r := range tab.Rows {
		if r[0] == first {
			return r[ci]
		}
	}
	t.Fatalf("no row %q", first)
	return ""
}

func num(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.Fields(s)[0])
	if err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}

func agentNamed(t *testing.T, tr *trace.Trace, name string) trace.Agent {
	t.Helper()
	for _, a := range tr.Agents {
		if a.Name == name {
			return a
		}
	}
	t.Fatalf("no agent %s", name)
	return trace.Agent{}
}

func receiptOf(t *testing.T, tr *trace.Trace, child trace.Agent) trace.Message {
	t.Helper()
	for _, m := range tr.Messages {
		if m.Kind == string(delegation.KindReceipt) && m.ToolCallID != nil && child.TaskCallID != nil && *m.ToolCallID == *child.TaskCallID {
			return m
		}
	}
	t.Fatalf("no receipt for %s", child.Name)
	return trace.Message{}
}

func testToolStack(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := len(tab.Rows); got != 9 {
		t.Fatalf("rows = %d, want 8 tools and the total", got)
	}
	sum := 0
	for _, r := range tab.Rows[:8] {
		sum += num(t, r[2])
	}
	if total := num(t, tab.Rows[8][2]); total != sum {
		t.Errorf("total %d, sum of the tools %d", total, sum)
	}
	if tab.Rows[0][1] != "task" && tab.Rows[1][1] != "task" {
		t.Errorf("task is not among the two most expensive: %q", tab.Rows[:2])
	}
}

func testTaskDescription(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	chars := func(team string) int { return num(t, cell(t, tab, team, "characters")) }
	if got := chars("researcher") - chars("default"); got != 19 {
		t.Errorf("researcher adds %d characters, want 19 (the line '- researcher: 查资料的' and its newline)", got)
	}
	if chars("override") >= chars("default") {
		t.Errorf("override %d, default %d: the override should be shorter", chars("override"), chars("default"))
	}
	if got, want := chars("pair-fork")-chars("pair-isolated"), len([]rune(delegation.ForkSuffix)); got != want {
		t.Errorf("the fork line adds %d characters, want the fork sentence's %d", got, want)
	}
}

func testOneDelegation(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	var got []string
	for _, r := range tab.Rows {
		got = append(got, r[1]+":"+r[2]+":"+strings.Fields(r[4])[0])
	}
	if want := []string{"parent:2:8,", "child:2:7,", "child:4:7,", "parent:4:8,"}; !slices.Equal(got, want) {
		t.Errorf("calls = %q, want %q", got, want)
	}
}

func testParentAfter(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	tr := runs["parent-after"]
	var roles []string
	for _, m := range tr.Messages {
		if m.AgentID == "main" {
			roles = append(roles, m.Role)
		}
	}
	if want := []string{"user", "assistant", "tool", "assistant"}; !slices.Equal(roles, want) {
		t.Errorf("the parent's list = %q, want %q", roles, want)
	}
	r := receiptOf(t, tr, agentNamed(t, tr, "general-purpose"))
	if r.Content != "子 Agent 的最终报告：结论是 42。" || len([]rune(r.Content)) != 21 {
		t.Errorf("receipt %q, want the article's 21-character sentence", r.Content)
	}
	// The article's sentence, counted as the article counts, is its 13.
	if c := countedOf(t, tab, "the receipt: tokens"); c.Ours != 13 {
		t.Errorf("the receipt counted as the article counts is %d tokens, the article's is 13", c.Ours)
	}
	if c := countedOf(t, tab, "the delegation (call + receipt): tokens"); c.Off() {
		t.Errorf("the delegation step counted as the article counts is %d against 68 (%s)", c.Ours, c.Diff())
	}
}

func testReceipt(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	st := receiptOf(t, runs["structured"], agentNamed(t, runs["structured"], "analyst"))
	var v struct {
		Findings   string  `json:"findings"`
		Confidence float64 `json:"confidence"`
	}
	if err := json.Unmarshal([]byte(st.Content), &v); err != nil || v.Findings != "3 条线索" || v.Confidence != 0.82 {
		t.Errorf("structured receipt %q: %v %+v", st.Content, err, v)
	}
	tx := receiptOf(t, runs["text"], agentNamed(t, runs["text"], "analyst"))
	var any any
	if json.Unmarshal([]byte(tx.Content), &any) == nil {
		t.Errorf("the text receipt %q parses as JSON", tx.Content)
	}
	if !strings.HasPrefix(tx.Content, "Final report:") {
		t.Errorf("text receipt %q, want the report, not 'I just wrote a file.' or the empty last message", tx.Content)
	}
}

func testFilesAndTodos(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	want := map[string]string{"messages": "only the receipt", "todos": "no", "structured_response": "no", "files": "yes"}
	for k, w := range want {
		if got := cell(t, tab, k, "comes back?"); got != w {
			t.Errorf("%s comes back: %q, want %q", k, got, w)
		}
	}
}

func testNestedDelegation(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	tr := runs["nested-delegation"]
	fork := agentNamed(t, tr, "forker")
	var found bool
	for _, m := range tr.Messages {
		if m.Content == "You are a subagent and cannot delegate to another subagent. Complete this task yourself instead of calling this tool again." {
			if m.AgentID != fork.ID {
				t.Errorf("the refusal is in %s's list", m.AgentID)
			}
			found = true
		}
	}
	if !found {
		t.Error("no refusal with the exact text of delegation.md §3")
	}
	if got := cell(t, tab, "helper", "tools"); got != "7" {
		t.Errorf("the isolated child has %s tools, want 7", got)
	}
}

func testConfigErrors(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	var all strings.Builder
	for _, r := range tab.Rows {
		all.WriteString(r[1] + "\n")
	}
	for _, exact := range []string{ // delegation.md §2 and §3, verbatim
		"SubAgent 'x' has invalid mode 'shared'; expected 'isolated' or 'fork'",
		"SubAgent 'x' cannot set skills under mode='fork'; the parent's skills are inherited instead.",
		"At least one subagent must be specified",
		"Duplicate subagent name 'x'; each subagent must have a unique name.",
		"We cannot invoke subagent researcher because it does not exist, the only allowed types are `general-purpose`",
	} {
		if !strings.Contains(all.String(), exact) {
			t.Errorf("no row holds %q", exact)
		}
	}
	if got := cell(t, tab, "an empty subagent list", "what you get"); got != "accepted: the subagents are general-purpose" {
		t.Errorf("empty list: %q", got)
	}
	if got := cell(t, tab, "mode 'handoff'", "what you get"); !strings.HasPrefix(got, "accepted") {
		t.Errorf("handoff: %q", got)
	}
}

func testOrderNumber(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	row := func(first string) (string, string) {
		return cell(t, tab, first, "isolated"), cell(t, tab, first, "fork")
	}
	// The fork: the system prompt, the parent's question, its three calls
	// and their results, and the task.
	if i, f := row("opening messages (system prompt + context)"); i != "2" || f != "9" {
		t.Errorf("opening messages %s and %s, want 2 and 9", i, f)
	}
	if i, f := row("A-7731 in its first call's context"); i != "0" || f != "1" {
		t.Errorf("A-7731 appears %s and %s times, want 0 and 1", i, f)
	}
	if i, f := row("the parent's task call (tokens)"); i != f {
		t.Errorf("the parent's call costs %s and %s tokens, want the same", i, f)
	}
	// Counted as the article counts, the fork's opening — deepagents'
	// preamble over the parent's steps — lands on the article's 326, and
	// the article's own task gives its 12 for the isolated child.
	if c := countedOf(t, tab, "opening tokens (system prompt + messages) (fork)"); c.Off() {
		t.Errorf("the fork's opening counted as the article counts is %d against 326 (%s)", c.Ours, c.Diff())
	}
	if c := countedOf(t, tab, "opening tokens (system prompt + messages)"); !strings.HasSuffix(c.Gap, "make 12") {
		t.Errorf("the isolated opening's gap %q does not show the article's task counted to its 12", c.Gap)
	}
}

func testSystemPrompt(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	both := agentNamed(t, runs["both"], "fork")
	parent, child := "You are a helpful AI", "Be concise."
	if len(parent) != 20 || len(child) != 11 {
		t.Fatal("the prompts should be the article's lengths")
	}
	if both.SystemPrompt != parent+"\n\n"+child || len(both.SystemPrompt) != 20+2+11 {
		t.Errorf("fork prompt %q, want parent + blank line + child, 33 characters", both.SystemPrompt)
	}
	if iso := agentNamed(t, runs["both"], "iso"); iso.SystemPrompt != child {
		t.Errorf("isolated prompt %q, want the child's own", iso.SystemPrompt)
	}
}

func testEntryCost(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	var iso, fork []int
	for _, r := range tab.Rows {
		iso = append(iso, num(t, r[1]))
		fork = append(fork, num(t, r[2]))
	}
	if len(iso) != 3 || iso[0] != iso[1] || iso[1] != iso[2] {
		t.Errorf("isolated entry costs %v, want the same at 1, 4 and 8 steps", iso)
	}
	// 1 → 4 is three steps, 4 → 8 four: linear growth means the same per step.
	if d1, d2 := fork[1]-fork[0], fork[2]-fork[1]; d1 <= 0 || d1*4 != d2*3 {
		t.Errorf("fork entry costs %v: not linear in the steps (+%d over 3, +%d over 4)", fork, d1, d2)
	}
	for _, what := range []string{"1 step: fork (tokens)", "8 steps: fork (tokens)", "8 steps: isolated (tokens)"} {
		countedOf(t, tab, what)
	}
	// The line chart is the same figures as numbers, a line per mode, a
	// point per row: the parent's steps against each column.
	want := &LineChart{Series: []LineSeries{{Mode: delegation.ModeIsolated}, {Mode: delegation.ModeFork}}}
	for i, r := range tab.Rows {
		steps := num(t, r[0])
		want.Series[0].Points = append(want.Series[0].Points, LinePoint{X: steps, Y: iso[i]})
		want.Series[1].Points = append(want.Series[1].Points, LinePoint{X: steps, Y: fork[i]})
	}
	if !reflect.DeepEqual(tab.Lines, want) || want.Series[0].Points[2].X != 8 {
		t.Errorf("lines = %+v, want %+v", tab.Lines, want)
	}
}

func testSummarizedFork(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := cell(t, tab, "4417 in the fork's first call", "value"); got != "0" {
		t.Errorf("the door code appears %s times in the fork's first call, want 0", got)
	}
	if got := cell(t, tab, "summarization: file_path", "value"); got != "/conversation_history/main.md" {
		t.Errorf("file_path %q", got)
	}
}

func testPipeline(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	tr := runs["pipeline"]
	w := receiptOf(t, tr, agentNamed(t, tr, "writer"))
	rv := agentNamed(t, tr, "reviewer")
	for _, m := range tr.Messages {
		if m.AgentID == rv.ID && m.Kind == string(delegation.KindTask) && !strings.Contains(m.Content, w.Content) {
			t.Errorf("the reviewer's task lacks the writer's output")
		}
	}
}

func testFanOut(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := len(tab.Rows); got != 4 {
		t.Errorf("rows = %d, want three researchers and the total", got)
	}
}

func testReviewLoop(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	var approved []string
	for _, r := range tab.Rows {
		approved = append(approved, r[4])
		var v struct {
			Approved *bool    `json:"approved"`
			Issues   []string `json:"issues"`
		}
		if err := json.Unmarshal([]byte(r[3]), &v); err != nil || v.Approved == nil || v.Issues == nil {
			t.Errorf("round %s: verdict %q is not a Verdict: %v", r[0], r[3], err)
		}
	}
	if want := []string{"no", "no", "yes"}; !slices.Equal(approved, want) {
		t.Errorf("approved = %q, want %q", approved, want)
	}
}

func testReadOnlyExplorer(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	ex := agentNamed(t, runs["read-only-explorer"], "explorer")
	for _, tc := range ex.Tools {
		if slices.Contains([]string{"write_file", "edit_file", "delete", "task"}, tc.Name) {
			t.Errorf("the explorer has %s", tc.Name)
		}
	}
}

func testFailureIsolation(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	tr := runs["ours"]
	if r := receiptOf(t, tr, agentNamed(t, tr, "flaky")); !r.IsError {
		t.Errorf("the failed child's receipt is not marked is_error: %q", r.Content)
	}
	if r := receiptOf(t, tr, agentNamed(t, tr, "steady")); r.IsError {
		t.Errorf("the sibling's receipt is marked is_error: %q", r.Content)
	}
}

func testLostUpdate(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := runs["snapshot"].Files["/config.md"]; got != "retries = 1\n" {
		t.Errorf("snapshot: /config.md = %q, want the edit lost", got)
	}
	if got := runs["delta"].Files["/config.md"]; got != "retries = 3\n" {
		t.Errorf("delta: /config.md = %q, want the edit kept", got)
	}
	if _, ok := runs["snapshot"].Files["/old.md"]; !ok {
		t.Error("snapshot: the deleted /old.md should survive")
	}
	if _, ok := runs["delta"].Files["/old.md"]; ok {
		t.Error("delta: /old.md should be deleted")
	}
}

func testWhenToDelegate(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	long, short := tab.Rows[0], tab.Rows[1]
	if alone, delegated := num(t, long[2]), num(t, long[3]); delegated*3 > alone {
		t.Errorf("the long search: the parent ends at %d delegated, %d alone", delegated, alone)
	}
	if alone, delegated := num(t, short[4]), num(t, short[5]); delegated <= alone {
		t.Errorf("the one-step job: %d tokens delegated, %d alone: delegating should cost more", delegated, alone)
	}
}

func testBigReads(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	alone := num(t, cell(t, tab, "read by the main agent", "the parent's last context (tokens)"))
	back := num(t, cell(t, tab, "read by a child, all of it back", "the parent's last context (tokens)"))
	moved := num(t, cell(t, tab, "read by a child, all of it back", "moved to a file (tokens)"))
	// Without eviction the parent would hold the whole receipt: more than
	// the log it read itself.
	if moved <= back || back >= alone {
		t.Errorf("all of it back: the parent ends at %d tokens with %d moved to a file; reading it itself, %d", back, moved, alone)
	}
	for _, m := range runs["everything-back"].Messages {
		if m.Kind == string(delegation.KindReceipt) && m.Evicted != nil && runs["everything-back"].Files[m.Evicted.Path] == "" {
			t.Errorf("the evicted receipt's file %s is not among the session's files", m.Evicted.Path)
		}
	}
}

func testWhatAChildInherits(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := cell(t, tab, "the parent's todo list (held in its state)", "fork"); got != "yes" {
		t.Errorf("the fork's todos: %q", got)
	}
	if got := cell(t, tab, "the parent's todo list (held in its state)", "isolated"); got != "no" {
		t.Errorf("the isolated child's todos: %q", got)
	}
}

func testIsolatedOrFork(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := cell(t, tab, "opening messages (system prompt + context)", "isolated"); got != "2" {
		t.Errorf("isolated opening: %s", got)
	}
}

func testStructuredFork(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	if got := cell(t, tab, "the receipt", "what we get"); got != `{"findings":"3 条线索","confidence":0.82}` {
		t.Errorf("receipt %s", got)
	}
}

// TestTablesFromTheStore computes every lesson's table from traces read
// back from the store, as the web studio does: a stored trace must serve as
// well as one built from the live log.
func TestTablesFromTheStore(t *testing.T) {
	t.Parallel()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	runner := &session.Runner{DB: d}
	type job struct {
		lesson, variant string
		tr              *trace.Trace
		err             error
	}
	var (
		jobs []*job
		wg   sync.WaitGroup
	)
	for _, l := range All() {
		for _, v := range l.Variants {
			j := &job{lesson: l.Name, variant: v.Name}
			jobs = append(jobs, j)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v.Recorded != nil {
					ids, err := runner.ImportFile(context.Background(), v.Recorded)
					if err != nil {
						j.err = err
						return
					}
					j.tr, j.err = d.Trace(context.Background(), ids[0])
					return
				}
				sc, err := scenario.Parse(v.Scenario)
				if err != nil {
					j.err = err
					return
				}
				id, _, err := runner.Run(context.Background(), sc)
				if err != nil {
					j.err = err
					return
				}
				j.tr, j.err = d.Trace(context.Background(), id)
			}()
		}
	}
	wg.Wait()
	byLesson := map[string]map[string]*trace.Trace{}
	for _, j := range jobs {
		if j.err != nil {
			t.Fatalf("%s/%s: %v", j.lesson, j.variant, j.err)
		}
		if byLesson[j.lesson] == nil {
			byLesson[j.lesson] = map[string]*trace.Trace{}
		}
		byLesson[j.lesson][j.variant] = j.tr
	}
	for _, l := range All() {
		tab, err := l.Table(byLesson[l.Name])
		if err != nil {
			t.Errorf("%s: %v", l.Name, err)
			continue
		}
		for _, c := range tab.Checks {
			if !c.OK {
				t.Errorf("%s: check failed: %s (%s)", l.Name, c.Claim, c.Detail)
			}
		}
	}
}

// TestScenarioFiles checks that every file in scenarios/ is a variant of
// exactly one lesson.
func TestScenarioFiles(t *testing.T) {
	used := map[string]bool{}
	for _, l := range All() {
		for _, v := range l.Variants {
			if v.Recorded == nil {
				used[fileName(l.Name, v.Name)] = true
			}
		}
	}
	entries, err := fs.ReadDir(files, "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !used[e.Name()] {
			t.Errorf("%s belongs to no lesson", path.Join("scenarios", e.Name()))
		}
	}
	if len(entries) != len(used) {
		t.Errorf("%d files for %d variants", len(entries), len(used))
	}
}

func TestTableNeedsEveryVariant(t *testing.T) {
	l, err := Get("entry-cost")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Table(map[string]*trace.Trace{}); err == nil || !strings.Contains(err.Error(), "1-step") {
		t.Fatalf("err = %v, want one naming the missing variant", err)
	}
}

func TestGet(t *testing.T) {
	if _, err := Get("order-number"); err != nil {
		t.Fatal(err)
	}
	if _, err := Get("nope"); err == nil || !strings.Contains(err.Error(), "order-number") {
		t.Fatalf("err = %v", err)
	}
	names := []string{}
	for _, l := range All() {
		names = append(names, l.Name)
	}
	if !slices.IsSorted(names) {
		t.Errorf("All() is not in name order: %q", names)
	}
}

// The three-way lesson's figures come in the expected order, and the chart
// draws them.
func testCacheAndCost(t *testing.T, tab Table, runs map[string]*trace.Trace) {
	num := func(row, col string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(cell(t, tab, row, col), ",", ""))
		if err != nil {
			t.Fatalf("(%s, %s): %v", row, col, err)
		}
		return n
	}
	iso, fork, own := "isolated", "fork", "fork, own tools"
	if !(num(iso, "entry (tokens)") < num(own, "entry (tokens)") && num(own, "entry (tokens)") < num(fork, "entry (tokens)")) {
		t.Errorf("entry: %d, %d, %d", num(iso, "entry (tokens)"), num(own, "entry (tokens)"), num(fork, "entry (tokens)"))
	}
	if !(num(iso, "cached at entry") < num(own, "cached at entry") && num(own, "cached at entry") < num(fork, "cached at entry")) {
		t.Errorf("cached at entry: %d, %d, %d", num(iso, "cached at entry"), num(own, "cached at entry"), num(fork, "cached at entry"))
	}
	if !(num(fork, "new at entry") < num(iso, "new at entry") && num(iso, "new at entry") < num(own, "new at entry")) {
		t.Errorf("new at entry: %d, %d, %d", num(fork, "new at entry"), num(iso, "new at entry"), num(own, "new at entry"))
	}
	cost := func(v string) float64 {
		s := 0.0
		for _, c := range runs[v].ModelCalls {
			if c.AgentID != "main" {
				if c.Cost == nil {
					t.Fatalf("%s: call %s has no cost", v, c.ID)
				}
				s += c.Cost.Total
			}
		}
		return s
	}
	if a, b, c := cost("isolated"), cost("fork"), cost("fork-own-tools"); !(a < b && b < c) {
		t.Errorf("the children cost %v, %v, %v: want isolated < fork < fork with own tools", a, b, c)
	}
	if tab.Chart == nil || len(tab.Chart.Groups) != 2 || len(tab.Chart.Groups[0].Bars) != 3 {
		t.Fatalf("chart = %+v", tab.Chart)
	}
	for _, g := range tab.Chart.Groups {
		for _, b := range g.Bars {
			total := 0.0
			for _, p := range b.Parts {
				total += p.Value
			}
			if total <= 0 {
				t.Errorf("%s: bar %s is empty", g.Title, b.Label)
			}
		}
	}
}

func TestCourseHoldsEveryLessonOnce(t *testing.T) {
	c := Course()
	if len(c) != len(All()) || len(course) != len(All()) {
		t.Fatalf("the course has %d lessons (%d named), there are %d: name each lesson in course once", len(c), len(course), len(All()))
	}
	seen := map[string]bool{}
	for _, l := range c {
		if seen[l.Name] {
			t.Fatalf("%s twice in the course", l.Name)
		}
		seen[l.Name] = true
	}
	for _, l := range All() {
		if len(l.Cites) == 0 {
			t.Errorf("lesson %s: its article line %q names no article the studio knows", l.Name, l.Article)
		}
		for _, c := range l.Cites {
			if c.Article != nil && len(c.Sections) == 0 {
				t.Errorf("lesson %s: %q names no section of %q", l.Name, l.Article, c.Article.Title)
			}
		}
	}
}

// TestChineseTextsAreGlossed: every Chinese text a lesson's scenario holds
// (a receipt, a description from the articles) has an English gloss for
// the pages to show beside it.
func TestChineseTextsAreGlossed(t *testing.T) {
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case string:
			for _, r := range x {
				if unicode.Is(unicode.Han, r) {
					if templates.GlossOf(x) == "" {
						t.Errorf("%s: %q has no gloss: add it to web/templates/gloss.go", at, x)
					}
					return
				}
			}
		case map[string]any:
			for k, e := range x {
				walk(e, at+"."+k)
			}
		case []any:
			for i, e := range x {
				walk(e, at+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	for _, l := range All() {
		for _, v := range l.Variants {
			var doc any
			if v.Scenario == nil {
				continue
			}
			if err := json.Unmarshal(v.Scenario, &doc); err != nil {
				t.Fatal(err)
			}
			walk(doc, l.Name+"/"+v.Name)
		}
	}
}
