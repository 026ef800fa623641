package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/proxy"
)

// BenchmarkProxyStorage: one agent calls its model through the recording
// endpoint 400 times, each request holding the whole conversation, as
// every framework sends it. The studio stores each message once (each
// request's new suffix), so its SQLite file grows with the conversation,
// not with what arrived. It reports the database's bytes per raw message
// byte (the stored messages as JSON, counted as internal/db's
// BenchmarkStorage counts the engine's; target ≤ 2, the engine's before
// issue 16, whose is now ≤ 1.4), per byte of the
// messages' text, and per byte received (the requests' bodies).
func BenchmarkProxyStorage(b *testing.B) {
	const calls = 400
	// A step's answer and the next prompt, about as long as a real agent's.
	step := func(i int) string {
		return fmt.Sprintf("Step %d: item %d is done. ", i, i) + strings.Repeat("Checked its fields, its totals and its history; nothing is missing. ", 6)
	}
	var dbRaw, dbReceived float64
	for i := 0; i < b.N; i++ {
		up := openaitest.NewServer(b, func(r openaitest.Request) openaitest.Reply {
			return openaitest.Reply{Content: step(len(r.Messages) / 2), Usage: map[string]any{"prompt_tokens": 1, "completion_tokens": 1}}
		})
		hu, err := proxy.NewHTTPUpstream(up.URL+"/v1", "")
		if err != nil {
			b.Fatal(err)
		}
		s := startStudioWith(b, Config{Upstream: hu})
		msgs := []map[string]string{{"role": "system", "content": "You work through lists, one item per step, and say what you checked."},
			{"role": "user", "content": "Work through the list, one item per step."}}
		distinct, received := 0, 0
		for _, m := range msgs {
			distinct += len(m["content"])
		}
		for c := 0; c < calls; c++ {
			body, _ := json.Marshal(map[string]any{"model": "gpt-4.1-mini", "messages": msgs})
			received += len(body)
			resp, err := http.Post(s.ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			var out struct {
				Choices []struct{ Message struct{ Content string } }
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || len(out.Choices) != 1 {
				b.Fatalf("call %d: %d %v", c, resp.StatusCode, err)
			}
			next := "Go on with the next one."
			msgs = append(msgs, map[string]string{"role": "assistant", "content": out.Choices[0].Message.Content},
				map[string]string{"role": "user", "content": next})
			distinct += len(out.Choices[0].Message.Content)
			if c < calls-1 {
				distinct += len(next)
			}
		}
		// Every message is in once the log holds them all: the prompt, 400
		// answers and 399 prompts after them (the system prompt is the agent's).
		ctx := context.Background()
		raw := 0
		deadline := time.Now().Add(time.Minute)
		for {
			list, err := s.db.Sessions(ctx, 10)
			if err != nil {
				b.Fatal(err)
			}
			if len(list) == 1 {
				tr, err := s.db.Trace(ctx, list[0].ID)
				if err != nil {
					b.Fatal(err)
				}
				if len(tr.Messages) == 2*calls {
					raw = 0
					for _, m := range tr.Messages {
						j, _ := json.Marshal(m)
						raw += len(j)
					}
					break
				}
				if len(tr.Messages) > 2*calls {
					b.Fatalf("%d messages stored for %d distinct ones", len(tr.Messages), 2*calls)
				}
			} else if len(list) > 1 {
				b.Fatalf("%d sessions for one conversation", len(list))
			}
			if time.Now().After(deadline) {
				b.Fatalf("the messages were not all stored")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := s.db.Checkpoint(ctx); err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(s.db.Path())
		if err != nil {
			b.Fatal(err)
		}
		dbRaw = float64(st.Size()) / float64(raw)
		b.ReportMetric(float64(st.Size())/float64(distinct), "db/distinct-text")
		dbReceived = float64(st.Size()) / float64(received)
		b.ReportMetric(float64(st.Size()), "db-bytes")
		b.ReportMetric(float64(received), "received-bytes")
	}
	b.ReportMetric(dbRaw, "db/raw")
	b.ReportMetric(dbReceived, "db/received")
}
