package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// The recording endpoint with a real client: deepagents JS, every agent on
// LangChain's ChatOpenAI with configuration.baseURL set to the studio
// (e2e/proxy/deepagents.mjs), the studio answering from a scenario's script
// (--upstream script:). Then the same scenario through our engine, and
// compare's call-by-call view of what each call received.

// orderNumber is the lesson whose scenario both run: an isolated and a fork
// reporter sent, in one message, the same thin task.
var orderNumber = filepath.Join("..", "internal", "lessons", "scenarios", "order-number.json")

// contextOf is call i's messages, each as "kind:role:content".
func (tr fullTrace) contextOf(i int) []string {
	lists := map[string][]string{}
	for _, m := range tr.Messages {
		lists[m.AgentID] = append(lists[m.AgentID], m.Kind+":"+m.Role+":"+m.Content)
	}
	var out []string
	for _, r := range tr.ModelCalls[i].Context {
		out = append(out, lists[r.AgentID][r.From:r.To]...)
	}
	return out
}

func (tr fullTrace) agentNamed(name string) (id string, mode string) {
	for _, a := range tr.Agents {
		if a.Name == name {
			if a.Mode != nil {
				mode = *a.Mode
			}
			return a.ID, mode
		}
	}
	return "", ""
}

func (tr fullTrace) firstCall(agentID string) int {
	for i, c := range tr.ModelCalls {
		if c.AgentID == agentID {
			return i
		}
	}
	return -1
}

// checkOrderNumber asserts what the order-number run must show, whoever ran
// it: three agents, the isolated child's first call holding its task
// alone, the fork's the parent's history (where the order number is) and
// then its task, both receipts in the parent's last call.
func checkOrderNumber(t *testing.T, tr fullTrace) {
	t.Helper()
	if len(tr.Agents) != 3 {
		t.Fatalf("%d agents, want 3: %+v", len(tr.Agents), tr.Agents)
	}
	iso, isoMode := tr.agentNamed("iso-reporter")
	fork, forkMode := tr.agentNamed("fork-reporter")
	if isoMode != "isolated" || forkMode != "fork" {
		t.Fatalf("modes: iso-reporter %q, fork-reporter %q", isoMode, forkMode)
	}
	if got := tr.contextOf(tr.firstCall(iso)); len(got) != 1 || got[0] != "task:user:Report the order number above." {
		t.Errorf("the isolated child's first call received %q; want its task alone", got)
	}
	fc := tr.firstCall(fork)
	got := tr.contextOf(fc)
	if len(got) < 8 || !strings.HasPrefix(got[0], "prompt:user:Order A-7731 is late.") || tr.ModelCalls[fc].Context[0].AgentID != "main" ||
		!strings.HasPrefix(got[len(got)-1], "fork_preamble:user:") || !strings.HasSuffix(got[len(got)-1], "Report the order number above.") {
		t.Errorf("the fork's first call received %q (first range %+v); want the parent's history, inherited, then its task", got, tr.ModelCalls[fc].Context[0])
	}
	last := -1
	for i, c := range tr.ModelCalls {
		if c.AgentID == "main" {
			last = i
		}
	}
	ctx := strings.Join(tr.contextOf(last), "\n")
	if !strings.Contains(ctx, "receipt:tool:I cannot see any order number.") || !strings.Contains(ctx, "receipt:tool:A-7731") {
		t.Errorf("the parent's last call lacks a receipt:\n%s", ctx)
	}
}

// program is a run of e2e/proxy/deepagents.mjs against the studio.
type program struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	waiting chan bool
	out     chan string
	stderr  *syncBuffer
}

func runProgram(t *testing.T, s *studio, scenario string, env ...string) *program {
	t.Helper()
	cmd := node(t, filepath.Join("proxy", "deepagents.mjs"), s.URL, scenario)
	cmd.Env = append(os.Environ(), env...)
	p := &program{cmd: cmd, waiting: make(chan bool, 1), out: make(chan string, 1), stderr: &syncBuffer{}}
	p.stdin, _ = cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		lines := bufio.NewScanner(stdout)
		lines.Buffer(make([]byte, 1<<20), 1<<20)
		for lines.Scan() {
			if lines.Text() == "waiting" {
				p.waiting <- true
			} else if strings.HasPrefix(lines.Text(), "{") {
				p.out <- lines.Text()
			}
		}
		close(p.waiting)
	}()
	return p
}

