package lessons

import (
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

func testReceivedDeepagents(t *testing.T, tab Table, r map[string]*trace.Trace) {
	da := r["deepagents"]
	if got := da.Session.Origin.OriginKind(); got != delegation.OriginOTLP {
		t.Fatalf("the deepagents run's origin = %s, want otlp", got)
	}
	if got, want := da.Session.Origin.Instrumentation, "@arizeai/openinference-instrumentation-langchain 4.1.1"; len(got) != 1 || got[0] != want {
		t.Errorf("instrumentation = %v, want [%s]", got, want)
	}
	if got := r["received-deepagents"].Session.Origin.OriginKind(); got != delegation.OriginEngine {
		t.Errorf("the engine's run's origin = %s", got)
	}
	if got, want := tab.Rows[0][1], "main (main), general-purpose (isolated), forker (fork)"; got != want {
		t.Errorf("agents = %q, want %q", got, want)
	}
}
