package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The recording endpoint's Anthropic side with the real client: Anthropic's
// TypeScript SDK (@anthropic-ai/sdk, pinned in e2e/package.json), its
// baseURL the studio's, running the third article's loop
// (e2e/anthropic/loop.mjs) against `serve --upstream script:` and failing
// against a fake Anthropic upstream (e2e/anthropic/once.mjs).

// articleLoop is the scenario whose script answers the article's loop.
var articleLoop = filepath.Join("..", "examples", "article-loop.json")

// sdkNode is node with Anthropic's SDK installed beside it.
func sdkNode(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", "@anthropic-ai", "sdk", "package.json")); err != nil {
		t.Fatalf("the Anthropic SDK tests need @anthropic-ai/sdk in e2e/node_modules: run `make npm` (`make test` does): %v", err)
	}
	return node(t, args...)
}

// loopRun is what e2e/anthropic/loop.mjs printed.
type loopRun struct {
	Answer   string   `json:"answer"`
	Receipts []string `json:"receipts"`
}

// runLoop runs the article's loop (cmd, from sdkNode) and waits for its end.
func runLoop(cmd *exec.Cmd, env ...string) (loopRun, error) {
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return loopRun{}, fmt.Errorf("the loop (%v): %v\n%s", env, err, stderr.String())
	}
	var run loopRun
	if err := json.Unmarshal(out, &run); err != nil {
		return loopRun{}, fmt.Errorf("the loop (%v) printed %q: %v", env, out, err)
	}
	return run, nil
}

const (
	portTask    = "Find where the service reads its port. Scope: /src. Return: the file and line, in one sentence."
	portReceipt = "/src/config.py:3 reads PORT from the environment, 8080 by default."
	portAnswer  = "The port is read in /src/config.py, line 3, from $PORT (8080 when it is not set)."
)

