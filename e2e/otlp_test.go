package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The real clients: deepagents JS traced with OpenInference, and a program
// sending GenAI spans, both through the OpenTelemetry Node SDK's OTLP
// protobuf exporter, against a running studio. `make test` installs them
// (npm ci in e2e/, pinned by package-lock.json).

// node runs one of e2e/otlp's programs.
func node(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the OTLP tests need Node.js: %v (`make test` installs it)", err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "deepagents", "package.json")); err != nil {
		t.Fatalf("the OTLP tests need e2e/node_modules: run `make npm` (`make test` does): %v", err)
	}
	return exec.Command(bin, args...)
}

// fullTrace is what the OTLP and recording-endpoint tests read of a trace.
type fullTrace struct {
	Session struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Status string `json:"status"`
		Error  string `json:"error"`
		Origin *struct {
			Kind, Service, Convention, Upstream, Provider string
			Instrumentation                               []string
		} `json:"origin"`
	} `json:"session"`
	Agents []struct {
		ID, Name   string
		ParentID   *string `json:"parent_id"`
		Mode       *string `json:"mode"`
		TaskCallID *string `json:"task_call_id"`
		Invocation int     `json:"invocation"`
	} `json:"agents"`
	Messages []struct {
		ID                  string
		AgentID             string `json:"agent_id"`
		Role, Content, Kind string
		ToolCalls           []struct {
			Name string          `json:"name"`
			Args json.RawMessage `json:"args"`
		} `json:"tool_calls"`
		ToolCallID *string `json:"tool_call_id"`
	} `json:"messages"`
	ModelCalls []struct {
		ID           string
		AgentID      string `json:"agent_id"`
		Index        int
		SystemPrompt string `json:"system_prompt"`
		Tools        []struct {
			Name   string `json:"name"`
			Tokens int    `json:"tokens"`
		} `json:"tools"`
		Context []struct {
			AgentID  string `json:"agent_id"`
			From, To int
		} `json:"context"`
		Error       string `json:"error"`
		InputTokens int    `json:"input_tokens"`
		Usage       *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	} `json:"model_calls"`
	Files map[string]string `json:"files"`
}

