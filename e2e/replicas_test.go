package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db/pgtest"
)

// TestReplicasLivePage: two studio processes on one PostgreSQL database, as
// behind a load balancer. A session runs on A; its page, opened on B while
// the session's first model call is held, follows it live with no reload,
// and reads at a held moment and at the end as a fresh load of the same
// page does, on B and on A.
func TestReplicasLivePage(t *testing.T) {
	dsn := pgtest.DSN(t)
	model, endpoint := newGatedModel(t, map[string][]gatedTurn{
		"main": {
			{Content: "First the isolated helper.", Tools: []gatedCall{{"write_file", `{"file_path": "/plan.md", "content": "Order A-7731"}`}, {"task", `{"description": "ISO-TASK: report the order number above.", "subagent_type": "iso"}`}}},
			{Content: "The order is A-7731; the isolated helper did not see it."},
		},
		"iso": {{Content: "ISO-ANSWER: I was given no order number."}},
	}, "main#0", "main#1")
	a := startStudio(t, "--db", dsn, "--model-url", endpoint.URL+"/v1", "--model", "m")
	b := startStudio(t, "--db", dsn)
	id := a.start(t, `{"name": "e2e-replicas", "prompt": "Find out who can see the order number.",
  "model": {"endpoint": "default", "model": "m"},
  "subagents": [{"name": "iso", "description": "Works alone.", "system_prompt": "Answer briefly.", "tools": ["ls", "read_file"]}]}`)
	onB, onA := b.URL+"/sessions/"+id, a.URL+"/sessions/"+id
	tb := newTab(t)
	model.waitArrived("main#0")
	tb.navigate(onB)
	eval[bool](tb, `window.__noReload = true`)
	tb.waitFor("B's page of A's session has its live socket open", `document.querySelector('.session').dataset.live === 'open'`,
		`document.querySelector('.session').dataset.live`)
	if first := eval[panelsRead](tb, readPanels); !first.Running || !strings.Contains(first.Panels["answer"], "running…") {
		t.Fatalf("B's page of A's running session: running %v, answer %q", first.Running, first.Panels["answer"])
	}
	model.release("main#0")

	model.waitArrived("main#1")
	deadline := time.Now().Add(waitLimit)
	for !a.hasCall(t, id, "main.c1") {
		if time.Now().After(deadline) {
			t.Fatalf("model call main.c1 was not stored within %v", waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	seq := a.lastSeq(t, id)
	tb.waitFor("B's page shows seq "+seq, `document.querySelector('.session').dataset.lastSeq === `+jsString(seq),
		`document.querySelector('.session').dataset.lastSeq`)
	tb.screenshot("replicas-1-mid-run-on-B")
	mid := eval[panelsRead](tb, readPanels)
	if !strings.Contains(mid.Panels["cameBack"], "ISO-ANSWER") {
		t.Errorf("mid-run, B's page's came-back reads %q; want the receipt", mid.Panels["cameBack"])
	}
	comparePanels(t, "mid-run, against a fresh load on B", mid, freshLoad(t, onB))
	comparePanels(t, "mid-run, against a fresh load on A", mid, freshLoad(t, onA))
	model.release("main#1")

	tb.waitFor("the status shows done", statusIs("done"), describeStatus)
	tb.waitFor("B's page shows the last seq", `document.querySelector('.session').dataset.lastSeq === `+jsString(a.lastSeq(t, id)),
		`document.querySelector('.session').dataset.lastSeq`)
	tb.screenshot("replicas-2-done-on-B")
	end := eval[panelsRead](tb, readPanels)
	comparePanels(t, "at the end, against a fresh load on B", end, freshLoad(t, onB))
	comparePanels(t, "at the end, against a fresh load on A", end, freshLoad(t, onA))
	if !eval[bool](tb, `window.__noReload === true`) {
		t.Errorf("B's page was reloaded")
	}
}
