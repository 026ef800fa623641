package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The session page is true at every moment: watched live from before its
// first model call to its end, with no reload, every panel reads as a fresh
// load of the same URL; and so at two moments mid-run, against a fresh load
// at the same seq.

// readPanels is every panel's text (white space folded; a running call's
// ticking clock left out) and the classes that carry state, with the seq
// the page shows.
const readPanels = `(() => {
  const text = sel => {
    const el = document.querySelector(sel);
    if (!el) return '(absent)';
    const c = el.cloneNode(true);
    c.querySelectorAll('.elapsed, [data-axis]').forEach(e => e.textContent = '');
    c.querySelectorAll('noscript').forEach(e => e.remove());
    return c.textContent.replace(/\s+/g, ' ').trim();
  };
  const classes = sel => [...document.querySelectorAll(sel)].map(e => (e.id || e.dataset.testid || e.tagName) + ' ' + [...e.classList].sort().join(' '));
  return {
    seq: document.querySelector('.session').dataset.lastSeq,
    running: document.querySelector('.session').hasAttribute('data-running'),
    panels: {
      status: text('#status'),
      controls: text('.session > .head .actions'),
      totals: text('#totals'),
      tree: text('#tree') + ' | ' + classes('#tree g.node').join(', '),
      notes: text('#notes'),
      panes: text('[data-testid="parent-pane"]') + ' || ' + text('[data-testid="child-pane"]') + ' | ' + classes('#delegation li.msg').join(', '),
      delegation: text('#delegation'),
      cameBack: text('[data-testid="came-back"]'),
      heldBack: text('[data-testid="held-back"]'),
      scrubber: text('#scrubber') + ' | ' + (document.querySelector('#scrubber input') || {}).value,
      timeline: text('#timeline') + ' | ' + classes('#timeline .lane, #timeline .bar').join(', '),
      answer: text('#answer'),
      files: text('#files'),
    },
  };
})()`

type panelsRead struct {
	Seq     string            `json:"seq"`
	Running bool              `json:"running"`
	Panels  map[string]string `json:"panels"`
}

// comparePanels fails on every panel whose text differs between a page
// watched live and a fresh load.
func comparePanels(t *testing.T, when string, live, fresh panelsRead) {
	t.Helper()
	if live.Seq != fresh.Seq {
		t.Errorf("%s: the live page is at seq %s, the fresh load at %s", when, live.Seq, fresh.Seq)
	}
	if live.Running != fresh.Running {
		t.Errorf("%s: data-running live %v, fresh %v", when, live.Running, fresh.Running)
	}
	var names []string
	for name := range fresh.Panels {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if l, f := live.Panels[name], fresh.Panels[name]; l != f {
			t.Errorf("%s: the %s panel differs from a fresh load:\n live:  %s\n fresh: %s", when, name, l, f)
		}
	}
}

// freshLoad reads the panels of the URL in a new tab.
func freshLoad(t *testing.T, url string) panelsRead {
	t.Helper()
	tb := newTab(t)
	tb.navigate(url)
	tb.waitFor("the fresh page is loaded", `document.readyState === 'complete' && document.querySelector('.session')`, `location.href`)
	return eval[panelsRead](tb, readPanels)
}

