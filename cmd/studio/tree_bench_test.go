package main

import (
	"io"
	"syscall"
	"testing"

	"github.com/delegationstudio/studio/internal/benchdata"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// BenchmarkTreeFold prints the tree of a 4,000-message session both ways
// from one run's events, in turns: folded as the events come (what run does
// now) ÷ the trace built, then its log folded back through its JSON
// (view.FromTrace, what run did before), CPU time as wall time of one
// goroutine.
func BenchmarkTreeFold(b *testing.B) {
	events, _, _ := runBothWays(b, benchdata.Messages(4_000))
	meta := trace.Meta{ID: "s1", Title: "t"}
	var now, before float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := cpuNow()
		var out runOutput
		out.start(meta, true)
		for _, e := range events {
			out.add(e)
		}
		printState(io.Discard, out.b.Trace(), out.st)
		now += cpuNow() - start

		start = cpuNow()
		t, err := trace.Build(meta, events)
		if err != nil {
			b.Fatal(err)
		}
		st, err := view.FromTrace(t, 0)
		if err != nil {
			b.Fatal(err)
		}
		printState(io.Discard, t, st)
		before += cpuNow() - start
	}
	b.ReportMetric(now/before, "now/before")
	b.ReportMetric(now/float64(b.N)*1000, "ms-now")
	b.ReportMetric(before/float64(b.N)*1000, "ms-before")
}

// cpuNow is the process's CPU time so far, in seconds.
func cpuNow() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
