package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// echoUpstream answers every request with "ok: " and its last message, or
// with the task calls its last user message asks for ("delegate: a | b").
func echoUpstream(t *testing.T) *upstream {
	return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		msgs := body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		if rest, ok := strings.CutPrefix(last, "delegate: "); ok {
			var calls []any
			for i, d := range strings.Split(rest, " | ") {
				calls = append(calls, taskCall(fmt.Sprintf("call_%d", i), "helper", d))
			}
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, "tool_calls"))
			return
		}
		writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "ok: " + last}, "stop"))
	})
}

func user(s string) goopenai.ChatCompletionMessage {
	return goopenai.ChatCompletionMessage{Role: "user", Content: s}
}

func (h *harness) chat(t *testing.T, c *goopenai.Client, msgs ...goopenai.ChatCompletionMessage) goopenai.ChatCompletionMessage {
	t.Helper()
	if c == nil {
		c = h.client
	}
	resp, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message
}

func (h *harness) keyed(key string) *goopenai.Client {
	cfg := goopenai.DefaultConfig("sk-x")
	cfg.BaseURL = h.srv.URL + "/v1"
	cfg.HTTPClient = &http.Client{Transport: headerTransport{http.Header{proxy.SessionHeader: {key}}}}
	return goopenai.NewClientWithConfig(cfg)
}

func TestSeveralSessionsAtOnce(t *testing.T) {
	up := echoUpstream(t)
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	// Two programs interleave their calls; each opens with its own prompt.
	a1 := h.chat(t, nil, user("delegate: Count the apples. | Count the pears."))
	b1 := h.chat(t, nil, user("delegate: Sort the files."))
	// Their children, in no particular order.
	pears := h.chat(t, nil, user("Count the pears."))
	files := h.chat(t, nil, user("Sort the files."))
	apples := h.chat(t, nil, user("Count the apples."))
	h.chat(t, nil, user("delegate: Sort the files."), b1, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_0", Content: files.Content})
	h.chat(t, nil, user("delegate: Count the apples. | Count the pears."), a1,
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_0", Content: apples.Content},
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_1", Content: pears.Content})
	// A third program names its session; its first prompt is one we saw.
	k := h.keyed("run-7")
	k1 := h.chat(t, k, user("delegate: Sort the files."))
	h.chat(t, k, user("Sort the files."))
	// A request that continues nothing and opens nothing: unattached, in the
	// session last active.
	h.chat(t, nil, user("What was I doing?"), goopenai.ChatCompletionMessage{Role: "assistant", Content: "Sorting."}, user("Go on."))

	all := h.store.all()
	if len(all) != 3 {
		t.Fatalf("%d sessions, want 3", len(all))
	}
	shape := func(s *memSession) string {
		tr := s.trace(t)
		var parts []string
		for _, a := range tr.Agents {
			parts = append(parts, fmt.Sprintf("%s:%d", a.Name, len(trace.Lists(tr)[a.ID])))
		}
		return s.name + " = " + strings.Join(parts, " ")
	}
	want := []string{
		"delegate: Count the apples. | Count the pears. = main:5 helper:2 helper:2 unattached:4",
		"delegate: Sort the files. = main:4 helper:2",
		"run-7 = main:2 helper:2",
	}
	for i, s := range all {
		if got := shape(s); got != want[i] {
			t.Errorf("session %d: %s\n want %s", i+1, got, want[i])
		}
	}
	_ = k1
	tr := all[0].trace(t)
	un := tr.Agents[3]
	if un.TaskCallID != nil || deref(un.ParentID) != "main" {
		t.Errorf("the unattached agent: %+v", un)
	}
	// The page's fold flags it.
	st := view.New(view.Meta{ID: all[0].id})
	all[0].mu.Lock()
	for _, ev := range all[0].events {
		if _, err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	all[0].mu.Unlock()
	found := false
	for _, n := range st.Notes {
		found = found || (n.Kind == "unattached" && n.AgentID == un.ID)
	}
	if !found {
		t.Errorf("no note flags the unattached agent: %+v", st.Notes)
	}
}

func TestTaskToolIsConfigurable(t *testing.T) {
	// A framework whose delegating tool is named otherwise: with
	// --task-tool set, its calls delegate; by default they are a tool
	// like any other, and the child's first request opens a session.
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		msgs := body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)["content"].(string)
		if last == "Have the pears counted." {
			args, _ := json.Marshal(map[string]string{"description": "Count the pears.", "subagent_type": "counter"})
			writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_0", "type": "function", "function": map[string]any{"name": "hand_off", "arguments": string(args)}}}}, "tool_calls"))
			return
		}
		writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": "ok: " + last}, "stop"))
	})
	for _, c := range []struct {
		tool string
		want []string
	}{
		{"hand_off", []string{"Have the pears counted. = main:4 counter:2"}},
		{"", []string{"Have the pears counted. = main:4", "Count the pears. = main:2"}},
	} {
		h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{taskTool: c.tool})
		parent := h.chat(t, nil, user("Have the pears counted."))
		child := h.chat(t, nil, user("Count the pears."))
		h.chat(t, nil, user("Have the pears counted."), parent, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_0", Content: child.Content})
		var got []string
		for _, s := range h.store.all() {
			tr := s.trace(t)
			var parts []string
			for _, a := range tr.Agents {
				parts = append(parts, fmt.Sprintf("%s:%d", a.Name, len(trace.Lists(tr)[a.ID])))
			}
			got = append(got, s.name+" = "+strings.Join(parts, " "))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("task tool %q: %q, want %q", c.tool, got, c.want)
		}
	}
}