// TestAnthropicSDKRunsTheArticleLoop: the third article's loop on the
// official SDK, streaming off and on (two runs at once, one keyed by
// X-Studio-Session, the other grouped by content): each session shows main
// and one isolated general-purpose child inferred from the subagent tool,
// the child's three calls on its read-only tools, starting from its task
// alone, and its answer as the tool_result of main's subagent call.
func TestAnthropicSDKRunsTheArticleLoop(t *testing.T) {
	s := startStudio(t, "--upstream", "script:"+articleLoop, "--task-tool", "subagent", "--proxy-done-after", "1s")
	envs := map[string][]string{"whole": nil, "streamed": {"STREAM=1", "SESSION=streamed"}}
	runs := map[string]loopRun{}
	errs := map[string]error{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, env := range envs {
		cmd := sdkNode(t, filepath.Join("anthropic", "loop.mjs"), s.URL, articleLoop)
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := runLoop(cmd, env...)
			mu.Lock()
			runs[name], errs[name] = run, err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for name, run := range runs {
		if errs[name] != nil {
			t.Fatal(errs[name])
		}
		if run.Answer != portAnswer || len(run.Receipts) != 1 || run.Receipts[0] != portReceipt {
			t.Errorf("%s: the loop ended with %q, its receipts %q", name, run.Answer, run.Receipts)
		}
	}
	if t.Failed() {
		return
	}
	for _, name := range []string{"Find where the service reads its port, and tell me the file…", "streamed"} {
		id := s.recordedSession(t, name, 2)
		s.waitDone(t, id)
		checkArticleLoopRecorded(t, name, s.fullTrace(t, id))
	}
	if n := len(s.sessions(t)); n != 2 {
		t.Errorf("%d sessions, want the two runs", n)
	}
}

// checkArticleLoopRecorded asserts what the article's loop records.
func checkArticleLoopRecorded(t *testing.T, name string, tr fullTrace) {
	t.Helper()
	if o := tr.Session.Origin; o == nil || o.Kind != "proxy" || o.Service != "Anthropic/JS 1.16.0" || o.Upstream != "script:"+articleLoop {
		t.Errorf("%s: origin %+v; want the recording endpoint, Anthropic's JS SDK, the script", name, o)
	}
	if len(tr.Agents) != 2 {
		t.Fatalf("%s: agents %+v; want main and one child", name, tr.Agents)
	}
	child := tr.Agents[1]
	if child.Name != "general-purpose" || child.Mode == nil || *child.Mode != "isolated" ||
		child.ParentID == nil || *child.ParentID != "main" || child.TaskCallID == nil || *child.TaskCallID != "toolu_main_1" {
		t.Errorf("%s: the child %+v; want general-purpose, isolated, sent by main's subagent call toolu_main_1", name, child)
	}
	tools := map[string][]string{}
	for _, c := range tr.ModelCalls {
		var names []string
		for _, tl := range c.Tools {
			names = append(names, tl.Name)
		}
		tools[c.AgentID] = append(tools[c.AgentID], strings.Join(names, ","))
		if c.Error != "" {
			t.Errorf("%s: call %s failed: %s", name, c.ID, c.Error)
		}
	}
	const readOnly = "read_file,grep,list_dir"
	if got := strings.Join(tools[child.ID], " "); got != strings.Repeat(readOnly+" ", 2)+readOnly {
		t.Errorf("%s: the child's calls offered %q; want three, each with the read-only tools", name, got)
	}
	if got := strings.Join(tools["main"], " "); got != readOnly+",subagent "+readOnly+",subagent" {
		t.Errorf("%s: main's calls offered %q; want two, with the subagent tool", name, got)
	}
	if got := tr.contextOf(tr.firstCall(child.ID)); len(got) != 1 || got[0] != "task:user:"+portTask {
		t.Errorf("%s: the child's first call received %q; want its task alone", name, got)
	}
	last := -1
	for i, c := range tr.ModelCalls {
		if c.AgentID == "main" {
			last = i
		}
	}
	got := tr.contextOf(last)
	if len(got) != 3 || got[2] != "receipt:tool:"+portReceipt {
		t.Errorf("%s: main's last call received %q; want the prompt, the subagent call, and the child's answer as its tool_result", name, got)
	}
	for _, m := range tr.Messages {
		if m.Kind == "receipt" && (m.ToolCallID == nil || *m.ToolCallID != "toolu_main_1") {
			t.Errorf("%s: the receipt answers %v; want toolu_main_1", name, m.ToolCallID)
		}
	}
}

// sdkError is what e2e/anthropic/once.mjs printed of the SDK's error.
type sdkError struct {
	OK      bool   `json:"ok"`
	Name    string `json:"name"`
	Status  *int   `json:"status"`
	Type    string `json:"type"`
	Message string `json:"apiMessage"`
	Body    struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"body"`
}

// anthropicFailing is a fake Anthropic upstream that fails every call as
// its prompt says: "Overloaded" a 529, "Bad" a 400, "Hang" nothing until
// the studio gives up on it, "Event" a stream that starts and then sends an
// error event. It checks that the studio forwards
// to /v1/messages with the caller's key (the SDK, since 1.x, sends its
// apiKey as Authorization: Bearer; older ones as x-api-key) and version.
func anthropicFailing(t *testing.T) *httptest.Server {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("X-Api-Key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path != "/v1/messages" || key != "sk-ant-the-callers-own" || r.Header.Get("Anthropic-Version") == "" {
			t.Errorf("the upstream got %s %s, x-api-key %q, authorization %q, anthropic-version %q", r.Method, r.URL.Path,
				r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"))
		}
		prompt := string(body)
		w.Header().Set("Request-Id", "req_upstream_1")
		switch {
		case strings.Contains(prompt, "Hang"):
			<-r.Context().Done()
		case strings.Contains(prompt, "Overloaded"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_upstream_1"}`)
		case strings.Contains(prompt, "Bad"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 64 > 32 is too large"},"request_id":"req_upstream_1"}`)
		default: // an error event in a stream under way
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message_start\ndata: "+`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`+"\n\n")
			fmt.Fprint(w, "event: error\ndata: "+`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`+"\n\n")
		}
	}))
	t.Cleanup(upstream.Close)
	return upstream
}

// sdkFailure is one call of e2e/anthropic/once.mjs that fails: what the
// SDK must surface, and the studio record.
type sdkFailure struct {
	prompt, stream, class string
	status                int // 0: none, an error event in a 200 stream
	typ, msg              string
}

// TestAnthropicSDKSeesUpstreamErrors: the SDK, streaming and not, through
// the studio to an Anthropic upstream that answers 529 overloaded_error or
// 400 invalid_request_error, or breaks a stream with an error event: the
// SDK gets the status and Anthropic's error object as the upstream sent
// them, and surfaces its type (OverloadedError, BadRequestError); to one
// that hangs, the studio's own 504 timeout_error, in the same shape. The
// studio records each call failed with the error's message.
func TestAnthropicSDKSeesUpstreamErrors(t *testing.T) {
	upstream := anthropicFailing(t)
	s := startStudio(t, "--upstream-url", upstream.URL, "--upstream-provider", "anthropic", "--upstream-timeout", "1s", "--proxy-quiet", "1s")
	const hung = "the upstream sent nothing for 1s"
	callFailing(t, s, []sdkFailure{
		{"Overloaded, whole.", "0", "OverloadedError", 529, "overloaded_error", "Overloaded"},
		{"Overloaded, streamed.", "1", "OverloadedError", 529, "overloaded_error", "Overloaded"},
		{"Bad, whole.", "0", "BadRequestError", 400, "invalid_request_error", "max_tokens: 64 > 32 is too large"},
		{"Bad, streamed.", "1", "BadRequestError", 400, "invalid_request_error", "max_tokens: 64 > 32 is too large"},
		{"Event, streamed.", "1", "APIError", 0, "overloaded_error", "Overloaded"},
		{"Hang, whole.", "0", "GatewayTimeoutError", 504, "timeout_error", hung},
		{"Hang, streamed.", "1", "GatewayTimeoutError", 504, "timeout_error", hung},
	})
}

