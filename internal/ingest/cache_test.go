package ingest_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/ingest"
)

// A chat span's cache writes are read into its usage's cache-creation
// tokens, by each name they come under: the GenAI semantic conventions'
// gen_ai.usage.cache_creation.input_tokens, the older flat
// gen_ai.usage.cache_creation_input_tokens, and OpenInference's
// llm.token_count.prompt_details.cache_write (with its cache_read).
func TestCacheWritesRead(t *testing.T) {
	in, _ := json.Marshal([]any{text("user", "Go.")})
	out, _ := json.Marshal([]any{text("assistant", "Done.")})
	genai := func(k string) []ingest.Span {
		return []ingest.Span{
			{TraceID: "t", ID: "root", Name: "invoke_agent main", Start: t0, End: t0.Add(2 * time.Second),
				Attrs: map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "main"}},
			{TraceID: "t", ID: "c", Parent: "root", Name: "chat m", Start: t0, End: t0.Add(time.Second),
				Attrs: map[string]any{"gen_ai.operation.name": "chat", "gen_ai.input.messages": string(in), "gen_ai.output.messages": string(out),
					"gen_ai.usage.input_tokens": int64(100), "gen_ai.usage.output_tokens": int64(5),
					"gen_ai.usage.cache_read.input_tokens": int64(20), k: int64(40)}},
		}
	}
	oi := []ingest.Span{
		{TraceID: "t", ID: "root", Name: "agent", Start: t0, End: t0.Add(2 * time.Second),
			Attrs: map[string]any{"openinference.span.kind": "AGENT"}},
		{TraceID: "t", ID: "c", Parent: "root", Name: "llm", Start: t0, End: t0.Add(time.Second),
			Attrs: map[string]any{"openinference.span.kind": "LLM", "input.value": "Go.", "output.value": "Done.",
				"llm.token_count.prompt": int64(100), "llm.token_count.completion": int64(5),
				"llm.token_count.prompt_details.cache_read": int64(20), "llm.token_count.prompt_details.cache_write": int64(40)}},
	}
	for name, spans := range map[string][]ingest.Span{
		"semantic conventions": genai("gen_ai.usage.cache_creation.input_tokens"),
		"flat":                 genai("gen_ai.usage.cache_creation_input_tokens"),
		"openinference":        oi,
	} {
		t.Run(name, func(t *testing.T) {
			sink, _ := assemble(spans, len(spans))
			tr := sink.build(t)
			if len(tr.ModelCalls) != 1 {
				t.Fatalf("%d model calls", len(tr.ModelCalls))
			}
			u := tr.ModelCalls[0].Usage
			if u == nil || fmt.Sprint(u.PromptTokens, u.CachedTokens, u.CacheCreationTokens) != "100 20 40" {
				t.Errorf("usage = %+v, want 100 prompt tokens, 20 read from the cache, 40 written", u)
			}
		})
	}
}