// lastSeq is the seq of the session's newest stored event.
func (s *studio) lastSeq(t *testing.T, id string) string {
	t.Helper()
	resp, err := http.Get(s.URL + "/api/sessions/" + id + "/trace")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		Events []struct {
			Seq int64 `json:"seq"`
		} `json:"events"`
		ModelCalls []struct {
			ID string `json:"id"`
		} `json:"model_calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Events) == 0 {
		return "0"
	}
	return fmt.Sprint(tr.Events[len(tr.Events)-1].Seq)
}

// hasCall reports whether the session has stored a model call.
func (s *studio) hasCall(t *testing.T, id, callID string) bool {
	t.Helper()
	tr := s.trace(t, id)
	for _, c := range tr.ModelCalls {
		if c.ID == callID {
			return true
		}
	}
	return false
}

// gatedModel is an OpenAI-compatible endpoint that answers each agent from
// a script of its own and holds the calls named in hold until the test
// releases them: "mid-run" is then a moment the test chooses, not a race.
type gatedModel struct {
	t       *testing.T
	mu      sync.Mutex
	script  map[string][]gatedTurn
	calls   map[string]int
	hold    map[string]chan struct{}
	arrived chan string
}

type gatedTurn struct {
	Content string
	Tools   []gatedCall
}

type gatedCall struct{ Name, Args string }

func newGatedModel(t *testing.T, script map[string][]gatedTurn, hold ...string) (*gatedModel, *httptest.Server) {
	g := &gatedModel{t: t, script: script, calls: map[string]int{}, hold: map[string]chan struct{}{}, arrived: make(chan string, 16)}
	for _, h := range hold {
		g.hold[h] = make(chan struct{})
	}
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(func() {
		g.mu.Lock()
		for k, c := range g.hold {
			close(c)
			delete(g.hold, k)
		}
		g.mu.Unlock()
		srv.Close()
	})
	return g, srv
}

// release lets a held call answer.
func (g *gatedModel) release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.hold[key]; ok {
		close(c)
		delete(g.hold, key)
	}
}

// waitArrived waits for the held call to be asked for.
func (g *gatedModel) waitArrived(key string) {
	g.t.Helper()
	select {
	case got := <-g.arrived:
		if got != key {
			g.t.Fatalf("the model was asked for %s first; want %s", got, key)
		}
	case <-time.After(waitLimit):
		g.t.Fatalf("the model was not asked for %s within %v", key, waitLimit)
	}
}

// agentOf tells the callers apart by what only each one was told: the
// isolated child's task, the fork child's task in its opening message.
func agentOf(msgs []struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}) string {
	for _, m := range msgs {
		if m.Role == "user" && strings.Contains(m.Content, "ISO-TASK") {
			return "iso"
		}
		if m.Role == "user" && strings.Contains(m.Content, "FK-TASK") {
			return "fk"
		}
	}
	return "main"
}

func (g *gatedModel) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Stream   bool `json:"stream"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	agent := agentOf(req.Messages)
	g.mu.Lock()
	n := g.calls[agent]
	g.calls[agent]++
	key := fmt.Sprintf("%s#%d", agent, n)
	turns := g.script[agent]
	gate := g.hold[key]
	g.mu.Unlock()
	if gate != nil {
		g.arrived <- key
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	if n >= len(turns) {
		http.Error(w, `{"error": {"message": "no more turns for `+key+`"}}`, http.StatusBadRequest)
		return
	}
	turn := turns[n]
	var calls []map[string]any
	for i, c := range turn.Tools {
		calls = append(calls, map[string]any{"index": i, "id": fmt.Sprintf("call_%s_%d_%d", agent, n, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Args}})
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	msg := map[string]any{"role": "assistant", "content": turn.Content}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": key, "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(delta map[string]any, fin any) {
		b, _ := json.Marshal(map[string]any{"id": key, "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	send(msg, nil)
	send(map[string]any{}, finish)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestLivePageMidRun watches a session from before its first model call
// returns: at two moments the test holds it still (after the first receipt,
// while a child is running) the page reads as a fresh load at the same seq,
// and so at the end, all with no reload.
func TestLivePageMidRun(t *testing.T) {
	model, endpoint := newGatedModel(t, map[string][]gatedTurn{
		"main": {
			{Content: "First the isolated helper.", Tools: []gatedCall{{"write_file", `{"file_path": "/plan.md", "content": "Order A-7731"}`}, {"task", `{"description": "ISO-TASK: report the order number above.", "subagent_type": "iso"}`}}},
			{Content: "Now the fork.", Tools: []gatedCall{{"task", `{"description": "FK-TASK: repeat the order number.", "subagent_type": "fk"}`}}},
			{Content: "The order is A-7731: the fork saw it, the isolated helper did not."},
		},
		"iso": {{Content: "ISO-ANSWER: I was given no order number."}},
		"fk": {
			{Content: "Checking the files.", Tools: []gatedCall{{"ls", `{"path": "/"}`}}},
			{Content: "FORK-ANSWER: A-7731."},
		},
	}, "main#0", "main#1", "fk#1")
	s := startStudio(t, "--model-url", endpoint.URL+"/v1", "--model", "m")
	// --model-url is the endpoint named "default"; the scenario names it.
	id := s.start(t, `{"name": "e2e-gated", "prompt": "Find out who can see the order number.",
  "model": {"endpoint": "default", "model": "m"},
  "subagents": [
    {"name": "iso", "description": "Works alone.", "system_prompt": "Answer briefly.", "tools": ["ls", "read_file"]},
    {"name": "fk", "description": "Continues the conversation.", "mode": "fork"}
  ]}`)
	url := s.URL + "/sessions/" + id
	tb := newTab(t)
	model.waitArrived("main#0")
	tb.navigate(url)
	eval[bool](tb, `window.__noReload = true`)
	tb.waitFor("the page's live socket is open", `document.querySelector('.session').dataset.live === 'open'`, `document.querySelector('.session').dataset.live`)
	first := eval[panelsRead](tb, readPanels)
	if !strings.Contains(first.Panels["delegation"], "No delegation yet") || !strings.Contains(first.Panels["answer"], "running…") {
		t.Fatalf("before the first model call returned, the page shows %v; want no delegation yet and the answer running", first.Panels)
	}
	tb.screenshot("0-before-the-first-answer")
	model.release("main#0")

	// moment holds the session at a held call, waits until the live page
	// shows the store's newest seq, and compares it with a fresh load.
	moment := func(name, held, callID string) {
		t.Helper()
		model.waitArrived(held)
		deadline := time.Now().Add(waitLimit)
		for !s.hasCall(t, id, callID) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: model call %s was not stored within %v", name, callID, waitLimit)
			}
			time.Sleep(20 * time.Millisecond)
		}
		seq := s.lastSeq(t, id)
		tb.waitFor(name+": the live page shows seq "+seq, `document.querySelector('.session').dataset.lastSeq === `+jsString(seq),
			`document.querySelector('.session').dataset.lastSeq`)
		tb.screenshot(name)
		live := eval[panelsRead](tb, readPanels)
		fresh := freshLoad(t, url)
		comparePanels(t, name, live, fresh)
	}

	moment("1-after-the-first-receipt", "main#1", "main.c1")
	live := eval[panelsRead](tb, readPanels)
	if !strings.Contains(live.Panels["cameBack"], "ISO-ANSWER") || !strings.Contains(live.Panels["panes"], "receipt") {
		t.Errorf("after the first receipt the page's came-back reads %q and its panes %q; want the receipt, marked", live.Panels["cameBack"], live.Panels["panes"])
	}
	model.release("main#1")

	moment("2-while-the-fork-runs", "fk#1", "a2.c1")
	if live := eval[panelsRead](tb, readPanels); !strings.Contains(live.Panels["tree"], "node-a2 node node-running") {
		t.Errorf("while the fork runs the tree reads %q; want a2 running", live.Panels["tree"])
	}
	model.release("fk#1")

	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.waitFor("the live page shows the last seq", `document.querySelector('.session').dataset.lastSeq === `+jsString(s.lastSeq(t, id)), `document.querySelector('.session').dataset.lastSeq`)
	tb.screenshot("3-done")
	end := eval[panelsRead](tb, readPanels)
	comparePanels(t, "at the end", end, freshLoad(t, url))
	if !eval[bool](tb, `window.__noReload === true`) {
		t.Errorf("the page was reloaded")
	}
	if strings.Contains(end.Panels["controls"], "Stop") || !strings.Contains(end.Panels["answer"], "The order is A-7731") {
		t.Errorf("at the end the controls read %q and the answer %q; want no Stop and the final answer", end.Panels["controls"], end.Panels["answer"])
	}
}

// everyPanelScenario changes every panel, with scripted turns that think
// long enough to be watched.
const everyPanelScenario = `{"name": "e2e-every-panel", "prompt": "Work, delegate, and report the order number.",
 "subagents": [
  {"name": "iso", "description": "Works alone.", "system_prompt": "Answer briefly.", "tools": ["write_file", "read_file"]},
  {"name": "fk", "description": "Continues.", "mode": "fork"},
  {"name": "tiny", "description": "Has one step.", "max_steps": 1}
 ],
 "files": {"/b.md": "b", "/d.md": "d"},
 "script": {
  "main": [
   {"content": "Writing notes.", "delay_ms": 600, "tool_calls": [
     {"name": "write_file", "args": {"file_path": "/a.md", "content": "Order A-7731"}},
     {"name": "delete", "args": {"file_path": "/b.md"}}]},
   {"content": "Three helpers at once.", "delay_ms": 100, "tool_calls": [
     {"name": "task", "args": {"description": "Report the order number above.", "subagent_type": "iso"}},
     {"name": "task", "args": {"description": "Repeat the order number.", "subagent_type": "fk"}},
     {"name": "task", "args": {"description": "Loop.", "subagent_type": "tiny"}},
     {"name": "task", "args": {"description": "Anything.", "subagent_type": "nobody"}}]},
   {"content": "Listing.", "delay_ms": 100, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]},
   {"content": "The order is A-7731, as the fork said.", "delay_ms": 100}
  ],
  "iso": [[{"content": "", "delay_ms": 150, "tool_calls": [{"name": "write_file", "args": {"file_path": "/iso.md", "content": "from iso"}}]}, {"content": "", "delay_ms": 100}]],
  "fk": [[{"content": "FORK: A-7731", "delay_ms": 300}]],
  "tiny": [[{"delay_ms": 100, "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}]]
 }}`

// watchPanels records, for each panel, the seqs the page showed each time
// the panel changed.
const watchPanels = `(() => {
  const page = document.querySelector('.session');
  window.__panelSeqs = {};
  window.__seqs = [page.dataset.lastSeq];
  new MutationObserver(() => { if (window.__seqs[window.__seqs.length - 1] !== page.dataset.lastSeq) window.__seqs.push(page.dataset.lastSeq); })
    .observe(page, {attributes: true, attributeFilter: ['data-last-seq']});
  const panels = {status: '#status', controls: '.session > .head .actions', totals: '#totals', tree: '#tree', notes: '#notes',
    delegation: '#delegation', scrubber: '#scrubber', timeline: '#timeline', answer: '#answer', files: '#files'};
  const at = name => () => { (window.__panelSeqs[name] = window.__panelSeqs[name] || []).push(page.dataset.lastSeq); };
  Object.entries(panels).forEach(([name, sel]) => {
    // A panel replaced whole is watched through its parent.
    const el = document.querySelector(sel);
    new MutationObserver(records => {
      const cur = document.querySelector(sel);
      const mine = r => (r.target === el || el.contains(r.target) || r.target === cur || (cur && cur.contains(r.target)) ||
        [...r.addedNodes, ...r.removedNodes].some(n => n.matches && n.matches(sel)));
      // The running calls' clocks tick on their own (the timeline's axis
      // with them), and their streamed text is live only (seq 0): neither
      // is an event of the log.
      const within = (r, s) => r.target.closest ? r.target.closest(s) : (r.target.parentNode && r.target.parentNode.closest(s));
      const ticking = r => within(r, '.elapsed') || within(r, '[data-stream]') || within(r, '[data-axis]');
      if (records.some(r => mine(r) && !ticking(r))) at(name)();
    }).observe(el.parentNode, {subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['class', 'data-running', 'data-follow', 'hidden', 'value', 'max']});
  });
  return true;
})()`

// openBeforeFirstDelegation starts the every-panel session and opens its
// page, watching, before the first delegation. On a busy machine the page
// can open after it: then a new session is started whose first turn waits
// twice as long, until the page is in time.
func openBeforeFirstDelegation(t *testing.T, s *studio, tb *tab) (id, url string) {
	t.Helper()
	for delay := 600; ; delay *= 2 {
		id = s.start(t, strings.Replace(everyPanelScenario, `"delay_ms": 600`, fmt.Sprintf(`"delay_ms": %d`, delay), 1))
		url = s.URL + "/sessions/" + id
		tb.navigate(url)
		eval[bool](tb, `window.__noReload = true`)
		eval[bool](tb, watchPanels)
		first := eval[panelsRead](tb, readPanels)
		if strings.Contains(first.Panels["delegation"], "No delegation yet") {
			return id, url
		}
		if delay >= 600*32 {
			t.Fatalf("the page opened after the first turn even when it waited %d ms: %q", delay, first.Panels["delegation"])
		}
		t.Logf("the page opened after the first turn (%d ms; a busy machine): trying with a longer first turn", delay)
	}
}

// TestEveryPanelLiveEqualsReload opens the page of a session of delayed
// scripted turns before its first turn is played, watches it to the end
// with no reload, and compares every panel with a fresh load; and checks,
// panel by panel, that the events that change a panel patch it, and only
// those.
func TestEveryPanelLiveEqualsReload(t *testing.T) {
	s := startStudio(t)
	tb := newTab(t)
	id, url := openBeforeFirstDelegation(t, s, tb)
	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	last := s.lastSeq(t, id)
	tb.waitFor("the live page shows the last seq", `document.querySelector('.session').dataset.lastSeq === `+jsString(last), `document.querySelector('.session').dataset.lastSeq`)
	tb.screenshot("live-at-the-end")
	live := eval[panelsRead](tb, readPanels)
	comparePanels(t, "at the end", live, freshLoad(t, url))
	if !eval[bool](tb, `window.__noReload === true`) {
		t.Fatalf("the page was reloaded")
	}
	for panel, want := range map[string]string{"notes": "Worth a look", "tree": "refused", "files": "/iso.md", "cameBack": "The receipt", "answer": "The order is A-7731"} {
		if !strings.Contains(live.Panels[panel], want) {
			t.Errorf("the %s panel reads %q; want it to say %q", panel, live.Panels[panel], want)
		}
	}

	// Which events each panel changed at: the log says what each seq was.
	resp, err := http.Get(s.URL + "/api/sessions/" + id + "/trace")
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Events []struct {
			Seq  int64  `json:"seq"`
			Type string `json:"type"`
		} `json:"events"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tr)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	seqs := eval[map[string][]string](tb, `window.__panelSeqs`)
	order := eval[[]string](tb, `window.__seqs`)
	synced := eval[string](tb, `document.querySelector('.session').dataset.syncedAt || ''`)
	// typesBetween are the event types of seqs from+1 … to.
	typesBetween := func(from, to int64) []string {
		var out []string
		for _, ev := range tr.Events {
			if ev.Seq > from && ev.Seq <= to {
				out = append(out, ev.Type)
			}
		}
		return out
	}
	allowed := map[string][]string{
		"status":     {"session.finished"},
		"controls":   {"session.finished"},
		"answer":     {"session.finished"},
		"totals":     {"agent.started", "model.started"},
		"tree":       {"agent.started", "agent.finished", "model.started", "delegation.refused", "message.added"},
		"notes":      {"delegation.started", "message.added", "agent.finished", "model.started", "session.finished"},
		"scrubber":   {"agent.started", "model.started", "model.finished"}, // it quotes the newest call's answer
		"timeline":   {"agent.started", "model.started", "model.finished", "tool.started", "tool.finished", "delegation.started", "session.finished"},
		"files":      {"files.changed", "session.started"},
		"delegation": {"delegation.started", "agent.started", "message.added", "model.started", "model.finished", "agent.finished", "delegation.finished", "files.changed", "summarization", "tool.started"},
	}
	for _, panel := range []string{"status", "controls", "totals", "tree", "notes", "delegation", "scrubber", "timeline", "answer", "files"} {
		t.Run(panel, func(t *testing.T) {
			at := seqs[panel]
			if len(at) == 0 {
				t.Fatalf("the %s panel never changed while the session ran", panel)
			}
			for _, sq := range at {
				if sq == synced {
					continue // a reconnect's sync draws every panel again
				}
				// The message that changed it brought the page from the
				// seq before to this one.
				i := slices.Index(order, sq)
				if i < 1 {
					t.Fatalf("the %s panel changed at seq %s, which the page never showed (%v)", panel, sq, order)
				}
				var from, to int64
				fmt.Sscan(order[i-1], &from)
				fmt.Sscan(sq, &to)
				types := typesBetween(from, to)
				ok := false
				for _, typ := range types {
					ok = ok || slices.Contains(allowed[panel], typ)
				}
				if !ok {
					t.Errorf("the %s panel changed with seqs %d..%d, events %v, none of which changes it", panel, from+1, to, types)
				}
			}
		})
	}
}