func (s *studio) fullTrace(t *testing.T, id string) fullTrace {
	t.Helper()
	resp, err := http.Get(s.URL + "/api/sessions/" + id + "/trace")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr fullTrace
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// sessions lists the stored sessions through the API.
func (s *studio) sessions(t *testing.T) []struct{ ID, Name, Status string } {
	t.Helper()
	resp, err := http.Get(s.URL + "/api/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []struct{ ID, Name, Status string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// context resolves a call's context into its messages' text.
func (tr fullTrace) context(call int) []string {
	lists := map[string][]string{}
	for _, m := range tr.Messages {
		lists[m.AgentID] = append(lists[m.AgentID], m.Kind+":"+m.Content)
	}
	var out []string
	for _, r := range tr.ModelCalls[call].Context {
		out = append(out, lists[r.AgentID][r.From:r.To]...)
	}
	return out
}

// checkShape asserts what both programs must show: three agents (main, an
// isolated general-purpose, a fork), each child's first context, both
// receipts in the parent's context, the files.
func checkShape(t *testing.T, tr fullTrace) {
	t.Helper()
	var agents []string
	byName := map[string]string{}
	for _, a := range tr.Agents {
		mode := "-"
		if a.Mode != nil {
			mode = *a.Mode
		}
		agents = append(agents, a.Name+"/"+mode)
		byName[a.Name] = a.ID
	}
	if got := strings.Join(agents, " "); got != "main/- general-purpose/isolated forker/fork" && got != "main/- forker/fork general-purpose/isolated" {
		t.Fatalf("agents: %s", got)
	}
	first := map[string]int{}
	lastMain := -1
	for i, c := range tr.ModelCalls {
		if _, ok := first[c.AgentID]; !ok {
			first[c.AgentID] = i
		}
		if c.AgentID == "main" {
			lastMain = i
		}
	}
	iso := tr.context(first[byName["general-purpose"]])
	if len(iso) != 1 || !strings.HasPrefix(iso[0], "task:List the files") {
		t.Errorf("the isolated child's first context: %q", iso)
	}
	fork := tr.context(first[byName["forker"]])
	inherited := tr.ModelCalls[first[byName["forker"]]].Context[0]
	if len(fork) < 3 || inherited.AgentID != "main" || !strings.HasPrefix(fork[0], "prompt:Note the order number") ||
		!strings.HasSuffix(fork[len(fork)-1], "Report the order number above.") {
		t.Errorf("the fork's first context: %q (first range %+v)", fork, inherited)
	}
	last := strings.Join(tr.context(lastMain), "\n")
	if !strings.Contains(last, "receipt:I cannot see any order number") || !strings.Contains(last, "receipt:A-7731") {
		t.Errorf("the parent's last context lacks a receipt:\n%s", last)
	}
	if tr.Files["/order.md"] != "Order A-7731" || tr.Files["/seen.md"] != "Files: /order.md" {
		t.Errorf("files: %v", tr.Files)
	}
}

// waitReceived waits, through the API, for a received session with that
// name to be done, and returns its trace.
func (s *studio) waitReceived(t *testing.T, name string) fullTrace {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		for _, x := range s.sessions(t) {
			if x.Name == name && x.Status != "running" {
				if x.Status != "done" {
					t.Fatalf("session %s ended %s", x.ID, x.Status)
				}
				return s.fullTrace(t, x.ID)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session %q done after %v: %v", name, waitLimit, s.sessions(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDeepagentsReceived runs deepagents JS against the studio and watches
// the session grow in Chromium while the program still runs.
func TestDeepagentsReceived(t *testing.T) {
	s := startStudio(t)
	cmd := node(t, filepath.Join("otlp", "deepagents.mjs"), s.URL)
	cmd.Env = append(os.Environ(), "GATE=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	waiting := make(chan bool, 1)
	go func() {
		for lines.Scan() {
			if lines.Text() == "waiting" {
				waiting <- true
			}
		}
		close(waiting)
	}()
	select {
	case ok := <-waiting:
		if !ok {
			t.Fatalf("the program ended before its last turn: %s", stderr.String())
		}
	case <-time.After(2 * waitLimit):
		t.Fatalf("the program did not reach its last turn: %s", stderr.String())
	}

	// The program holds its last turn: the session is live, its three
	// agents already in the tree.
	var id string
	deadline := time.Now().Add(waitLimit)
	for id == "" || len(s.fullTrace(t, id).Agents) < 3 {
		for _, x := range s.sessions(t) {
			if x.Name == "deepagents-order-number" {
				id = x.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session with three agents while the program runs: %v", s.sessions(t))
		}
		time.Sleep(25 * time.Millisecond)
	}
	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	eval[bool](tb, `window.__noReload = true`)
	tb.waitFor("the running session shows its three agents", statusIs("running")+
		` && ['main', 'a1', 'a2'].every(a => document.querySelector('#tree [data-testid="node-' + a + '"]'))`, describeStatus)
	tb.screenshot("1-running")
	origin := eval[string](tb, `document.querySelector('[data-testid="origin"]').textContent`)
	for _, want := range []string{"deepagents-order-number", "OpenInference", "@arizeai/openinference-instrumentation-langchain 4.1.1", "opentelemetry nodejs"} {
		if !strings.Contains(origin, want) {
			t.Errorf("the page says it came from %q; want %q in it", origin, want)
		}
	}

	// Let the last turn go: the page patches itself to done.
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the program: %v\n%s", err, stderr.String())
	}
	tb.waitFor("the page shows the session done, without a reload", statusIs("done")+` && window.__noReload`, describeStatus)
	tr := s.fullTrace(t, id)
	checkShape(t, tr)
	if o := tr.Session.Origin; o == nil || o.Kind != "otlp" || o.Convention != "openinference" {
		t.Errorf("origin: %+v", o)
	}

	t.Run("the fork's panes: its inherited history holds the order number, the parent's holds both receipts", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		var forkID string
		for _, a := range tr.Agents {
			if a.Name == "forker" {
				forkID = a.ID
			}
		}
		tb.navigate(s.URL + "/sessions/" + id + "?agent=" + forkID)
		openInherited(tb)
		d := eval[delegationPage](tb, readDelegation)
		if !d.Fork || d.Inherited < 3 || !strings.Contains(d.InhText, "A-7731") {
			t.Errorf("the fork's pane: fork note %v, %d inherited messages: %q", d.Fork, d.Inherited, d.InhText)
		}
		if d.Receipt == nil || !strings.Contains(*d.Receipt, "A-7731") || len(d.Calls) != 1 || len(d.Receipts) != 1 {
			t.Errorf("the parent's pane: calls %v, receipts %v, receipt %v", d.Calls, d.Receipts, d.Receipt)
		}
		kept := eval[int](tb, `document.querySelectorAll('[data-testid="span"]').length`)
		if kept != 29 {
			t.Errorf("%d kept spans listed, want the 29 the mapping does not turn into calls, tools or agents", kept)
		}
		tb.screenshot("2-fork")
	})
}

// TestGenAISpansReceived: our engine's run, exported as OTLP (GenAI spans)
// and replayed by a program through the OpenTelemetry SDK, comes back with
// the same shape; compare shows both.
func TestGenAISpansReceived(t *testing.T) {
	s := startStudio(t)
	doc, err := os.ReadFile(filepath.Join("..", "internal", "lessons", "scenarios", "received-deepagents.json"))
	if err != nil {
		t.Fatal(err)
	}
	engineID := s.start(t, string(doc))
	s.waitDone(t, engineID)
	checkShape(t, s.fullTrace(t, engineID))
	resp, err := http.Get(s.URL + "/api/sessions/" + engineID + "/otlp")
	if err != nil {
		t.Fatal(err)
	}
	export, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	file := filepath.Join(t.TempDir(), "export.otlp.json")
	if err := os.WriteFile(file, export, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := node(t, filepath.Join("otlp", "replay.mjs"), s.URL, file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	tr := s.waitReceived(t, "genai-replay")
	checkShape(t, tr)
	if o := tr.Session.Origin; o == nil || o.Convention != "genai" {
		t.Errorf("origin: %+v", o)
	}

	tb := newTab(t)
	tb.navigate(fmt.Sprintf("%s/compare?a=%s&b=%s", s.URL, engineID, tr.Session.ID))
	tb.waitFor("compare shows both sessions' trees, three agents each", `['a', 'b'].every(k => (document.querySelector('[data-testid="side-' + k + '"] [data-testid="side-totals"]') || {}).textContent.trim().startsWith('3 agents') && document.querySelector('[data-testid="side-' + k + '"] svg [data-testid="node-main"]'))`,
		`document.body.innerText.slice(0, 400)`)
	tb.screenshot("compare")
}

// TestReceivedLesson runs the lesson "A real deepagents run, received" in
// the browser: both runs, the table with every check met, and compare.
func TestReceivedLesson(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/lessons/received-deepagents")
	tb.do("run the lesson", chromedp.Click(chromedp.CSS(`[data-testid="run-lesson"]`)))
	tb.waitFor("the table is computed", `document.querySelector('[data-testid="checks"]')`, `document.body.innerText.slice(0, 600)`)
	checks := eval[[]string](tb, `[...document.querySelectorAll('[data-testid="checks"] li')].map(e => e.className + ': ' + e.textContent)`)
	if len(checks) < 5 {
		t.Errorf("checks: %v", checks)
	}
	for _, c := range checks {
		if !strings.HasPrefix(c, "ok:") {
			t.Errorf("a check failed: %s", c)
		}
	}
	tb.screenshot("lesson")
	tb.do("compare the two runs", chromedp.Click(chromedp.CSS(`[data-testid="compare-runs"]`)))
	tb.waitFor("compare shows both, three agents each", `location.pathname === '/compare' && ['a', 'b'].every(k => (document.querySelector('[data-testid="side-' + k + '"] [data-testid="side-totals"]') || {}).textContent.trim().startsWith('3 agents'))`,
		`location.href + ' ' + document.body.innerText.slice(0, 400)`)
	tb.screenshot("compare")
}