// result waits for the program's end and returns what it printed.
func (p *program) result(t *testing.T) (answer string) {
	t.Helper()
	select {
	case line := <-p.out:
		var out struct{ Answer string }
		_ = json.Unmarshal([]byte(line), &out)
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("the program: %v\n%s", err, p.stderr.String())
		}
		return out.Answer
	case <-time.After(3 * waitLimit):
		t.Fatalf("the program did not end: %s", p.stderr.String())
	}
	return ""
}

// recordedSession waits for the session of that name to have that many
// agents, and returns its id.
func (s *studio) recordedSession(t *testing.T, name string, agents int) string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		for _, x := range s.sessions(t) {
			if x.Name == name {
				if tr := s.fullTrace(t, x.ID); len(tr.Agents) >= agents {
					return x.ID
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session %q with %d agents: %v", name, agents, s.sessions(t))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

const orderName = "Order A-7731 is late. Check what we have on file, then have…"

func TestDeepagentsThroughTheRecordingEndpoint(t *testing.T) {
	s := startStudio(t, "--upstream", "script:"+orderNumber, "--proxy-done-after", "1s")
	// Two runs at once: streaming off, held at its last call so the page
	// can be watched while it runs; streaming on, under a session key of
	// its own.
	held := runProgram(t, s, orderNumber, "GATE=1")
	streamed := runProgram(t, s, orderNumber, "STREAM=1", "SESSION=streamed")
	select {
	case ok := <-held.waiting:
		if !ok {
			t.Fatalf("the program ended before its last call: %s", held.stderr.String())
		}
	case <-time.After(3 * waitLimit):
		t.Fatalf("the program did not reach its last call: %s", held.stderr.String())
	}
	id := s.recordedSession(t, orderName, 3)

	tb := newTab(t)
	tb.navigate(s.URL + "/sessions/" + id)
	eval[bool](tb, `window.__noReload = true`)
	tb.waitFor("the running session shows its three agents", statusIs("running")+
		` && ['main', 'a1', 'a2'].every(a => document.querySelector('#tree [data-testid="node-' + a + '"]'))`, describeStatus)
	origin := eval[string](tb, `document.querySelector('[data-testid="origin"]').textContent`)
	for _, want := range []string{"the recording endpoint", "langchainjs-openai", "answered by script:" + orderNumber} {
		if !strings.Contains(origin, want) {
			t.Errorf("the page says it came from %q; want %q in it", origin, want)
		}
	}
	tb.screenshot("1-running")
	if _, err := io.WriteString(held.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	held.stdin.Close()
	const final = "The isolated helper could not see it; the fork helper reports A-7731."
	for _, p := range []*program{held, streamed} {
		if got := p.result(t); got != final {
			t.Errorf("deepagents' answer: %q, want the script's %q", got, final)
		}
	}
	tb.waitFor("the page patches itself to done", statusIs("done")+` && window.__noReload`, describeStatus)

	streamedID := s.recordedSession(t, "streamed", 3)
	for _, sid := range []string{id, streamedID} {
		s.waitDone(t, sid)
		tr := s.fullTrace(t, sid)
		checkOrderNumber(t, tr)
		if o := tr.Session.Origin; o == nil || o.Kind != "proxy" || !strings.HasPrefix(o.Service, "langchainjs-openai") {
			t.Errorf("origin: %+v", o)
		}
	}
	if n := len(s.sessions(t)); n != 2 {
		t.Errorf("%d sessions, want the two runs", n)
	}

	t.Run("the fork's panes", func(t *testing.T) {
		tb := &tab{t: t, ctx: tb.ctx}
		fork, _ := s.fullTrace(t, id).agentNamed("fork-reporter")
		tb.navigate(s.URL + "/sessions/" + id + "?agent=" + fork)
		openInherited(tb)
		d := eval[delegationPage](tb, readDelegation)
		if !d.Fork || d.Inherited < 7 || !strings.Contains(d.InhText, "A-7731") {
			t.Errorf("the fork's pane: fork note %v, %d inherited messages: %q", d.Fork, d.Inherited, d.InhText)
		}
		if d.Receipt == nil || *d.Receipt != "A-7731" {
			t.Errorf("the receipt: %v", d.Receipt)
		}
		tb.screenshot("2-fork")
	})

	t.Run("compare with our engine's run lists exactly what each call received differently", func(t *testing.T) {
		doc, err := os.ReadFile(orderNumber)
		if err != nil {
			t.Fatal(err)
		}
		engine := s.start(t, string(doc))
		s.waitDone(t, engine)
		want := conformance(s.fullTrace(t, engine), s.fullTrace(t, id))
		tb := &tab{t: t, ctx: tb.ctx}
		tb.navigate(fmt.Sprintf("%s/compare?a=%s&b=%s", s.URL, engine, id))
		got := eval[[]callRow](tb, `[...document.querySelectorAll('[data-testid="call-diff"]')].map(r => ({
			call: r.dataset.call, total: +r.dataset.differences,
			listed: [...r.querySelectorAll('[data-testid="difference"]')].map(d => d.dataset.what)}))`)
		if only := eval[int](tb, `document.querySelectorAll('[data-testid="only-a"], [data-testid="only-b"]').length`); only != 0 {
			t.Errorf("%d calls made by one side only; both made the same calls", only)
		}
		if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
			t.Errorf("compare lists\n%s\nwant\n%s", rows(got), rows(want))
		}
		// What differs, and only that: the tool definitions' sizes, the
		// filesystem tools' texts, and the fork's preamble — each engine's
		// own by design (docs/delegation.md). The system prompts, the tasks,
		// the tool calls, the receipts and the number of messages agree.
		kinds := map[string]bool{}
		for _, r := range got {
			for _, w := range r.Listed {
				kinds[strings.TrimRight(w, "0123456789 ")] = true
			}
		}
		if fmt.Sprint(kinds) != "map[message:true tool definitions:true]" {
			t.Errorf("kinds of differences: %v; want the tool definitions' sizes and some messages", kinds)
		}
		texts := eval[string](tb, `document.querySelector('[data-testid="conformance"]').innerText`)
		for _, want := range []string{"[What comes before this message", "[The messages above are a prior conversation", "(63 bytes)"} {
			if !strings.Contains(texts, want) {
				t.Errorf("the differences do not quote %q", want)
			}
		}
		tb.screenshot("3-compare")
	})
}

// callRow is one call of compare's call-by-call view.
type callRow struct {
	Call   string   `json:"call"`
	Total  int      `json:"total"`
	Listed []string `json:"listed"`
}

func rows(rs []callRow) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "  %s: %d, listed %v\n", r.Call, r.Total, r.Listed)
	}
	return b.String()
}

