package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/proxy"
)

// The recording endpoint in the real server: SQLite, the middleware (token,
// Host, body limits), the session page.

func proxyStudio(t *testing.T, up proxy.Upstream, token string) *studio {
	t.Helper()
	return receivingStudio(t, Config{Token: token, Upstream: up, ProxyDoneAfter: 50 * time.Millisecond})
}

func openAIClient(base, key string, header http.Header) *goopenai.Client {
	cfg := goopenai.DefaultConfig(key)
	cfg.BaseURL = base + "/v1"
	if header != nil {
		cfg.HTTPClient = &http.Client{Transport: addHeaders{header}}
	}
	return goopenai.NewClientWithConfig(cfg)
}

type addHeaders struct{ h http.Header }

func (a addHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range a.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// authSeen records the Authorization each upstream request came with.
type authSeen struct {
	mu   sync.Mutex
	auth []string
}

func (a *authSeen) upstream(t *testing.T) *httptest.Server {
	srv := openaitest.NewServer(t, func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "Hello back.", Usage: map[string]any{"prompt_tokens": 3, "completion_tokens": 2}}
	})
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		a.mu.Unlock()
		inner.ServeHTTP(w, r)
	})
	return srv
}

func (a *authSeen) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.auth) == 0 {
		return ""
	}
	return a.auth[len(a.auth)-1]
}