func TestSessionsEnd(t *testing.T) {
	up := echoUpstream(t)
	fail := false
	var mu sync.Mutex
	failing := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		mu.Lock()
		f := fail
		mu.Unlock()
		if f {
			writeJSON(w, 503, map[string]any{"error": map[string]any{"message": "overloaded"}})
			return
		}
		writeJSON(w, 200, completion(map[string]any{"role": "assistant", "content": nil,
			"tool_calls": []any{taskCall("c", "helper", "Wait.")}}, "tool_calls"))
	})
	h := newHarness(t, mustHTTP(t, up.srv.URL, ""), options{})
	h.chat(t, nil, user("Answer at once."))
	h.chat(t, nil, user("delegate: Hold on."))
	g := newHarness(t, mustHTTP(t, failing.srv.URL, ""), options{})
	prompt := user("Fails later.")
	first := g.chat(t, nil, prompt)
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := g.client.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m",
		Messages: []goopenai.ChatCompletionMessage{prompt, first, {Role: "tool", ToolCallID: "c", Content: "waited"}}}); err == nil {
		t.Fatal("want the 503")
	}

	h.p.Sweep(h.latest().Add(proxy.DefaultDoneAfter - time.Second))
	if n := countEnded(h.store.all()); n != 0 {
		t.Fatalf("%d sessions ended before their time", n)
	}
	done, waiting := h.store.all()[0], h.store.all()[1]
	sweepUntil(t, h.p, h.latest().Add(proxy.DefaultDoneAfter+time.Second), done)
	if got := done.trace(t).Session.Status; got != delegation.StatusDone {
		t.Errorf("a session whose main agent answered: %s after %s", got, proxy.DefaultDoneAfter)
	}
	if got := waiting.trace(t).Session.Status; got != delegation.StatusRunning {
		t.Errorf("a session waiting on its child: %s after %s", got, proxy.DefaultDoneAfter)
	}
	sweepUntil(t, h.p, h.latest().Add(proxy.DefaultQuiet+time.Second), waiting)
	if tr := waiting.trace(t); tr.Session.Status != delegation.StatusInterrupted || !strings.Contains(tr.Session.Error, "no request came for 10m0s") {
		t.Errorf("after the quiet period: %s %q", tr.Session.Status, tr.Session.Error)
	}
	sweepUntil(t, g.p, g.latest().Add(proxy.DefaultQuiet+time.Second), g.store.all()[0])
	if tr := g.store.all()[0].trace(t); tr.Session.Status != delegation.StatusFailed || !strings.Contains(tr.Session.Error, "overloaded") {
		t.Errorf("a session whose main agent's last call failed: %s %q", tr.Session.Status, tr.Session.Error)
	}
	// A session ended is not continued: the program that comes back after
	// the pause gets a session of its own.
	h.chat(t, nil, user("Answer at once."), goopenai.ChatCompletionMessage{Role: "assistant", Content: "ok: Answer at once."}, user("More."))
	if n := len(h.store.all()); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
}

// sweepUntil sweeps at a time until the session has ended: the request
// that answered last may still be finishing when its client has the answer.
func sweepUntil(t *testing.T, p *proxy.Proxy, at time.Time, s *memSession) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.Sweep(at)
		select {
		case <-s.done:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not end", s.id)
		}
	}
}

func countEnded(all []*memSession) int {
	n := 0
	for _, s := range all {
		select {
		case <-s.done:
			n++
		default:
		}
	}
	return n
}