// TestAnthropicSDKSeesAnUnreachableUpstream: the studio's 502, in
// Anthropic's shape, is the SDK's InternalServerError of type api_error.
func TestAnthropicSDKSeesAnUnreachableUpstream(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // its port now refuses connections
	s := startStudio(t, "--upstream-url", gone.URL, "--upstream-provider", "anthropic", "--proxy-quiet", "1s")
	callFailing(t, s, []sdkFailure{
		{"Unreachable, whole.", "0", "InternalServerError", 502, "api_error", "the upstream " + gone.URL},
		{"Unreachable, streamed.", "1", "InternalServerError", 502, "api_error", "the upstream " + gone.URL},
	})
}

// callFailing makes each call, checks what the SDK surfaced, and waits for
// every call's session to end failed with its error recorded.
func callFailing(t *testing.T, s *studio, cases []sdkFailure) {
	t.Helper()
	for _, c := range cases {
		cmd := sdkNode(t, filepath.Join("anthropic", "once.mjs"), s.URL, c.prompt)
		cmd.Env = append(os.Environ(), "STREAM="+c.stream)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", c.prompt, err)
		}
		var got sdkError
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %s", c.prompt, out)
		}
		status := 0
		if got.Status != nil {
			status = *got.Status
		}
		if got.OK || got.Name != c.class || status != c.status || got.Type != c.typ || !strings.HasPrefix(got.Message, c.msg) ||
			got.Body.Type != "error" || got.Body.Error.Type != c.typ || got.Body.Error.Message != got.Message {
			t.Errorf("%s: the SDK surfaced %s; want %s, status %d, Anthropic's error object of type %s", c.prompt, out, c.class, c.status, c.typ)
		}
	}
	// Each call is its own session, named by its prompt; each ends failed
	// once no call comes, its one call's error recorded.
	want := map[string]string{}
	for _, c := range cases {
		want[c.prompt] = c.msg
	}
	deadline := time.Now().Add(waitLimit)
	for {
		list := s.sessions(t)
		ended := 0
		for _, x := range list {
			if x.Status != "running" {
				ended++
			}
		}
		if len(list) == len(cases) && ended == len(cases) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions: %v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, x := range s.sessions(t) {
		tr := s.fullTrace(t, x.ID)
		if tr.Session.Status != "failed" || len(tr.ModelCalls) != 1 || want[x.Name] == "" || !strings.Contains(tr.ModelCalls[0].Error, want[x.Name]) ||
			!strings.Contains(tr.Session.Error, tr.ModelCalls[0].Error) {
			t.Errorf("%s: %s %q, calls %+v", x.Name, tr.Session.Status, tr.Session.Error, tr.ModelCalls)
		}
	}
}

// TestArticleLoopLesson runs the lesson "The article's own loop, recorded
// beside our engine" in the browser: the article's loop as the recording
// endpoint recorded it beside our engine's run, every check met, compare
// with both trees; then the same run's page in Chinese, nothing of its
// interface left in English.
func TestArticleLoopLesson(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	tb.navigate(s.URL + "/lessons/article-loop")
	tb.click("run the lesson", `[data-testid="run-lesson"]`)
	tb.waitFor("the table is computed", `document.querySelector('[data-testid="checks"]')`, `document.body.innerText.slice(0, 600)`)
	checks := eval[[]string](tb, `[...document.querySelectorAll('[data-testid="checks"] li')].map(e => e.className + ': ' + e.textContent)`)
	if len(checks) != 6 {
		t.Errorf("checks: %v", checks)
	}
	for _, c := range checks {
		if !strings.HasPrefix(c, "ok:") {
			t.Errorf("a check failed: %s", c)
		}
	}
	table := eval[string](tb, `document.querySelector('[data-testid="lesson-table"]').innerText`)
	for _, want := range []string{"subagent (task)", "task (description, subagent_type)", "read_file, grep, list_dir"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table does not show %q:\n%s", want, table)
		}
	}
	run := eval[string](tb, `location.href`)
	tb.screenshot("lesson")
	tb.click("compare the two runs", `[data-testid="compare-runs"]`)
	tb.waitFor("compare shows both, two agents each", `location.pathname === '/compare' && ['a', 'b'].every(k => (document.querySelector('[data-testid="side-' + k + '"] [data-testid="side-totals"]') || {}).textContent.trim().startsWith('2 agents'))`,
		`location.href + ' ' + document.body.innerText.slice(0, 400)`)
	tb.screenshot("compare")

	zh := newChineseTab(t)
	zh.navigate(run)
	zh.waitFor("the table, in Chinese", `document.querySelector('[data-testid="lesson-table"] [data-testid="checks"]')`, `document.body.innerText.slice(0, 400)`)
	zh.inChinese("lesson-zh")
}