func TestRecordedSessionIsStoredAndShown(t *testing.T) {
	var seen authSeen
	up, err := proxy.NewHTTPUpstream(seen.upstream(t).URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, "")
	c := openAIClient(s.ts.URL, "sk-user", nil)
	for _, stream := range []bool{false, true} {
		req := goopenai.ChatCompletionRequest{Model: "gpt-4.1-mini", Stream: stream, Messages: []goopenai.ChatCompletionMessage{
			{Role: "user", Content: "Say hello."}}}
		if stream {
			st, err := c.CreateChatCompletionStream(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for {
				if _, err := st.Recv(); err != nil {
					break
				}
			}
			st.Close()
		} else if _, err := c.CreateChatCompletion(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions: %v %v (each opens with its prompt: two)", list, err)
	}
	for _, sess := range list {
		s.waitDone(sess.ID)
		tr, err := s.db.Trace(context.Background(), sess.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Session.Status != delegation.StatusDone || len(tr.ModelCalls) != 1 || tr.ModelCalls[0].Usage == nil {
			t.Errorf("session %s: %s, %+v", sess.ID, tr.Session.Status, tr.ModelCalls)
		} else if tr.ModelCalls[0].Cost == nil {
			t.Errorf("session %s: the call to gpt-4.1-mini is not priced", sess.ID)
		}
		_, doc := s.get("/sessions/" + sess.ID)
		if got := doc.Find(`[data-testid="origin"]`).Text(); !strings.Contains(got, "the recording endpoint: Go-http-client") ||
			!strings.Contains(got, "answered by "+up.String()) {
			t.Errorf("origin line: %q", got)
		}
	}
	if seen.last() != "Bearer sk-user" {
		t.Errorf("the caller's key went on as %q", seen.last())
	}
	// Exports as for any session: the trace imports back, the OTLP export
	// holds the call.
	id := list[0].ID
	res, trace := s.api("GET", "/api/sessions/"+id+"/trace", "", nil)
	if res.StatusCode != 200 {
		t.Fatalf("trace export: %d %s", res.StatusCode, trace)
	}
	if res, body := s.api("POST", "/api/traces", "application/json", trace); res.StatusCode != http.StatusCreated {
		t.Errorf("the exported trace does not import: %d %s", res.StatusCode, body)
	}
	if res, body := s.api("GET", "/api/sessions/"+id+"/otlp", "", nil); res.StatusCode != 200 || !strings.Contains(string(body), "Say hello.") {
		t.Errorf("OTLP export: %d %.300s", res.StatusCode, body)
	}
}

func TestRecordingEndpointBehindAToken(t *testing.T) {
	const token = "tok-0123456789-abcdefghij-XYZ"
	t.Setenv("UPSTREAM_API_KEY", "sk-env-key-of-the-operator")
	var seen authSeen
	up, err := proxy.NewHTTPUpstream(seen.upstream(t).URL, "sk-env-key-of-the-operator")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, token)
	ask := func(c *goopenai.Client) error {
		_, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "m",
			Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Hi."}}})
		return err
	}
	t.Run("the studio's token as the key: the environment's key goes on", func(t *testing.T) {
		if err := ask(openAIClient(s.ts.URL, token, nil)); err != nil {
			t.Fatal(err)
		}
		if got := seen.last(); got != "Bearer sk-env-key-of-the-operator" {
			t.Errorf("upstream got %q: the studio's token must never leave it", got)
		}
	})
	t.Run("the studio's token as the key, the scheme in any case: it never goes on", func(t *testing.T) {
		for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
			for _, beside := range []http.Header{nil, {"X-Studio-Token": {token}}} {
				// go-openai writes "Bearer "; the header given replaces it.
				h := http.Header{"Authorization": {scheme + " " + token}}
				for k, v := range beside {
					h[k] = v
				}
				if err := ask(openAIClient(s.ts.URL, "unused", h)); err != nil {
					t.Fatalf("%s %v: %v", scheme, beside, err)
				}
				if got := seen.last(); got != "Bearer sk-env-key-of-the-operator" {
					t.Errorf("Authorization: %s <token>, X-Studio-Token %v: upstream got %q: the studio's token must never leave it",
						scheme, beside, got)
				}
			}
		}
	})
	t.Run("the token beside the caller's own key", func(t *testing.T) {
		if err := ask(openAIClient(s.ts.URL, "sk-callers", http.Header{"X-Studio-Token": {token}})); err != nil {
			t.Fatal(err)
		}
		if got := seen.last(); got != "Bearer sk-callers" {
			t.Errorf("upstream got %q", got)
		}
	})
	t.Run("without it: 401 in OpenAI's shape", func(t *testing.T) {
		for _, c := range []*goopenai.Client{openAIClient(s.ts.URL, "sk-callers", nil),
			openAIClient(s.ts.URL, "sk-callers", http.Header{"X-Studio-Token": {"wrong-token-wrong-token"}})} {
			err := ask(c)
			var apiErr *goopenai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 || apiErr.Type != "authentication_error" ||
				!strings.Contains(apiErr.Message, "access token") {
				t.Errorf("got %v", err)
			}
		}
	})
}

func TestRecordingEndpointLimits(t *testing.T) {
	up, err := proxy.NewHTTPUpstream(openaitest.NewServer(t, func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "ok"}
	}).URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, "")
	res, body := s.raw("POST", "/v1/chat/completions", map[string]string{"Content-Type": "application/json"},
		`{"model": "m", "messages": [{"role": "user", "content": "`+strings.Repeat("x", MaxChatBody)+`"}]}`)
	var e struct {
		Error struct{ Message, Type string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || res.StatusCode != 413 || e.Error.Type != "invalid_request_error" {
		t.Errorf("a body over the limit: %d %.200s", res.StatusCode, body)
	}
	// Anthropic's Messages API bounds a request by its size alone (32 MB,
	// 413 request_too_large), no string in it: so does /v1/messages.
	res, body = s.raw("POST", "/v1/messages", map[string]string{"Content-Type": "application/json"},
		`{"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "`+strings.Repeat("x", MaxChatBody)+`"}]}`)
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(body), &ae); err != nil || res.StatusCode != 413 || ae.Type != "error" || ae.Error.Type != "request_too_large" {
		t.Errorf("a Messages body over the limit: %d %.200s", res.StatusCode, body)
	}
	res, body = s.raw("POST", "/v1/chat/completions", map[string]string{"Host": "evil.example"}, `{}`)
	if err := json.Unmarshal([]byte(body), &e); err != nil || res.StatusCode != 421 || e.Error.Message == "" {
		t.Errorf("another Host: %d %s", res.StatusCode, body)
	}
	res, body = s.raw("POST", "/v1/responses", map[string]string{"Content-Type": "application/json"}, `{}`)
	if err := json.Unmarshal([]byte(body), &e); err != nil || res.StatusCode != 404 || !strings.Contains(e.Error.Message, "is not served") {
		t.Errorf("an OpenAI path not served: %d %s", res.StatusCode, body)
	}
	// GET /v1/models goes to the upstream's, whose answer (here: it has
	// none) is relayed with its status.
	res, body = s.raw("GET", "/v1/models", nil, "")
	if res.StatusCode != 404 || !strings.Contains(body, "no such path") {
		t.Errorf("models: %d %s", res.StatusCode, body)
	}
}

