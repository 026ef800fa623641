package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/proxy"
)

// loadAnswer is the upstream's answer to a conversation of n messages:
// long enough to matter, different at every step, so that an answer cut or
// mixed up with another shows.
func loadAnswer(n int) string {
	return fmt.Sprintf("Answer to %d messages. ", n) + strings.Repeat(fmt.Sprintf("Item %d checked; its fields and totals agree. ", n), 40)
}

// loadUpstream is the model the recording endpoint forwards the load's
// agents to.
func loadUpstream(t *testing.T) proxy.Upstream {
	t.Helper()
	up := openaitest.NewServer(t, func(r openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: loadAnswer(len(r.Messages)), Usage: map[string]any{"prompt_tokens": 10 * len(r.Messages), "completion_tokens": 90}}
	})
	hu, err := proxy.NewHTTPUpstream(up.URL+"/v1", "")
	if err != nil {
		t.Fatal(err)
	}
	return hu
}

// loadAgents runs STUDIO_LOAD_AGENTS programs (2 unless set), each calling
// its model through the recording endpoint of a studio (agent i on studio
// i mod n) with a streamed chat completion per step, its conversation
// growing, its session named by X-Studio-Session; a refusal for now is
// waited out as Retry-After says. Each must get every answer whole, and
// its session must record every call with that answer.
func loadAgents(t *testing.T, studios []*studio) {
	agents := envInt("STUDIO_LOAD_AGENTS", 2)
	const calls = 6
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(envInt("STUDIO_LOAD_SECONDS", 4)+120)*time.Second)
	defer cancel()
	run := time.Now().UnixNano()
	var wg sync.WaitGroup
	errs := make(chan error, agents)
	for i := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, name := studios[i%len(studios)], fmt.Sprintf("load-agent-%d-%d", run, i)
			if err := loadAgent(ctx, s, name, calls); err != nil {
				errs <- fmt.Errorf("agent %s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d agents called their model %d times each through the recording endpoint, streaming; every answer came whole and was recorded", agents, calls)
}

func loadAgent(ctx context.Context, s *studio, name string, calls int) error {
	msgs := []map[string]string{{"role": "system", "content": "You check items, one a step."}, {"role": "user", "content": "Check the items."}}
	for c := 0; c < calls; c++ {
		body, _ := json.Marshal(map[string]any{"model": "load-model", "stream": true, "messages": msgs})
		got, err := loadCall(ctx, s, name, body)
		if err != nil {
			return fmt.Errorf("call %d: %w", c, err)
		}
		if want := loadAnswer(len(msgs)); got != want {
			return fmt.Errorf("call %d: answered %d characters %.60q…, want %d %.60q…", c, len(got), got, len(want), want)
		}
		msgs = append(msgs, map[string]string{"role": "assistant", "content": got}, map[string]string{"role": "user", "content": "Next one."})
	}
	// The session records every call, each with its answer whole.
	var lastErr error
	for {
		list, err := s.db.SessionsWhere(ctx, db.SessionFilter{Origin: delegation.OriginProxy})
		if err != nil {
			return err
		}
		for _, x := range list {
			if x.Name != name || x.ModelCalls < calls {
				continue
			}
			tr, err := s.db.Trace(ctx, x.ID)
			if err != nil {
				return err
			}
			if len(tr.ModelCalls) != calls {
				return fmt.Errorf("session %s recorded %d calls, want %d", x.ID, len(tr.ModelCalls), calls)
			}
			answers := map[string]string{}
			for _, m := range tr.Messages {
				answers[m.ID] = m.Content
			}
			lastErr = nil
			for i, mc := range tr.ModelCalls {
				if mc.OutputMessageID == nil {
					// Its start is recorded, its answer not yet: the
					// relay records it as the stream ends.
					lastErr = fmt.Errorf("session %s: call %d has no answer recorded", x.ID, i)
					break
				}
				if got := answers[*mc.OutputMessageID]; got != loadAnswer(2+2*i) {
					return fmt.Errorf("session %s: call %d recorded the answer %d characters %.60q…, not the one relayed", x.ID, i, len(got), got)
				}
			}
			if lastErr == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no session %q recorded its %d calls in time (%v)", name, calls, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// loadCall sends one streamed chat completion and returns the content its
// chunks carry, coming back as often as the studio says it is busy.
func loadCall(ctx context.Context, s *studio, name string, body []byte) (string, error) {
	for {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(proxy.SessionHeader, name)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		if pushedBack(res) {
			res.Body.Close()
			if !backOff(ctx, res.Header) {
				return "", ctx.Err()
			}
			continue
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(res.Body)
			return "", fmt.Errorf("%d %s", res.StatusCode, b)
		}
		var content strings.Builder
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		done := false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				done = true
				break
			}
			var chunk struct {
				Choices []struct {
					Delta struct{ Content string }
				}
			}
			if err := json.Unmarshal([]byte(data), &chunk); err != nil {
				return "", fmt.Errorf("a chunk: %w: %.200s", err, data)
			}
			for _, ch := range chunk.Choices {
				content.WriteString(ch.Delta.Content)
			}
		}
		if !done {
			return "", fmt.Errorf("the stream ended without [DONE] (%v) after %d characters", sc.Err(), content.Len())
		}
		return content.String(), nil
	}
}

// loadExporters runs STUDIO_LOAD_EXPORTERS OpenTelemetry exporters (2
// unless set), each sending three copies of the recorded deepagents run as
// traces of their own, a span a request as a simple span processor does,
// to a studio's /v1/traces (exporter i to studio i mod n), waiting out a
// refusal for now as Retry-After says. Every trace must become a session
// holding its 7 model calls.
func loadExporters(t *testing.T, studios []*studio) {
	raw, err := os.ReadFile("../ingest/testdata/deepagents.otlp.pb")
	if err != nil {
		t.Fatal(err)
	}
	td, err := ingest.DecodeProto(raw)
	if err != nil {
		t.Fatal(err)
	}
	exporters := envInt("STUDIO_LOAD_EXPORTERS", 2)
	const traces, callsPerTrace = 3, 7
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(envInt("STUDIO_LOAD_SECONDS", 4)+120)*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, exporters)
	for e := range exporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := studios[e%len(studios)]
			for k := range traces {
				body, _ := retraced(td, uint64(1_000_000+e*1000+k))
				one, err := ingest.DecodeProto(body)
				if err != nil {
					errs <- err
					return
				}
				for _, span := range oneByOne(one) {
					if err := loadExport(ctx, s, span); err != nil {
						errs <- fmt.Errorf("exporter %d, trace %d: %w", e, k, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every trace is a session with every model call of the run.
	for {
		list, err := studios[0].db.SessionsWhere(ctx, db.SessionFilter{Origin: delegation.OriginOTLP})
		if err != nil {
			t.Fatal(err)
		}
		complete := 0
		for _, x := range list {
			if x.ModelCalls == callsPerTrace {
				complete++
			}
		}
		if len(list) == exporters*traces && complete == len(list) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d sessions of received traces, %d with their %d model calls; want %d, all", len(list), complete, callsPerTrace, exporters*traces)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Logf("%d exporters sent %d traces each, a span a request; every trace is a session with its %d model calls", exporters, traces, callsPerTrace)
}

func loadExport(ctx context.Context, s *studio, body []byte) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/traces", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-protobuf")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case pushedBack(res):
			if !backOff(ctx, res.Header) {
				return ctx.Err()
			}
		case res.StatusCode != http.StatusOK:
			return fmt.Errorf("%d %s", res.StatusCode, b)
		default:
			return nil
		}
	}
}
