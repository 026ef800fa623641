package session

import (
	"context"
	"testing"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

func longScenario(tb testing.TB, mainSteps, childSteps int) *scenario.Scenario {
	tb.Helper()
	sc, err := scenario.Parse(benchdata.LongScenario(mainSteps, childSteps))
	if err != nil {
		tb.Fatal(err)
	}
	return sc
}

// BenchmarkEngine200Plus50 measures the engine per model call, token
// counting included, with events encoded and handed to a sink that keeps
// nothing. Target: ≤ 20 µs per model call.
func BenchmarkEngine200Plus50(b *testing.B) {
	sc := longScenario(b, 200, 50)
	var calls int
	sink := delegation.SinkFunc(func(e delegation.Event) {
		if e.Type == delegation.EventModelStarted {
			calls++
		}
	})
	// The tokenizer's vocabulary loads once per process; measure the steady state.
	sc.Counter.Count("warm up")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		calls = 0
		res, err := Run(context.Background(), sc, RunOptions{SessionID: "bench", Sink: sink})
		if err != nil || res.Status != delegation.StatusDone {
			b.Fatalf("run: %v %+v", err, res)
		}
	}
	b.StopTimer()
	if calls != 251 {
		b.Fatalf("model calls = %d, want 251", calls)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/model-call")
}

func TestLongScenarioRuns(t *testing.T) {
	sc := longScenario(t, 200, 50)
	var calls, children int
	res, err := Run(context.Background(), sc, RunOptions{Sink: delegation.SinkFunc(func(e delegation.Event) {
		switch e.Type {
		case delegation.EventModelStarted:
			calls++
		case delegation.EventDelegationStarted:
			children++
		}
	})})
	if err != nil || res.Status != delegation.StatusDone {
		t.Fatalf("run: %v %+v", err, res)
	}
	if calls != 251 || children != 1 {
		t.Fatalf("calls = %d, children = %d; want 251 and 1", calls, children)
	}
}