func TestShutdownEndsACallInFlight(t *testing.T) {
	hang := make(chan struct{})
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer upSrv.Close()
	defer close(hang)
	up, err := proxy.NewHTTPUpstream(upSrv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, "")
	errc := make(chan error, 1)
	go func() {
		_, err := openAIClient(s.ts.URL, "k", nil).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{
			Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "Wait forever."}}})
		errc <- err
	}()
	// The call is in flight once its session shows it running.
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, _ := s.db.Sessions(context.Background(), 0)
		if len(list) == 1 {
			if tr, err := s.db.Trace(context.Background(), list[0].ID); err == nil && len(tr.ModelCalls) == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { s.srv.Shutdown(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown waited on a hung upstream")
	}
	if err := <-errc; err == nil {
		t.Error("the client was answered as if nothing happened")
	}
	tr, err := s.db.Trace(context.Background(), s.onlySession().ID)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Session.Status != delegation.StatusInterrupted || tr.ModelCalls[0].Error != "the studio stopped" {
		t.Errorf("%s, call error %q", tr.Session.Status, tr.ModelCalls[0].Error)
	}
}

// TestRecordedResponseExportedAsSent: what the upstream said of its answers
// (the completion's id, its model, its finish_reason) is recorded, stored
// and exported as OTLP exactly as sent, read back here with the
// collector's own OTLP reader: finish_reasons says "tool_calls", not the
// output message's "tool_call". Imported back through the receiver and
// exported again, the session says the same.
func TestRecordedResponseExportedAsSent(t *testing.T) {
	srv := openaitest.NewServer(t, func(r openaitest.Request) openaitest.Reply {
		if r.Last().Role == "tool" {
			return openaitest.Reply{Content: "Two files.", ID: "chatcmpl-B7xq2", Model: "gpt-x-2026"}
		}
		return openaitest.Reply{Calls: []openaitest.Call{{ID: "call_1", Name: "ls", Args: `{"path":"/"}`}},
			ID: "chatcmpl-A9fz1", Model: "gpt-x-2026", Usage: map[string]any{"prompt_tokens": 30, "completion_tokens": 9}}
	})
	up, err := proxy.NewHTTPUpstream(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, "")
	c := openAIClient(s.ts.URL, "sk-user", nil)
	ls := goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "ls",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	msgs := []goopenai.ChatCompletionMessage{{Role: "user", Content: "List the files."}}
	first, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-x", Tools: []goopenai.Tool{ls}, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, first.Choices[0].Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_1", Content: "a.md b.md"})
	st, err := c.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-x", Stream: true,
		Tools: []goopenai.Tool{ls}, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := st.Recv(); err != nil {
			break
		}
	}
	st.Close()
	orig := s.onlySession()
	s.waitDone(orig.ID)
	want := []string{"chatcmpl-A9fz1 gpt-x-2026 [tool_calls]", "chatcmpl-B7xq2 gpt-x-2026 [stop]"}
	doc := s.chatResponses(orig.ID, want)

	// The export, received back, is a session of its own that exports the same.
	if res, body := s.otlp("application/json", "", doc, ""); res.StatusCode != 200 {
		t.Fatalf("the export does not import back: %d %s", res.StatusCode, body)
	}
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions: %v %v", list, err)
	}
	for _, sess := range list {
		if sess.ID != orig.ID {
			s.waitDone(sess.ID)
			s.chatResponses(sess.ID, want)
		}
	}
}

