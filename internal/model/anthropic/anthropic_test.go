package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// wordCounter counts words: the engine needs a Counter, not a real one.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

// newModel is a Model calling the fake, with the test key, no backoff and
// its warnings in log.
func newModel(t *testing.T, f *fakeServer, log *bytes.Buffer, mod func(*Config)) *Model {
	t.Helper()
	cfg := Config{BaseURL: f.srv.URL, Model: "claude-test", APIKey: testKey, KeyEnv: "TEST_ANTHROPIC_API_KEY",
		Backoff: func(int) time.Duration { return 0 }}
	if log != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

type session struct {
	res    *delegation.Result
	mu     sync.Mutex
	events []delegation.Event
	deltas int
}

func runSession(t *testing.T, ts delegation.TeamSpec, m *Model, prompt string) *session {
	t.Helper()
	team, err := delegation.BuildTeam(ts)
	if err != nil {
		t.Fatalf("BuildTeam: %v", err)
	}
	s := &session{}
	eng := delegation.New(delegation.Config{SessionID: "s1", Team: team, Model: m, Counter: wordCounter{},
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if e.Type == delegation.EventModelDelta {
				s.deltas++
			}
			_ = e.Encode()
			s.events = append(s.events, e)
		})})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.res = eng.Run(ctx, prompt)
	return s
}

func taskCall(id, desc, typ string) tcall {
	b, _ := json.Marshal(map[string]string{"description": desc, "subagent_type": typ})
	return tcall{id: id, name: "task", input: string(b)}
}

// A whole session through the real engine: the lead reads a file that is
// not there (an error tool result), delegates to a child, which answers,
// and finishes with the child's receipt. Streamed and not.
func TestSessionChildDone(t *testing.T) {
	const lead, researcher = "You are the lead.", "You are the researcher."
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
				b := req.Body
				switch b.system() {
				case researcher:
					reply(w, req, turn{text: "Blue."})
				case lead:
					switch b.assistants() {
					case 0:
						reply(w, req, turn{text: "Let me look.", calls: []tcall{{"toolu_r1", "read_file", `{"file_path":"/missing.md"}`}}})
					case 1:
						reply(w, req, turn{calls: []tcall{taskCall("toolu_t1", "Find the colour of the sky.", "researcher")}})
					default:
						res, _ := b.result("toolu_t1")
						reply(w, req, turn{text: "Done: " + res.resultText()})
					}
				default:
					t.Errorf("unexpected system %q", b.system())
					apiError(w, 400, "invalid_request_error", "unexpected request")
				}
			})
			ts := delegation.TeamSpec{Main: delegation.MainSpec{SystemPrompt: lead},
				Subagents: []delegation.Spec{{Name: "researcher", Description: "Researches a question.", SystemPrompt: researcher}}}
			m := newModel(t, f, nil, func(c *Config) { c.NoStream = !stream })
			s := runSession(t, ts, m, "Ask around.")
			if s.res.Status != delegation.StatusDone || s.res.Answer != "Done: Blue." {
				t.Fatalf("result %+v", s.res)
			}
			if stream != (s.deltas > 0) {
				t.Errorf("stream=%v but %d model.delta events", stream, s.deltas)
			}
			reqs := f.requests()
			if len(reqs) != 4 {
				t.Fatalf("%d requests, want 4 (lead ×3, child ×1)", len(reqs))
			}
			for _, r := range reqs {
				if r.Body.Stream != stream || r.Body.MaxTokens != DefaultMaxTokens || r.Body.Model != "claude-test" {
					t.Errorf("request stream %v max_tokens %d model %q", r.Body.Stream, r.Body.MaxTokens, r.Body.Model)
				}
				if got := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"); !strings.Contains(got, testKey) {
					t.Errorf("the key was not sent: Authorization %q, X-Api-Key %q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
				}
				for _, m := range r.Body.Messages {
					if m.Role == "system" {
						t.Errorf("a system message in messages: %s", r.Raw)
					}
				}
			}
			// The lead's last request: system at the top level, turns that
			// alternate, the tool_use blocks answered by tool_result blocks,
			// the failed read with is_error.
			last := reqs[len(reqs)-1].Body
			if last.system() != lead {
				t.Errorf("system %q", last.system())
			}
			var roles []string
			for _, m := range last.Messages {
				roles = append(roles, m.Role)
			}
			if got := strings.Join(roles, ","); got != "user,assistant,user,assistant,user" {
				t.Errorf("roles %s: %s", got, reqs[len(reqs)-1].Raw)
			}
			a1 := last.Messages[1].Content
			if len(a1) != 2 || a1[0].Type != "text" || a1[0].Text != "Let me look." || a1[1].Type != "tool_use" ||
				a1[1].ID != "toolu_r1" || string(a1[1].Input) != `{"file_path":"/missing.md"}` {
				t.Errorf("the assistant's turn %+v", a1)
			}
			if r, ok := last.result("toolu_r1"); !ok || r.IsError == nil || !*r.IsError {
				t.Errorf("the failed read's tool_result %+v, want is_error true", r)
			}
			if r, ok := last.result("toolu_t1"); !ok || (r.IsError != nil && *r.IsError) || r.resultText() != "Blue." {
				t.Errorf("the receipt's tool_result %+v", r)
			}
			names := map[string]wireTool{}
			for _, tl := range last.Tools {
				names[tl.Name] = tl
			}
			task, ok := names["task"]
			var schema struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
			}
			if !ok || json.Unmarshal(task.InputSchema, &schema) != nil || schema.Type != "object" ||
				schema.Properties["subagent_type"] == nil || len(schema.Required) == 0 || task.Description == "" {
				t.Errorf("the task tool %+v", task)
			}
			for _, e := range s.events {
				if strings.Contains(string(e.Data), testKey) {
					t.Fatalf("the key is in a %s event", e.Type)
				}
			}
		})
	}
}