// conformance is the test's own account of what two runs' calls received
// differently, to hold the page to: calls matched by agent name (and
// invocation) and place, each compared by system prompt, tool names and
// sizes, and every message's role, text and tool calls (no ids); a
// difference is listed at the first call that has it.
func conformance(a, b fullTrace) []callRow {
	type key struct {
		agent string
		index int
	}
	label := func(tr fullTrace, agentID string) string {
		for _, ag := range tr.Agents {
			if ag.ID == agentID {
				if ag.ParentID == nil {
					return "main"
				}
				if ag.Invocation > 0 {
					return fmt.Sprintf("%s #%d", ag.Name, ag.Invocation)
				}
				return ag.Name
			}
		}
		return agentID
	}
	texts := func(tr fullTrace, i int) []string {
		lists := map[string][]string{}
		for _, m := range tr.Messages {
			s := m.Role + ": " + m.Content
			for _, c := range m.ToolCalls {
				var v any
				_ = json.Unmarshal(c.Args, &v)
				args, _ := json.Marshal(v)
				s += " → " + c.Name + " " + string(args)
			}
			lists[m.AgentID] = append(lists[m.AgentID], s)
		}
		var out []string
		for _, r := range tr.ModelCalls[i].Context {
			out = append(out, lists[r.AgentID][r.From:r.To]...)
		}
		return out
	}
	index := map[key]int{}
	for i, c := range b.ModelCalls {
		index[key{label(b, c.AgentID), c.Index}] = i
	}
	order := make([]int, len(a.ModelCalls))
	rank := map[string]int{}
	for i, ag := range a.Agents {
		rank[ag.ID] = i
	}
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		return rank[a.ModelCalls[order[i]].AgentID] < rank[a.ModelCalls[order[j]].AgentID]
	})
	seen := map[string]bool{}
	var out []callRow
	for _, i := range order {
		x := a.ModelCalls[i]
		k := key{label(a, x.AgentID), x.Index}
		j, ok := index[k]
		if !ok {
			continue
		}
		y := b.ModelCalls[j]
		var diffs [][2]string // what, the texts
		if x.SystemPrompt != y.SystemPrompt {
			diffs = append(diffs, [2]string{"system prompt", x.SystemPrompt + "|" + y.SystemPrompt})
		}
		var nx, ny []string
		for _, tl := range x.Tools {
			nx = append(nx, tl.Name)
		}
		for _, tl := range y.Tools {
			ny = append(ny, tl.Name)
		}
		if strings.Join(nx, ",") != strings.Join(ny, ",") {
			diffs = append(diffs, [2]string{"tools", strings.Join(nx, ",") + "|" + strings.Join(ny, ",")})
		} else {
			sizes := ""
			for n, tl := range x.Tools {
				if tl.Tokens != y.Tools[n].Tokens {
					sizes += fmt.Sprint(tl.Name, tl.Tokens, "|", y.Tools[n].Tokens, " ")
				}
			}
			if sizes != "" {
				diffs = append(diffs, [2]string{"tool definitions", sizes})
			}
		}
		mx, my := texts(a, i), texts(b, j)
		if len(mx) != len(my) {
			diffs = append(diffs, [2]string{"messages", fmt.Sprint(len(mx), "|", len(my))})
		}
		for n := 0; n < len(mx) || n < len(my); n++ {
			var p, q string
			if n < len(mx) {
				p = mx[n]
			}
			if n < len(my) {
				q = my[n]
			}
			if p != q {
				diffs = append(diffs, [2]string{fmt.Sprintf("message %d", n+1), p + "|" + q})
			}
		}
		row := callRow{Call: fmt.Sprintf("%s/%d", k.agent, k.index), Total: len(diffs), Listed: []string{}}
		for _, d := range diffs {
			if !seen[d[0]+"\x00"+d[1]] {
				seen[d[0]+"\x00"+d[1]] = true
				row.Listed = append(row.Listed, d[0])
			}
		}
		out = append(out, row)
	}
	return out
}

