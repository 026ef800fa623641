package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// raw decodes a recorded request for the fields wireBody does not name.
func (r *wireReq) raw(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func streamReq(text string) *delegation.Request {
	req := userReq(text)
	req.Stream = func(string) {}
	return req
}

// TestStreamErrorEvents: an error event inside a stream that began with
// 200 is classified by its code, as an HTTP error would be by its status.
// Only what a retry can fix is retried.
func TestStreamErrorEvents(t *testing.T) {
	event := func(body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			s := startSSE(w)
			fmt.Fprintf(w, "data: %s\n\n", body)
			s.flush()
		}
	}
	cases := []struct {
		name   string
		send   func(w http.ResponseWriter)
		is     error
		want   string
		retry  bool
		before func(s *sseWriter) // text sent before the error
	}{
		{name: "invalid_api_key", send: event(`{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`),
			is: ErrAuth, want: "rejected the API key in OPENAI_API_KEY"},
		{name: "model_not_found", send: event(`{"error":{"message":"The model does not exist","type":"invalid_request_error","code":"model_not_found"}}`),
			is: ErrModelNotFound, want: `model "test-model" not found`},
		{name: "insufficient_quota", send: event(`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`),
			is: ErrQuota, want: "out of quota"},
		{name: "context_length_exceeded", send: event(`{"error":{"message":"maximum context length is 8192 tokens","code":"context_length_exceeded"}}`),
			is: ErrContextLength},
		{name: "a numeric code, llama.cpp", send: event(`{"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}}`),
			is: ErrAuth},
		{name: "a string error", send: event(`{"error":"Invalid API key"}`), is: ErrAuth},
		{name: "a string error of no known kind: retried", send: event(`{"error":"upstream connection lost"}`), retry: true},
		{name: "an invalid request", send: event(`{"error":{"message":"'tools' is not allowed","type":"invalid_request_error"}}`),
			is: ErrRefused, want: "refused the request (in the stream): 'tools' is not allowed"},
		{name: "event: error", send: func(w http.ResponseWriter) {
			s := startSSE(w)
			fmt.Fprint(w, "event: error\ndata: {\"type\":\"authentication_error\",\"message\":\"bad key\"}\n\n")
			s.flush()
		}, is: ErrAuth},
		{name: "an unknown model, mock-openai-api", send: event(`{"error":{"message":"Model 'test-model' does not exist","type":"invalid_request_error","code":"invalid_model"}}`),
			is: ErrModelNotFound, want: `model "test-model" not found`},
		{name: "a server error: retried", send: event(`{"error":{"message":"The server had an error","type":"server_error"}}`), retry: true},
		{name: "rate limited: retried", send: event(`{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`), retry: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				if req.N > 0 && tc.retry {
					reply(w, req, turn{content: "recovered"})
					return
				}
				tc.send(w)
			})
			resp, err := newModel(t, f.url(), nil).Generate(context.Background(), streamReq("x"))
			if tc.retry {
				if err != nil || resp.Content != "recovered" || f.count() != 2 {
					t.Fatalf("resp %+v err %v after %d requests: this error is worth a retry", resp, err, f.count())
				}
				return
			}
			if err == nil || f.count() != 1 {
				t.Fatalf("err %v after %d requests: a retry cannot fix this one", err, f.count())
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v) is false for %q", tc.is, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("message %q lacks %q", err, tc.want)
			}
		})
	}
}

// TestStreamOptionsFallback: a server that rejects stream_options gets the
// call again at once without it, and every later call leaves it out.
func TestStreamOptionsFallback(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		if req.Body.StreamOptions != nil {
			writeJSON(w, 400, map[string]any{"error": "Unrecognized request argument supplied: stream_options"})
			return
		}
		reply(w, req, turn{content: "ok"})
	})
	m := newModel(t, f.url(), func(c *Config) { c.MaxRetries = -1 })
	for i := range 2 {
		resp, err := m.Generate(context.Background(), streamReq("x"))
		if err != nil || resp.Content != "ok" {
			t.Fatalf("call %d: resp %+v err %v", i, resp, err)
		}
	}
	if f.count() != 3 {
		t.Fatalf("%d requests; want 3 (refused, then two without stream_options)", f.count())
	}
	if reqs := f.requests(); reqs[1].Body.StreamOptions != nil || reqs[2].Body.StreamOptions != nil || !reqs[2].Body.Stream {
		t.Errorf("stream_options sent after the endpoint refused it: %s", reqs[2].Raw)
	}
}

