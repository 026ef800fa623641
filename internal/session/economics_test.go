package session

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// An endpoint that reports its prompt cache: what the studio records of it
// beside its own estimate, and what it prices.
func TestReportedCacheUseFromAnEndpoint(t *testing.T) {
	// The endpoint says it read 1,024 prompt tokens from its cache on every
	// call with more than one message (all but main's first), as OpenAI
	// does in blocks of 128 from 1,024.
	srv := openaitest.NewServer(t, func(req openaitest.Request) openaitest.Reply {
		cached := 0
		if len(req.Messages) > 1 {
			cached = 1024
		}
		usage := map[string]any{"prompt_tokens": 3000, "completion_tokens": 20, "total_tokens": 3020,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}}
		switch {
		case req.HasTool("task") && req.Last().Role == "user" && req.Model == "gpt-4.1-mini" && len(req.Messages) == 1:
			return openaitest.Reply{Calls: []openaitest.Call{openaitest.Task("c1", "fk", "Report the number.")}, Usage: usage}
		case req.Last().Role == "tool":
			return openaitest.Reply{Content: "It is 42.", Usage: usage}
		}
		return openaitest.Reply{Content: "42", Usage: usage}
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream %v", stream), func(t *testing.T) {
			doc := fmt.Sprintf(`{"name": "cache", "prompt": "What is the number?",
				"model": {"provider": "openai", "model": "gpt-4.1-mini", "base_url": %q, "stream": %v},
				"subagents": [{"name": "fk", "description": "Reports the number", "mode": "fork"}]}`, srv.URL+"/v1", stream)
			sc, err := scenario.Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			var events []delegation.Event
			res, err := Run(context.Background(), sc, RunOptions{SessionID: "s", Sink: delegation.SinkFunc(func(e delegation.Event) {
				if e.Seq > 0 {
					events = append(events, e)
				}
			})})
			if err != nil || res.Status != delegation.StatusDone {
				t.Fatalf("run: %v %+v", err, res)
			}
			tr, err := trace.Build(trace.Meta{ID: "s", Scenario: sc.Raw}, events)
			if err != nil {
				t.Fatal(err)
			}
			price := tr.Agents[0].Price
			if price == nil || price.Model != "gpt-4.1-mini" || tr.Agents[0].Model != "gpt-4.1-mini" {
				t.Fatalf("main's price = %+v, model %q: want the table's gpt-4.1-mini", price, tr.Agents[0].Model)
			}
			var reported, estimated int
			for _, c := range tr.ModelCalls {
				if c.Usage == nil {
					t.Fatalf("call %s: no usage recorded", c.ID)
				}
				reported += c.Usage.CachedTokens
				estimated += c.CachedPrefixTokens
				if c.Cost == nil || c.Cost.Basis != delegation.BasisUsage {
					t.Fatalf("call %s cost = %+v: want it priced on the endpoint's usage", c.ID, c.Cost)
				}
				want := price.Of(3000, c.Usage.CachedTokens, c.Usage.CacheCreationTokens, 20, delegation.BasisUsage)
				if math.Abs(c.Cost.Total-want.Total) > 1e-12 {
					t.Fatalf("call %s cost %v, want %v", c.ID, c.Cost.Total, want.Total)
				}
			}
			if reported != 2*1024 {
				t.Fatalf("reported cached = %d, want 2048 (main's second call and the fork's)", reported)
			}
			st, err := view.FromTrace(tr, 0)
			if err != nil {
				t.Fatal(err)
			}
			main := st.Agent("main")
			if main.ReportedCalls != 2 || main.ReportedCached != 1024 || main.EstimatedCached != tr.ModelCalls[0].CachedPrefixTokens+tr.ModelCalls[len(tr.ModelCalls)-1].CachedPrefixTokens {
				t.Fatalf("main's economics = %+v", main.Economics)
			}
			// The fork's first call is its parent's first request and more:
			// the studio estimates all of that cached, the endpoint said
			// 1,024, and both are kept.
			var fork trace.ModelCall
			for _, c := range tr.ModelCalls {
				if c.AgentID != "main" {
					fork = c
				}
			}
			if fork.CachedPrefixTokens != tr.ModelCalls[0].InputTokens || fork.Usage.CachedTokens != 1024 {
				t.Fatalf("fork call: estimated %d (want main's first input %d), reported %d", fork.CachedPrefixTokens,
					tr.ModelCalls[0].InputTokens, fork.Usage.CachedTokens)
			}
			if got := st.Cost.Total; math.Abs(got-sumCost(tr)) > 1e-12 || !st.Cost.Priced() {
				t.Fatalf("session cost %v, calls sum to %v", got, sumCost(tr))
			}
		})
	}
}

func sumCost(tr *trace.Trace) float64 {
	s := 0.0
	for _, c := range tr.ModelCalls {
		if c.Cost != nil {
			s += c.Cost.Total
		}
	}
	return s
}