// TestDeepagentsFanOutThroughTheRecordingEndpoint: three children of one
// type in one message, streaming on: each request is answered from the
// script of its own invocation (numbered in call order, whatever order the
// requests came in), each child sees only its task, the receipts come back
// in call order.
func TestDeepagentsFanOutThroughTheRecordingEndpoint(t *testing.T) {
	fanOut := filepath.Join("deepagents", "scenarios", "fan-out.json")
	s := startStudio(t, "--upstream", "script:"+fanOut, "--proxy-done-after", "1s")
	p := runProgram(t, s, fanOut, "STREAM=1")
	if got := p.result(t); got != "Kafka for throughput, NATS for latency, RabbitMQ for routing." {
		t.Errorf("answer: %q", got)
	}
	id := s.recordedSession(t, "Compare three message queues.", 4)
	s.waitDone(t, id)
	tr := s.fullTrace(t, id)
	want := map[string]string{
		"Summarize /q/kafka.md in five words.":  "Kafka moves the most data.",
		"Summarize /q/nats.md in five words.":   "NATS answers the fastest.",
		"Summarize /q/rabbit.md in five words.": "RabbitMQ routes the most flexibly.",
	}
	for _, a := range tr.Agents {
		if a.ParentID == nil {
			continue
		}
		if a.Mode == nil || *a.Mode != "isolated" || a.Name != "general-purpose" {
			t.Errorf("child %s: %s %v", a.ID, a.Name, a.Mode)
		}
		first := tr.contextOf(tr.firstCall(a.ID))
		if len(first) != 1 {
			t.Errorf("child %s's first call received %q; want its task alone", a.ID, first)
			continue
		}
		task := strings.TrimPrefix(first[0], "task:user:")
		receipt := ""
		for _, m := range tr.Messages {
			if m.Kind == "receipt" && m.ToolCallID != nil && a.TaskCallID != nil && *m.ToolCallID == *a.TaskCallID {
				receipt = m.Content
			}
		}
		if receipt != want[task] {
			t.Errorf("the child sent %q came back with %q, want %q: it played another invocation's script", task, receipt, want[task])
		}
	}
	var receipts []string
	for _, m := range tr.Messages {
		if m.Kind == "receipt" {
			receipts = append(receipts, m.Content)
		}
	}
	if got := strings.Join(receipts, " / "); got != "Kafka moves the most data. / NATS answers the fastest. / RabbitMQ routes the most flexibly." {
		t.Errorf("receipts in the parent's list: %s; want call order", got)
	}
}