// TestMaxCompletionTokensFallback: OpenAI's reasoning models refuse
// max_tokens and name max_completion_tokens.
func TestMaxCompletionTokensFallback(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		if _, ok := req.raw(t)["max_tokens"]; ok {
			apiError(w, 400, "unsupported_parameter", "invalid_request_error",
				"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
			return
		}
		reply(w, req, turn{content: "ok"})
	})
	m := newModel(t, f.url(), func(c *Config) { c.Settings.MaxTokens = 300 })
	if _, err := m.Generate(context.Background(), userReq("x")); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[1].raw(t)["max_completion_tokens"] != 300.0 {
		t.Fatalf("%d requests; the last: %s", len(reqs), reqs[len(reqs)-1].Raw)
	}
}

// TestNoStream: Settings.Stream false and Config.NoStream both wait for the
// whole answer, though the engine asks for text as it arrives.
func TestNoStream(t *testing.T) {
	off := false
	for name, mod := range map[string]func(*Config){
		"Config.NoStream":         func(c *Config) { c.NoStream = true },
		"Settings.Stream = false": func(c *Config) { c.Settings.Stream = &off },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				reply(w, req, turn{content: "whole", calls: []tcall{{"c1", "task", `{"description":"d","subagent_type":"x"}`}}})
			})
			var deltas collector
			req := userReq("x")
			req.Stream = deltas.add
			resp, err := newModel(t, f.url(), mod).Generate(context.Background(), req)
			if err != nil || resp.Content != "whole" || len(resp.ToolCalls) != 1 {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if b := f.requests()[0].Body; b.Stream || b.StreamOptions != nil {
				t.Errorf("streamed: %s", f.requests()[0].Raw)
			}
			if len(deltas.got()) != 0 {
				t.Errorf("deltas %q without streaming", deltas.got())
			}
		})
	}
}

// TestFinishReason: an answer cut at the length limit or withheld by a
// content filter is an error, never a complete answer, and is not retried.
func TestFinishReason(t *testing.T) {
	cases := []struct {
		reason string
		is     error
		want   []string
	}{
		{"length", ErrTruncated, []string{`the answer was cut off at the length limit (finish_reason "length": max_tokens 5, after 5 tokens); it ended "The answer is trunc": raise max_tokens for this agent`}},
		{"content_filter", ErrContentFilter, []string{`withheld the answer (finish_reason "content_filter")`, "rephrase the prompt"}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
				f := newFake(t, func(w http.ResponseWriter, r *http.Request, wr *wireReq) {
					if stream {
						s := startSSE(w)
						s.send(chunkText("The answer is trunc"))
						s.send(chunk(map[string]any{}, tc.reason))
						s.send(chunkUsage(10, 5))
						s.done()
						return
					}
					writeJSON(w, 200, map[string]any{"id": "x", "object": "chat.completion", "model": "m",
						"choices": []any{map[string]any{"index": 0, "finish_reason": tc.reason,
							"message": map[string]any{"role": "assistant", "content": "The answer is trunc"}}},
						"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5}})
				})
				_, err := newModel(t, f.url(), func(c *Config) { c.Settings.MaxTokens = 5 }).Generate(context.Background(), req)
				if !errors.Is(err, tc.is) || f.count() != 1 {
					t.Fatalf("err %v after %d requests", err, f.count())
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message %q lacks %q", err, w)
					}
				}
			})
		})
	}
}