// chatResponses reads a session's OTLP export with the collector's reader
// and checks what its chat spans say of their responses, in order: id,
// model, finish reasons. It returns the export.
func (s *studio) chatResponses(id string, want []string) []byte {
	s.t.Helper()
	res, body := s.api("GET", "/api/sessions/"+id+"/otlp", "", nil)
	if res.StatusCode != 200 {
		s.t.Fatalf("OTLP export: %d %.300s", res.StatusCode, body)
	}
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalJSON(body); err != nil {
		s.t.Fatalf("the OTLP export is not OTLP JSON: %v", err)
	}
	type said struct {
		start uint64
		text  string
	}
	var got []said
	rss := req.Traces().ResourceSpans()
	for i := range rss.Len() {
		sss := rss.At(i).ScopeSpans()
		for j := range sss.Len() {
			spans := sss.At(j).Spans()
			for k := range spans.Len() {
				sp := spans.At(k)
				if !strings.HasPrefix(sp.Name(), "chat") {
					continue
				}
				a := sp.Attributes()
				str := func(key string) string {
					if v, ok := a.Get(key); ok {
						return v.AsString()
					}
					return "-"
				}
				var reasons []string
				if v, ok := a.Get("gen_ai.response.finish_reasons"); ok && v.Type() == pcommon.ValueTypeSlice {
					for n := range v.Slice().Len() {
						reasons = append(reasons, v.Slice().At(n).Str())
					}
				}
				got = append(got, said{uint64(sp.StartTimestamp()), fmt.Sprintf("%s %s %v", str("gen_ai.response.id"), str("gen_ai.response.model"), reasons)})
			}
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].start < got[j].start })
	var texts []string
	for _, g := range got {
		texts = append(texts, g.text)
	}
	if strings.Join(texts, "; ") != strings.Join(want, "; ") {
		s.t.Errorf("session %s: the chat spans say %q, want %q", id, texts, want)
	}
	return body
}

// TestRecordedUsageSurvivesExportAndImport: a session recorded through the
// endpoint, whose upstream reported each call's usage, exports OTLP naming
// the provider its route spoke (openai, never the scripted model's name,
// on which an import drops the usage as the studio's own count); imported
// back, every call has the usage the upstream reported.
func TestRecordedUsageSurvivesExportAndImport(t *testing.T) {
	srv := openaitest.NewServer(t, func(r openaitest.Request) openaitest.Reply {
		if r.Last().Role == "tool" {
			return openaitest.Reply{Content: "Two files.", Usage: map[string]any{"prompt_tokens": 52, "completion_tokens": 4}}
		}
		return openaitest.Reply{Calls: []openaitest.Call{{ID: "call_1", Name: "ls", Args: `{"path":"/"}`}},
			Usage: map[string]any{"prompt_tokens": 30, "completion_tokens": 9}}
	})
	up, err := proxy.NewHTTPUpstream(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s := proxyStudio(t, up, "")
	c := openAIClient(s.ts.URL, "sk-user", nil)
	ls := goopenai.Tool{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "ls",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}}
	msgs := []goopenai.ChatCompletionMessage{{Role: "user", Content: "List the files."}}
	first, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-x", Tools: []goopenai.Tool{ls}, Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, first.Choices[0].Message, goopenai.ChatCompletionMessage{Role: "tool", ToolCallID: "call_1", Content: "a.md b.md"})
	if _, err := c.CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-x", Tools: []goopenai.Tool{ls}, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	orig := s.onlySession()
	s.waitDone(orig.ID)
	res, doc := s.api("GET", "/api/sessions/"+orig.ID+"/otlp", "", nil)
	if res.StatusCode != 200 {
		t.Fatalf("OTLP export: %d %.300s", res.StatusCode, doc)
	}
	if res, body := s.otlp("application/json", "", doc, ""); res.StatusCode != 200 {
		t.Fatalf("the export does not import back: %d %s", res.StatusCode, body)
	}
	list, err := s.db.Sessions(context.Background(), 0)
	if err != nil || len(list) != 2 {
		t.Fatalf("sessions: %v %v", list, err)
	}
	usage := func(id string) (string, string) {
		tr, err := s.db.Trace(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var said []string
		for _, mc := range tr.ModelCalls {
			if mc.Usage == nil {
				said = append(said, "none")
				continue
			}
			said = append(said, fmt.Sprintf("%d+%d", mc.Usage.PromptTokens, mc.Usage.CompletionTokens))
		}
		return strings.Join(said, " "), tr.Session.Origin.Provider
	}
	if got, provider := usage(orig.ID); got != "30+9 52+4" || provider != "openai" {
		t.Fatalf("recorded: usage %s, provider %q", got, provider)
	}
	for _, sess := range list {
		if sess.ID != orig.ID {
			s.waitDone(sess.ID)
			if got, provider := usage(sess.ID); got != "30+9 52+4" || provider != "openai" {
				t.Errorf("imported back: usage %s, provider %q; recorded 30+9 52+4 from openai", got, provider)
			}
		}
	}
}