// TestRecordingEndpointUpstreamFailures: ChatOpenAI, streaming and not,
// through the studio to an upstream that answers 500, and to one that
// hangs: the client gets the upstream's status and words (or the studio's
// 504 after --upstream-timeout), and the studio records the failed call.
func TestRecordingEndpointUpstreamFailures(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "Hang") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error": {"message": "The server had an error while processing your request.", "type": "server_error", "param": null, "code": null}}`)
	}))
	defer upstream.Close()
	defer once.Do(func() { close(release) })
	s := startStudio(t, "--upstream-url", upstream.URL+"/v1", "--upstream-timeout", "1s", "--proxy-quiet", "1s")
	for _, c := range []struct{ prompt, stream, status, msg string }{
		{"Fail, whole.", "0", "500", "The server had an error while processing your request."},
		{"Fail, streamed.", "1", "500", "The server had an error while processing your request."},
		{"Hang, whole.", "0", "504", "the upstream sent nothing for 1s"},
		{"Hang, streamed.", "1", "504", "the upstream sent nothing for 1s"},
	} {
		cmd := node(t, filepath.Join("proxy", "once.mjs"), s.URL, c.prompt)
		cmd.Env = append(os.Environ(), "STREAM="+c.stream)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", c.prompt, err)
		}
		var got struct {
			OK      bool `json:"ok"`
			Status  *int `json:"status"`
			Message string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %s", c.prompt, out)
		}
		if got.OK || got.Status == nil || fmt.Sprint(*got.Status) != c.status || !strings.Contains(got.Message, c.msg) {
			t.Errorf("%s: the client got %s", c.prompt, out)
		}
	}
	// Each call is its own session (each opens with its own prompt); each
	// ends failed once no call comes, its one call's error recorded.
	deadline := time.Now().Add(waitLimit)
	for {
		list := s.sessions(t)
		ended := 0
		for _, x := range list {
			if x.Status != "running" {
				ended++
			}
		}
		if len(list) == 4 && ended == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions: %v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, x := range s.sessions(t) {
		tr := s.fullTrace(t, x.ID)
		if tr.Session.Status != "failed" || len(tr.ModelCalls) != 1 || tr.ModelCalls[0].Error == "" ||
			!strings.Contains(tr.Session.Error, tr.ModelCalls[0].Error) {
			t.Errorf("%s: %s %q, calls %+v", x.Name, tr.Session.Status, tr.Session.Error, tr.ModelCalls)
		}
	}
}