// TestAnswerShapes: what servers other than OpenAI send back.
func TestAnswerShapes(t *testing.T) {
	t.Run("tool-call arguments as a JSON object", func(t *testing.T) {
		modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, wr *wireReq) {
				call := map[string]any{"index": 0, "id": "c1", "type": "function",
					"function": map[string]any{"name": "read_file", "arguments": map[string]any{"file_path": "/a.md"}}}
				if stream {
					s := startSSE(w)
					s.send(chunk(map[string]any{"role": "assistant", "tool_calls": []any{call}}, nil))
					s.send(chunk(map[string]any{}, "tool_calls"))
					s.done()
					return
				}
				writeJSON(w, 200, map[string]any{"id": "x", "object": "chat.completion", "model": "m",
					"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls",
						"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}}}})
			})
			resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
			if err != nil || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Args) != `{"file_path":"/a.md"}` {
				t.Fatalf("resp %+v err %v", resp, err)
			}
		})
	})
	t.Run("reasoning_content, and reasoning under its other name", func(t *testing.T) {
		for _, key := range []string{"reasoning_content", "reasoning"} {
			t.Run(key, func(t *testing.T) {
				modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
					f := newFake(t, func(w http.ResponseWriter, r *http.Request, wr *wireReq) {
						if stream {
							s := startSSE(w)
							s.send(chunk(map[string]any{"role": "assistant", key: "Let me think. "}, nil))
							s.send(chunk(map[string]any{key: "Six times seven."}, nil))
							s.send(chunkText("42"))
							s.send(chunk(map[string]any{}, "stop"))
							s.done()
							return
						}
						writeJSON(w, 200, map[string]any{"id": "x", "object": "chat.completion", "model": "m",
							"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
								"message": map[string]any{"role": "assistant", "content": "42", key: "Let me think. Six times seven."}}}})
					})
					var deltas collector
					if stream {
						req.Stream = deltas.add
					}
					resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
					if err != nil || resp.Content != "42" || resp.Reasoning != "Let me think. Six times seven." {
						t.Fatalf("resp %+v err %v", resp, err)
					}
					if got := strings.Join(deltas.got(), ""); stream && got != "42" {
						t.Errorf("streamed %q: the reasoning is not the answer's text", got)
					}
				})
			})
		}
	})
	t.Run("cached and reasoning token counts", func(t *testing.T) {
		usages := map[string]map[string]any{
			"OpenAI": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
				"prompt_tokens_details": map[string]any{"cached_tokens": 1024}, "completion_tokens_details": map[string]any{"reasoning_tokens": 256}},
			"DeepSeek": {"prompt_tokens": 1200, "completion_tokens": 300, "prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 176,
				"completion_tokens_details": map[string]any{"reasoning_tokens": 256}},
		}
		for name, u := range usages {
			t.Run(name, func(t *testing.T) {
				modes(t, func(t *testing.T, stream bool, req *delegation.Request) {
					f := newFake(t, func(w http.ResponseWriter, r *http.Request, wr *wireReq) {
						if stream {
							s := startSSE(w)
							s.send(chunkText("ok"))
							s.send(chunk(map[string]any{}, "stop"))
							s.send(map[string]any{"id": "x", "object": "chat.completion.chunk", "choices": []any{}, "usage": u})
							s.done()
							return
						}
						writeJSON(w, 200, map[string]any{"id": "x", "object": "chat.completion", "model": "m", "usage": u,
							"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "ok"}}}})
					})
					resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
					want := delegation.Usage{PromptTokens: 1200, CompletionTokens: 300, CachedTokens: 1024, CachedReported: true, ReasoningTokens: 256}
					if err != nil || resp.Usage == nil || *resp.Usage != want {
						t.Fatalf("usage %+v err %v; want %+v", resp.Usage, err, want)
					}
				})
			})
		}
	})
}

// TestRequestSettings: an agent's request parameters reach the wire as
// given, a temperature of 0 included; those about tools only with tools.
func TestRequestSettings(t *testing.T) {
	zero, seven, no := 0.0, 7, false
	tools := []delegation.ToolDef{{Name: "read_file", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "task", Parameters: json.RawMessage(`{"type":"object"}`)}}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) { reply(w, req, turn{content: "ok"}) })
	m := newModel(t, f.url(), func(c *Config) {
		c.Settings = Settings{MaxTokens: 256, Temperature: &zero, Seed: &seven, ToolChoice: "task", ParallelToolCalls: &no}
	})
	req := userReq("x")
	req.Tools = tools
	req.Messages = append(req.Messages,
		&delegation.Message{Role: delegation.RoleAssistant, ToolCalls: []delegation.ToolCall{{ID: "c1", Name: "read_file", Args: json.RawMessage(`{}`)}}},
		&delegation.Message{Role: delegation.RoleTool, ToolCallID: "c1", Content: "text"})
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := f.requests()[0].raw(t)
	for key, want := range map[string]any{"max_tokens": 256.0, "temperature": 0.0, "seed": 7.0, "parallel_tool_calls": false,
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "task"}}} {
		if fmt.Sprint(got[key]) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	// Strict servers want "content": null on a message that only calls tools.
	msgs := got["messages"].([]any)
	if a := msgs[1].(map[string]any); a["role"] != "assistant" {
		t.Fatalf("messages %v", msgs)
	} else if c, ok := a["content"]; !ok || c != nil {
		t.Errorf("assistant message with tool calls: content %v (present %v), want null", c, ok)
	}

	t.Run("a summary call has no tools, so no tool settings", func(t *testing.T) {
		req := userReq("x")
		req.Purpose, req.Tools = delegation.PurposeSummary, tools
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := f.requests()[len(f.requests())-1].raw(t)
		if _, ok := got["tool_choice"]; ok {
			t.Errorf("tool_choice without tools: %v", got)
		}
		if _, ok := got["parallel_tool_calls"]; ok {
			t.Errorf("parallel_tool_calls without tools: %v", got)
		}
		if got["temperature"] != 0.0 || got["max_tokens"] != 256.0 {
			t.Errorf("temperature and max_tokens apply to every call: %v", got)
		}
	})
	t.Run("tool_choice required", func(t *testing.T) {
		m := newModel(t, f.url(), func(c *Config) { c.Settings.ToolChoice = ToolChoiceRequired })
		req := userReq("x")
		req.Tools = tools
		if _, err := m.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		got := f.requests()[len(f.requests())-1].raw(t)
		if got["tool_choice"] != "required" {
			t.Errorf("tool_choice %v", got["tool_choice"])
		}
		if _, ok := got["temperature"]; ok {
			t.Errorf("an unset temperature was sent: %v", got["temperature"])
		}
	})
	t.Run("settings no endpoint takes", func(t *testing.T) {
		hot := 3.0
		if _, err := New(Config{BaseURL: f.url(), Model: "m", Settings: Settings{Temperature: &hot}}); err == nil || !strings.Contains(err.Error(), "temperature must be between 0 and 2") {
			t.Errorf("err %v", err)
		}
	})
}