// Usage: Anthropic's input_tokens leave out the cache's reads and writes;
// the engine's prompt counts all three, the reads as cached tokens, the
// writes as cache-creation tokens. Streamed and not; the message's id,
// model and stop_reason are kept as sent.
func TestUsageWithCache(t *testing.T) {
	for _, stream := range []bool{true, false} {
		f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
			reply(w, req, turn{text: "Hi.", usage: [4]int{7, 3, 100, 20}})
		})
		m := newModel(t, f, nil, nil)
		req := &delegation.Request{System: "s", Messages: []*delegation.Message{{Role: delegation.RoleUser, Content: "hello"}}}
		if stream {
			req.Stream = func(string) {}
		}
		resp, err := m.Generate(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := delegation.Usage{PromptTokens: 127, CompletionTokens: 3, CachedTokens: 100, CachedReported: true, CacheCreationTokens: 20}
		if resp.Usage == nil || *resp.Usage != want || resp.Content != "Hi." {
			t.Errorf("stream=%v: %+v usage %+v, want %+v", stream, resp, resp.Usage, want)
		}
		// What the server said of its answer, as it said it.
		if got := resp.Meta; got == nil || *got != (delegation.ResponseMeta{ID: "msg_1", Model: "claude-test", FinishReason: "end_turn"}) {
			t.Errorf("stream=%v: what the server said of its answer: %+v", stream, got)
		}
		if !strings.Contains(f.requests()[0].Raw, `"cache_control":{"type":"ephemeral"}`) {
			t.Errorf("no top-level cache_control: %s", f.requests()[0].Raw)
		}
	}
}

func hello() *delegation.Request {
	return &delegation.Request{Messages: []*delegation.Message{{Role: delegation.RoleUser, Content: "hello"}}}
}

// Errors: a 401 is ErrAuth and not retried; a 400 is ErrRefused and not
// retried; a 429 and a 529 are retried, Retry-After honoured over the
// backoff; the key, echoed by the server, appears in no error and no log.
func TestErrorsClassified(t *testing.T) {
	cases := []struct {
		name     string
		status   int
		typ      string
		class    error
		attempts int
	}{
		{"401", 401, "authentication_error", ErrAuth, 1},
		{"400", 400, "invalid_request_error", ErrRefused, 1},
		{"404", 404, "not_found_error", ErrModelNotFound, 1},
		{"529 always", 529, "overloaded_error", nil, 3},
		{"429 always", 429, "rate_limit_error", nil, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{true, false} {
				var n atomic.Int32
				f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
					n.Add(1)
					apiError(w, tc.status, tc.typ, "bad key "+testKey+" for you")
				})
				var log bytes.Buffer
				m := newModel(t, f, &log, func(c *Config) { c.MaxRetries = 2 })
				req := hello()
				if stream {
					req.Stream = func(string) {}
				}
				_, err := m.Generate(context.Background(), req)
				if err == nil {
					t.Fatal("no error")
				}
				if tc.class != nil && !errors.Is(err, tc.class) {
					t.Errorf("stream=%v: %v is not %v", stream, err, tc.class)
				}
				if int(n.Load()) != tc.attempts {
					t.Errorf("stream=%v: %d attempts, want %d", stream, n.Load(), tc.attempts)
				}
				if strings.Contains(err.Error(), testKey) || strings.Contains(log.String(), testKey) {
					t.Errorf("the key leaked: %v\n%s", err, log.String())
				}
				if tc.attempts > 1 && !strings.Contains(err.Error(), fmt.Sprintf("failed %d attempts in a row", tc.attempts)) {
					t.Errorf("the error after the last retry: %v", err)
				}
			}
		})
	}
}

