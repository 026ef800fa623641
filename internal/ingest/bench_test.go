package ingest_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/ingest"
)

// longAgent is a GenAI trace of one agent making n calls, each receiving
// the whole conversation so far, as every framework sends it: O(n²)
// messages arrive for 2n distinct ones.
func longAgent(n int) ([]ingest.Span, int) {
	var spans []ingest.Span
	conv := []any{text("user", "Work through the list, one item per step.")}
	received := 0
	for i := 0; i < n; i++ {
		in, _ := json.Marshal(conv)
		answer := text("assistant", fmt.Sprintf("Step %d: item %d is done; the next one needs a closer look at its notes.", i, i))
		out, _ := json.Marshal([]any{answer})
		start := t0.Add(time.Duration(2*i) * time.Second)
		spans = append(spans, ingest.Span{TraceID: "t", ID: fmt.Sprintf("c%d", i), Parent: "root", Name: "chat m",
			Start: start, End: start.Add(time.Second),
			Attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": string(in), "gen_ai.output.messages": string(out)}})
		received += len(conv)
		conv = append(conv, answer, text("user", "Go on."))
	}
	spans = append(spans, ingest.Span{TraceID: "t", ID: "root", Name: "invoke_agent main", Start: t0, End: t0.Add(time.Duration(2*n) * time.Second),
		Attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "main"}})
	return spans, received
}

// BenchmarkReceiveLongAgent: mapping a trace costs in proportion to what
// arrives (each call's whole input), not more; the ratio of the cost per
// received message at 400 calls to that at 50 (x8) is reported.
func BenchmarkReceiveLongAgent(b *testing.B) {
	small, smallN := longAgent(50)
	big, bigN := longAgent(400)
	run := func(spans []ingest.Span) (time.Duration, int) {
		sink := &collect{}
		start := time.Now()
		tr := ingest.NewTrace(ingest.Config{SessionID: "s", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
		tr.Add(spans)
		tr.Close("", "", time.Time{})
		stored := 0
		for _, ev := range sink.events {
			if ev.Type == "message.added" {
				stored++
			}
		}
		return time.Since(start), stored
	}
	var ts, tb time.Duration
	for i := 0; i < b.N; i++ {
		d, stored := run(small)
		if stored != 2*50 {
			b.Fatalf("%d messages stored for 50 calls, want 100 (the prompt, 50 answers, 49 replies): each is stored once", stored)
		}
		ts += d
		d, stored = run(big)
		if stored != 2*400 {
			b.Fatalf("%d messages stored for 400 calls, want 800", stored)
		}
		tb += d
	}
	perSmall := float64(ts) / float64(smallN)
	perBig := float64(tb) / float64(bigN)
	b.ReportMetric(perBig/float64(b.N), "ns/received-message")
	b.ReportMetric(perBig/perSmall, "x8/x1")
}