// TestRetryReported: each retried attempt is reported to Request.Retry with
// its cause, so the CLI and the live page can say why a call is slow.
func TestRetryReported(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		switch req.N {
		case 0:
			apiError(w, 429, "rate_limit_exceeded", "requests", "Slow down.")
		case 1:
			apiError(w, 503, nil, "server_error", "Overloaded.")
		default:
			reply(w, req, turn{content: "ok"})
		}
	})
	var mu sync.Mutex
	var got []delegation.ModelRetry
	req := userReq("x")
	req.Retry = func(r delegation.ModelRetry) { mu.Lock(); got = append(got, r); mu.Unlock() }
	if _, err := newModel(t, f.url(), nil).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Cause != "rate_limit" || got[0].Attempt != 1 || got[0].Attempts != 3 ||
		got[1].Cause != "server_error" || !strings.Contains(got[1].Error, "503") {
		t.Fatalf("retries reported: %+v", got)
	}
}

// TestServerErrorAdvice: a server that fails every streamed call gets
// advice to turn streaming off (mock-llm answers 500 to a streamed request
// with tools).
func TestServerErrorAdvice(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		if req.Body.Stream {
			// mock-llm's shape: its streaming code fails on a null content.
			writeJSON(w, 500, map[string]any{"error": "TypeError", "message": "Cannot read properties of null", "status": 500})
			return
		}
		reply(w, req, turn{content: "ok"})
	})
	_, err := newModel(t, f.url(), nil).Generate(context.Background(), streamReq("x"))
	if err == nil || !strings.Contains(err.Error(), `turn streaming off with --no-stream or "stream": false`) {
		t.Fatalf("err %v", err)
	}
}

// TestMissingKeyFailsFast: OpenAI's endpoint without a key is refused before
// any call.
func TestMissingKeyFailsFast(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	_, err := New(Config{Model: "gpt-4.1-mini"})
	if err == nil || !strings.Contains(err.Error(), "no API key for https://api.openai.com/v1: set OPENAI_API_KEY") {
		t.Fatalf("err %v", err)
	}
	_, err = New(Config{Model: "gpt-4.1-mini", KeyEnv: "TEAM_KEY"})
	if err == nil || !strings.Contains(err.Error(), "set TEAM_KEY") {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Config{BaseURL: "http://127.0.0.1:8080/v1", Model: "local"}); err != nil {
		t.Fatalf("a local server needs no key: %v", err)
	}
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
	m, err := New(Config{Model: "local"})
	if err != nil || m.baseURL != "http://127.0.0.1:9/v1" {
		t.Fatalf("OPENAI_BASE_URL is the default endpoint: %v %v", m, err)
	}
}

// TestStreamIgnored: a server that ignores "stream" and sends the whole
// answer is read as a stream of one chunk, tool calls included.
func TestStreamIgnored(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
		req.Body.Stream = false
		reply(w, req, turn{content: "whole", calls: []tcall{{"c1", "ls", `{"path":"/"}`}}, usage: [2]int{7, 3}})
	})
	var deltas collector
	req := userReq("x")
	req.Stream = deltas.add
	resp, err := newModel(t, f.url(), nil).Generate(context.Background(), req)
	if err != nil || resp.Content != "whole" || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Args) != `{"path":"/"}` ||
		resp.Usage == nil || resp.Usage.PromptTokens != 7 || f.count() != 1 {
		t.Fatalf("resp %+v err %v after %d requests", resp, err, f.count())
	}
	if got := strings.Join(deltas.got(), ""); got != "whole" {
		t.Errorf("deltas %q", got)
	}
}