func TestStopInTheStudio(t *testing.T) {
	h := newHarness(t, mustHTTP(t, echoUpstream(t).srv.URL, ""), options{})
	h.chat(t, nil, user("delegate: Wait for me."))
	s := h.store.all()[0]
	s.stop()
	<-s.done
	if tr := s.trace(t); tr.Session.Status != delegation.StatusInterrupted || tr.Session.Error != "stopped in the studio" {
		t.Errorf("%s %q", tr.Session.Status, tr.Session.Error)
	}
	if by := s.stoppedBy(); by != delegation.StopUser {
		t.Errorf("session.finished says stopped_by %q, want %q for the edge to word", by, delegation.StopUser)
	}
}

// stoppedBy is the stopped_by code of the session's session.finished.
func (s *memSession) stoppedBy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.events {
		if f, ok := ev.Payload.(delegation.SessionFinished); ok {
			return f.StoppedBy
		}
	}
	return ""
}

func scriptUpstream(t *testing.T, path string) *proxy.ScriptUpstream {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	up, err := proxy.NewScriptUpstream(sc, path)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

func TestScriptAnswersTheInferredAgent(t *testing.T) {
	// The order-number lesson: two task calls with one description, to an
	// isolated and a fork reporter. The fork's request comes first; the
	// script still answers each from its own list, because the team's
	// modes tell the two calls apart.
	up := scriptUpstream(t, "../lessons/scenarios/order-number.json")
	h := newHarness(t, up, options{})
	system := goopenai.ChatCompletionMessage{Role: "system", Content: "You are a careful assistant."}
	history := []goopenai.ChatCompletionMessage{system,
		user("Order A-7731 is late. Check what we have on file, then have a helper report the order number back to me.")}
	results := []string{"/README.md", "Customer desk.", "/README.md"}
	for turn := 0; turn < 3; turn++ {
		ans := h.chat(t, nil, history...)
		if len(ans.ToolCalls) != 1 {
			t.Fatalf("turn %d: %+v", turn, ans)
		}
		history = append(history, ans, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: ans.ToolCalls[0].ID, Content: results[turn]})
	}
	delegating := h.chat(t, nil, history...)
	if len(delegating.ToolCalls) != 2 || delegating.ToolCalls[1].ID != "call_main_3_1" {
		t.Fatalf("the delegating turn: %+v", delegating)
	}
	fork := h.chat(t, nil, append(append([]goopenai.ChatCompletionMessage(nil), history...),
		user("[You continue the conversation above as a subagent.]\n\nReport the order number above."))...)
	iso := h.chat(t, nil, user("Report the order number above."))
	if fork.Content != "A-7731" || iso.Content != "I cannot see any order number." {
		t.Errorf("fork said %q, isolated said %q", fork.Content, iso.Content)
	}
	final := h.chat(t, nil, append(history, delegating,
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_main_3_0", Content: iso.Content},
		goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_main_3_1", Content: fork.Content})...)
	if final.Content != "The isolated helper could not see it; the fork helper reports A-7731." {
		t.Errorf("final: %q", final.Content)
	}
	tr := h.store.all()[0].trace(t)
	var agents []string
	for _, a := range tr.Agents {
		agents = append(agents, a.Name+"/"+deref(a.Mode))
	}
	if got := strings.Join(agents, " "); got != "main/- fork-reporter/fork iso-reporter/isolated" {
		t.Errorf("agents: %s", got)
	}
	if o := tr.Session.Origin; o.Upstream != "script:../lessons/scenarios/order-number.json" {
		t.Errorf("origin: %+v", o)
	}
}

func TestScriptStreamsAndRefuses(t *testing.T) {
	up := scriptUpstream(t, "../lessons/scenarios/fan-out.json")
	h := newHarness(t, up, options{})
	var sc struct {
		Prompt string `json:"prompt"`
	}
	raw, _ := os.ReadFile("../lessons/scenarios/fan-out.json")
	_ = json.Unmarshal(raw, &sc)
	st, err := h.client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "m", Stream: true,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true}, Messages: []goopenai.ChatCompletionMessage{user(sc.Prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	var calls []goopenai.ToolCall
	var usage *goopenai.Usage
	for {
		c, err := st.Recv()
		if err != nil {
			break
		}
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			calls = append(calls, ch.Delta.ToolCalls...)
		}
	}
	st.Close()
	if len(calls) < 2 || usage == nil || usage.PromptTokens == 0 {
		t.Fatalf("streamed fan-out: %d calls, usage %+v", len(calls), usage)
	}
	// The children, last first: each is answered from its own invocation.
	var descs []string
	for _, c := range calls {
		var a struct{ Description string }
		_ = json.Unmarshal([]byte(c.Function.Arguments), &a)
		descs = append(descs, a.Description)
	}
	var got []string
	for i := len(descs) - 1; i >= 0; i-- {
		ans := h.chat(t, nil, user(descs[i]))
		got = append(got, ans.Content)
	}
	tr := h.store.all()[0].trace(t)
	inv := map[string]int{}
	for _, a := range tr.Agents {
		if a.TaskCallID != nil {
			inv[*a.TaskCallID] = a.Invocation
		}
	}
	for i, c := range calls {
		if inv[c.ID] != i {
			t.Errorf("the child of task call %d is invocation %d", i, inv[c.ID])
		}
	}
	// A request the script cannot answer (a sequence OpenAI refuses, or
	// no turn of the script) gets a 400 that says why.
	status, body := h.post(t, `{"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "nope", "content": "y"}]}`, nil)
	if status != 400 || !strings.Contains(string(body), "must be a response to a preceeding message with 'tool_calls'") {
		t.Errorf("%d %s", status, body)
	}
	status, body = h.post(t, `{"model": "m", "messages": [{"role": "user", "content": "Who are you?"}, {"role": "assistant", "content": "A helper."}, {"role": "user", "content": "And?"}]}`, nil)
	if status != 400 || !strings.Contains(string(body), "script_mismatch") || !strings.Contains(string(body), "unattached") {
		t.Errorf("%d %s", status, body)
	}
	_ = got
}

// arriving is a scripted upstream that says when a call has reached it.
type arriving struct {
	*proxy.ScriptUpstream
	arrived chan struct{} // buffered, sent to without blocking
}

func (u *arriving) Chat(ctx context.Context, x *proxy.Exchange, out *proxy.Reply) {
	select {
	case u.arrived <- struct{}{}:
	default:
	}
	u.ScriptUpstream.Chat(ctx, x, out)
}

// A call the studio's stop cuts before its answer has begun is answered
// 503, code closing, with Retry-After — an error the client retries, not an
// empty 200 — and recorded as failed, "the studio stopped"; a request that
// comes after is refused the same way. (cmd/studio's
// TestSIGTERMAnswersCallsInFlight does it through SIGTERM, both routes.)
func TestStopAnswersTheCallInFlight(t *testing.T) {
	path := t.TempDir() + "/slow.json"
	doc := `{"name": "slow", "prompt": "go", "script": {"main": [{"content": "late", "delay_ms": 600000}]}}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	up := &arriving{ScriptUpstream: scriptUpstream(t, path), arrived: make(chan struct{}, 1)}
	h := newHarness(t, up, options{})
	send := func() (*http.Response, []byte) {
		resp, err := http.Post(h.srv.URL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model": "m", "messages": [{"role": "user", "content": "go"}]}`))
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp, []byte(b.String())
	}
	type answer struct {
		resp *http.Response
		body []byte
	}
	got := make(chan answer, 1)
	go func() { resp, body := send(); got <- answer{resp, body} }()
	<-up.arrived
	h.p.Close()
	first := <-got
	second, body := send()
	for i, a := range []answer{first, {second, body}} {
		if a.resp == nil {
			continue
		}
		var e struct{ Error struct{ Type, Code string } }
		if a.resp.StatusCode != http.StatusServiceUnavailable || a.resp.Header.Get("Retry-After") != "5" ||
			json.Unmarshal(a.body, &e) != nil || e.Error.Code != "closing" || e.Error.Type != "server_error" {
			t.Errorf("request %d: %s, Retry-After %q, %s: want 503, Retry-After 5, code closing", i+1, a.resp.Status, a.resp.Header.Get("Retry-After"), a.body)
		}
	}
	ss := h.store.all()
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	tr := ss[0].trace(t)
	if tr.Session.Status != delegation.StatusInterrupted || len(tr.ModelCalls) != 1 || tr.ModelCalls[0].Error != "the studio stopped" {
		t.Errorf("session %s, calls %+v: want interrupted, its one call failed as the studio stopped", tr.Session.Status, tr.ModelCalls)
	}
	if by := ss[0].stoppedBy(); by != delegation.StopShutdown {
		t.Errorf("session.finished says stopped_by %q, want %q", by, delegation.StopShutdown)
	}
}