// A 429 with Retry-After, then a 529, then an answer: both retried, the
// 429's wait the endpoint's (not the backoff's), each retry told to the
// engine.
func TestRetriesHonoured(t *testing.T) {
	for _, stream := range []bool{true, false} {
		var n atomic.Int32
		f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
			switch n.Add(1) {
			case 1:
				w.Header().Set("Retry-After", "0")
				apiError(w, 429, "rate_limit_error", "Number of requests has exceeded your rate limit")
			case 2:
				apiError(w, 529, "overloaded_error", "Overloaded")
			default:
				reply(w, req, turn{text: "Fine."})
			}
		})
		// The backoff would wait an hour before the first retry: only the
		// 429's Retry-After (0) lets the test go on.
		m := newModel(t, f, nil, func(c *Config) {
			c.Backoff = func(n int) time.Duration {
				if n == 1 {
					return time.Hour
				}
				return 0
			}
		})
		var retries []delegation.ModelRetry
		req := hello()
		req.Retry = func(r delegation.ModelRetry) { retries = append(retries, r) }
		if stream {
			req.Stream = func(string) {}
		}
		resp, err := m.Generate(context.Background(), req)
		if err != nil || resp.Content != "Fine." {
			t.Fatalf("stream=%v: %v %+v", stream, err, resp)
		}
		if len(retries) != 2 || retries[0].Cause != "rate_limit" || retries[1].Cause != "server_error" {
			t.Errorf("stream=%v: retries %+v", stream, retries)
		}
		if len(retries) == 2 && (retries[0].WaitMS != 0 || !strings.Contains(retries[1].Error, "529 Overloaded")) {
			t.Errorf("stream=%v: retries %+v: the first must wait the Retry-After's 0", stream, retries)
		}
	}
}

// An overloaded error event in a stream, before any text, is retried.
func TestStreamErrorEventRetried(t *testing.T) {
	var n atomic.Int32
	f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
		if n.Add(1) == 1 {
			s := startSSE(w)
			s.event("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
			return
		}
		reply(w, req, turn{text: "Back."})
	})
	m := newModel(t, f, nil, nil)
	req := hello()
	var got strings.Builder
	req.Stream = func(d string) { got.WriteString(d) }
	resp, err := m.Generate(context.Background(), req)
	if err != nil || resp.Content != "Back." || got.String() != "Back." || n.Load() != 2 {
		t.Fatalf("%v %+v streamed %q after %d attempts", err, resp, got.String(), n.Load())
	}
}

// stop_reason max_tokens is an error, not an answer.
func TestMaxTokensTruncated(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, req *wireReq) {
		reply(w, req, turn{text: "The answer is", stop: "max_tokens"})
	})
	m := newModel(t, f, nil, func(c *Config) { c.Settings.MaxTokens = 5; c.NoStream = true })
	_, err := m.Generate(context.Background(), hello())
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "max_tokens 5") {
		t.Fatalf("%v", err)
	}
	if b := f.requests()[0].Body; b.MaxTokens != 5 {
		t.Errorf("max_tokens %d", b.MaxTokens)
	}
}

// Settings: temperature sent as given; tool_choice required is "any";
// parallel_tool_calls false is disable_parallel_tool_use.
func TestSettingsSent(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, req *wireReq) { reply(w, req, turn{text: "ok"}) })
	zero, no := 0.0, false
	m := newModel(t, f, nil, func(c *Config) {
		c.Settings = Settings{Temperature: &zero, ToolChoice: ToolChoiceRequired, ParallelToolCalls: &no}
	})
	req := hello()
	req.Tools = []delegation.ToolDef{{Name: "ls", Description: "List.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`)}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	b := f.requests()[0].Body
	if b.Temperature == nil || *b.Temperature != 0 {
		t.Errorf("temperature %v", b.Temperature)
	}
	if string(b.ToolChoice) != `{"disable_parallel_tool_use":true,"type":"any"}` {
		t.Errorf("tool_choice %s", b.ToolChoice)
	}
	if s := string(b.Tools[0].InputSchema); !strings.Contains(s, `"additionalProperties":false`) || !strings.Contains(s, `"path"`) {
		t.Errorf("input_schema %s", s)
	}
}

// The key is kept out of every printed form of a Config and a Model, and
// Anthropic's own API without a key is refused before any call; a Model
// without a key sends no credentials.
func TestKeyRules(t *testing.T) {
	cfg := Config{BaseURL: "https://api.anthropic.com", Model: "claude-test", APIKey: testKey}
	for _, s := range []string{cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		if strings.Contains(s, testKey) {
			t.Errorf("the key is printed: %s", s)
		}
	}
	var log bytes.Buffer
	slog.New(slog.NewJSONHandler(&log, nil)).Info("cfg", "config", cfg)
	if strings.Contains(log.String(), testKey) {
		t.Errorf("the key is logged: %s", log.String())
	}
	if _, err := New(Config{BaseURL: "https://api.anthropic.com", Model: "claude-test"}); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("no key for Anthropic's API: %v", err)
	}
	f := newFake(t, func(w http.ResponseWriter, req *wireReq) { reply(w, req, turn{text: "ok"}) })
	m := newModel(t, f, nil, func(c *Config) { c.APIKey = "" })
	if fmt.Sprintf("%+v", m) != "" && strings.Contains(fmt.Sprintf("%+v", *m), testKey) {
		t.Error("the Model prints a key")
	}
	if _, err := m.Generate(context.Background(), hello()); err != nil {
		t.Fatal(err)
	}
	if h := f.requests()[0].Header; h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Errorf("credentials sent without a key: %v", h)
	}
}
