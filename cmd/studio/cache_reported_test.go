package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// TestCacheReportedOnlyWhenSaid: an endpoint that sends no cached count is
// not one that reported 0 cached tokens; one that sends 0 is.
func TestCacheReportedOnlyWhenSaid(t *testing.T) {
	for _, c := range []struct {
		name    string
		details map[string]any // prompt_tokens_details; nil sends none
		says    bool
	}{
		{"no cached field", nil, false},
		{"cached 0", map[string]any{"cached_tokens": 0}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := openaitest.NewServer(t, func(openaitest.Request) openaitest.Reply {
				usage := map[string]any{"prompt_tokens": 300, "completion_tokens": 2, "total_tokens": 302}
				if c.details != nil {
					usage["prompt_tokens_details"] = c.details
				}
				return openaitest.Reply{Content: "42", Usage: usage}
			})
			sc, err := scenario.Parse([]byte(fmt.Sprintf(`{"name": "cache", "prompt": "go",
				"model": {"provider": "openai", "model": "m", "base_url": %q, "stream": false}}`, srv.URL+"/v1")))
			if err != nil {
				t.Fatal(err)
			}
			var events []delegation.Event
			if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "s", Sink: delegation.SinkFunc(func(e delegation.Event) {
				if e.Seq > 0 {
					events = append(events, e)
				}
			})}); err != nil {
				t.Fatal(err)
			}
			tr, err := trace.Build(trace.Meta{ID: "s", Scenario: sc.Raw}, events)
			if err != nil {
				t.Fatal(err)
			}
			if u := tr.ModelCalls[0].Usage; u == nil || u.CacheReported() != c.says {
				t.Fatalf("usage %+v: cache reported should be %v", u, c.says)
			}
			var out bytes.Buffer
			printTree(&out, tr)
			if said := strings.Contains(out.String(), "the endpoint reported 0 cached tokens"); said != c.says {
				t.Fatalf("the tree says the endpoint reported 0 cached: %v, want %v\n%s", said, c.says, out.String())
			}
		})
	}
}