// anthropicScripted is a fake Anthropic upstream: a second studio that
// answers /v1/messages from the scenario's script, behind a front that
// checks what the recording studio forwards (the path, the caller's key,
// anthropic-version) and counts the calls.
func anthropicScripted(t *testing.T, scenario string) (url string, calls func() int) {
	t.Helper()
	scripted := startStudio(t, "--upstream", "script:"+scenario, "--proxy-done-after", "1s")
	target, err := neturl.Parse(scripted.URL)
	if err != nil {
		t.Fatal(err)
	}
	relay := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	n := 0
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-Api-Key") + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.URL.Path != "/v1/messages" || key != "sk-ant-the-callers-own" || r.Header.Get("Anthropic-Version") == "" {
			t.Errorf("the upstream got %s %s, key %q, anthropic-version %q", r.Method, r.URL.Path, key, r.Header.Get("Anthropic-Version"))
		}
		mu.Lock()
		n++
		mu.Unlock()
		relay.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestDeepagentsOnChatAnthropic: deepagents JS with every agent on
// @langchain/anthropic's ChatAnthropic, its base URL the studio's, the
// studio forwarding /v1/messages to an Anthropic upstream (a fake one that
// plays the order-number script), streaming off and on: each recorded
// session shows the delegation tree — main, an isolated child that starts
// from its task alone and a fork that starts from the parent's history —
// both receipts in main's last call, every call forwarded and recorded
// with its tokens and the usage the upstream reported.
func TestDeepagentsOnChatAnthropic(t *testing.T) {
	upstream, calls := anthropicScripted(t, orderNumber)
	s := startStudio(t, "--upstream-url", upstream, "--upstream-provider", "anthropic", "--proxy-done-after", "1s")
	whole := runProgram(t, s, orderNumber, "PROVIDER=anthropic")
	streamed := runProgram(t, s, orderNumber, "PROVIDER=anthropic", "STREAM=1", "SESSION=streamed")
	const final = "The isolated helper could not see it; the fork helper reports A-7731."
	for _, p := range []*program{whole, streamed} {
		if got := p.result(t); got != final {
			t.Errorf("deepagents' answer: %q, want the script's %q", got, final)
		}
	}
	recorded := 0
	for _, name := range []string{orderName, "streamed"} {
		id := s.recordedSession(t, name, 3)
		s.waitDone(t, id)
		tr := s.fullTrace(t, id)
		checkOrderNumber(t, tr)
		if o := tr.Session.Origin; o == nil || o.Kind != "proxy" || o.Provider != "anthropic" || o.Upstream != upstream {
			t.Errorf("%s: origin %+v; want the recording endpoint forwarding to the Anthropic upstream", name, o)
		}
		perAgent := map[string]int{}
		for _, c := range tr.ModelCalls {
			perAgent[c.AgentID]++
			if c.Error != "" || c.InputTokens == 0 || c.Usage == nil || c.Usage.PromptTokens == 0 {
				t.Errorf("%s: call %s: error %q, %d input tokens, usage %+v", name, c.ID, c.Error, c.InputTokens, c.Usage)
			}
		}
		iso, _ := tr.agentNamed("iso-reporter")
		fork, _ := tr.agentNamed("fork-reporter")
		if perAgent["main"] < 2 || perAgent[iso] == 0 || perAgent[fork] == 0 {
			t.Errorf("%s: calls per agent %v", name, perAgent)
		}
		recorded += len(tr.ModelCalls)
	}
	if got := calls(); got != recorded {
		t.Errorf("the upstream answered %d calls, the studio recorded %d", got, recorded)
	}
}
