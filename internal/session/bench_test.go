package session

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// longScenario is the benchmark of issue 2: a main agent of mainSteps
// tool-call steps whose last step delegates to a child of childSteps steps,
// scripted and instant.
func longScenario(tb testing.TB, mainSteps, childSteps int) *scenario.Scenario {
	tb.Helper()
	turn := func(i int, who string) map[string]any {
		var call map[string]any
		switch i % 3 {
		case 0:
			call = map[string]any{"name": "write_file", "args": map[string]any{
				"file_path": fmt.Sprintf("/%s/notes-%d.md", who, i),
				"content":   fmt.Sprintf("Step %d: the parser reads the header, then the body; the checksum of block %d is 0x%x.", i, i, i*7919)}}
		case 1:
			call = map[string]any{"name": "read_file", "args": map[string]any{"file_path": fmt.Sprintf("/%s/notes-%d.md", who, i-1)}}
		default:
			call = map[string]any{"name": "grep", "args": map[string]any{"pattern": "checksum", "path": "/" + who, "output_mode": "count"}}
		}
		return map[string]any{"content": fmt.Sprintf("Looking at step %d.", i), "tool_calls": []any{call}}
	}
	var main, child []any
	for i := 0; i < mainSteps-1; i++ {
		main = append(main, turn(i, "main"))
	}
	main = append(main,
		map[string]any{"tool_calls": []any{map[string]any{"name": "task", "args": map[string]any{
			"description": "Summarize every checksum in /main and report the largest.", "subagent_type": "general-purpose"}}}},
		map[string]any{"content": "The helper reported the largest checksum."})
	for i := 0; i < childSteps-1; i++ {
		child = append(child, turn(i, "child"))
	}
	child = append(child, map[string]any{"content": "The largest checksum is 0x1792f."})
	doc, err := json.Marshal(map[string]any{
		"name": "bench", "prompt": "Work through the notes, then delegate the summary.",
		"agent":     map[string]any{"max_steps": mainSteps + 10},
		"subagents": []any{map[string]any{"name": "general-purpose", "description": "Does the work.", "max_steps": childSteps + 10}},
		"script":    map[string]any{"main": main, "general-purpose": []any{child}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	sc, err := scenario.Parse(doc)
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
