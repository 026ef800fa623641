package lessons

import (
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

func testArticleLoop(t *testing.T, tab Table, r map[string]*trace.Trace) {
	art := r["article"]
	o := art.Session.Origin
	if got := o.OriginKind(); got != delegation.OriginProxy {
		t.Fatalf("the article's run's origin = %s, want proxy", got)
	}
	if o.Service != "Anthropic/JS 1.16.0" || o.Provider != "anthropic" {
		t.Errorf("the article's run came from %q (provider %q); want Anthropic's JS SDK", o.Service, o.Provider)
	}
	if got := r["engine"].Session.Origin.OriginKind(); got != delegation.OriginEngine {
		t.Errorf("the engine's run's origin = %s", got)
	}
	if got, want := tab.Rows[1][1:], []string{`"task (description, subagent_type)"`, `"subagent (task)"`}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("the delegation tools = %q, want %q", got, want)
	}
}