// TestStreamErrorEventWording (issue 28): an error event inside a stream
// that is retried until the retries run out says that the endpoint sent an
// error event in the stream, its code and message, and the advice of its
// class — not "the last one got in the stream: …".
func TestStreamErrorEventWording(t *testing.T) {
	for _, tc := range []struct {
		name, event string
		want        []string
	}{
		{name: "rate limited", event: `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`,
			want: []string{`the last one got an error event in the stream (rate_limit_exceeded): "Rate limit reached"`, "limiting the rate of calls", "agent.max_concurrency"}},
		{name: "a server error", event: `{"error":{"message":"The server had an error","type":"server_error"}}`,
			want: []string{`the last one got an error event in the stream (server_error): "The server had an error"`, "turn streaming off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) {
				s := startSSE(w)
				fmt.Fprintf(w, "data: %s\n\n", tc.event)
				s.flush()
			})
			_, err := newModel(t, f.url(), nil).Generate(context.Background(), streamReq("x"))
			if err == nil || f.count() != 3 {
				t.Fatalf("err %v after %d requests; want 3 attempts", err, f.count())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "got in the stream") {
				t.Errorf("message %q is garbled", err)
			}
		})
	}
}

// TestNoKeyWording (issue 28): an endpoint that wants a key, or says the
// account is out of quota, when none was sent is told so: the message does
// not blame a key in OPENAI_API_KEY that was never sent, and it says why no
// key went (a variable that is empty, OPENAI_API_KEY withheld from a URL
// that is not OpenAI's, or none named) and how to send one.
func TestNoKeyWording(t *testing.T) {
	quota := func(w http.ResponseWriter) {
		apiError(w, 429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota.")
	}
	unauthorized := func(w http.ResponseWriter) { apiError(w, 401, "invalid_api_key", "invalid_request_error", "No key.") }
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter)
		cfg    func(c *Config)
		is     error
		want   []string
	}{
		{name: "quota, no key named", handle: quota, cfg: func(c *Config) { c.APIKey = "" }, is: ErrQuota,
			want: []string{"says the account is out of quota or credit (429 Too Many Requests), but no API key was sent", "--endpoint NAME=THEURL,KEY_ENV"}},
		{name: "quota, OPENAI_API_KEY withheld", handle: quota, cfg: func(c *Config) { c.APIKey, c.WithheldKeyEnv = "", "OPENAI_API_KEY" }, is: ErrQuota,
			want: []string{"no API key was sent: OPENAI_API_KEY is set but was withheld", "OPENAI_BASE_URL=THEURL"}},
		{name: "quota, the named variable empty", handle: quota, cfg: func(c *Config) { c.APIKey, c.KeyEnv = "", "TEAM_API_KEY" }, is: ErrQuota,
			want: []string{"no API key was sent: TEAM_API_KEY, which should hold it, is empty or not set"}},
		{name: "quota, a key sent", handle: quota, is: ErrQuota,
			want: []string{"the account behind the key in OPENAI_API_KEY is out of quota"}},
		{name: "401, OPENAI_API_KEY withheld", handle: unauthorized, cfg: func(c *Config) { c.APIKey, c.WithheldKeyEnv = "", "OPENAI_API_KEY" }, is: ErrAuth,
			want: []string{"wants an API key (401) and none was sent: OPENAI_API_KEY is set but was withheld, because it goes only to OpenAI's API and to OPENAI_BASE_URL",
				"set OPENAI_BASE_URL=THEURL", "--endpoint NAME=THEURL,OPENAI_API_KEY", "model.api_key_env"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request, req *wireReq) { tc.handle(w) })
			_, err := newModel(t, f.url(), tc.cfg).Generate(context.Background(), userReq("x"))
			if !errors.Is(err, tc.is) {
				t.Fatalf("err %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "THEURL", f.url()); !strings.Contains(err.Error(), w) {
					t.Errorf("message %q lacks %q", err, w)
				}
			}
			if tc.cfg != nil && strings.Contains(err.Error(), "the key in") {
				t.Errorf("message %q blames a key that was not sent", err)
			}
		})
	}
}
