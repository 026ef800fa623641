package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/observed"
	"github.com/delegationstudio/studio/internal/pricing"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/tokens"
)

// The recording endpoint (docs/proxy.md): an OpenAI-compatible base URL,
// http://HOST:PORT/v1, that forwards each request to the upstream and
// records it, and its answer, as a model call of a session.

// proxyRoute reports whether a path answers in OpenAI's shape, errors
// included, because OpenAI's clients call it: every /v1/ path but the OTLP
// receiver's.
func proxyRoute(p string) bool {
	return strings.HasPrefix(p, "/v1/") && p != "/v1/traces"
}

// anthropicRoute reports whether a path answers in Anthropic's shape,
// errors included, because Anthropic's clients call it.
func anthropicRoute(p string) bool { return p == "/v1/messages" }

// apiNotServed answers the OpenAI paths the studio does not record.
func (s *Server) apiNotServed(c echo.Context) error {
	return echo.NewHTTPError(http.StatusNotFound, "This studio records chat completions (POST /v1/chat/completions) and Anthropic's messages (POST /v1/messages), and lists "+
		"models (GET /v1/models); "+c.Request().Method+" "+c.Request().URL.Path+" is not served (docs/proxy.md).")
}

func (s *Server) newProxy() *proxy.Proxy {
	counter, _ := tokens.Get(tokens.Default)
	return proxy.New(proxy.Config{Upstream: s.cfg.Upstream, Store: observedStore{s}, Counter: counter, Tokenizer: tokens.Default,
		TaskTool: s.cfg.TaskTool, Timeout: s.cfg.UpstreamTimeout, DoneAfter: s.cfg.ProxyDoneAfter, Quiet: s.cfg.ProxyQuiet,
		Prices: pricing.Lookup, Now: s.now, Logger: s.log})
}

// apiChat is POST /v1/chat/completions.
func (s *Server) apiChat(c echo.Context) error {
	s.proxy.ServeChat(c.Response(), s.forUpstream(c.Request()))
	return nil
}

// apiMessages is POST /v1/messages, Anthropic's Messages API.
func (s *Server) apiMessages(c echo.Context) error {
	s.proxy.ServeMessages(c.Response(), s.forUpstream(c.Request()))
	return nil
}

// apiModels is GET /v1/models and /v1/models/:id.
func (s *Server) apiModels(c echo.Context) error {
	s.proxy.ServeModels(c.Response(), s.forUpstream(c.Request()), c.Param("id"))
	return nil
}

// forUpstream keeps the studio's own access token from going on: a client
// that signs in with it as its bearer token has its calls sent with the
// upstream key of the studio's environment instead. (One that sends its
// own key for the upstream gives the studio's token in X-Studio-Token.)
func (s *Server) forUpstream(r *http.Request) *http.Request {
	if s.auth == nil {
		return r
	}
	h := r.Header.Get("Authorization")
	if bearer, ok := bearerToken(h); ok && s.auth.matches(bearer) {
		r = r.Clone(r.Context())
		r.Header.Del("Authorization")
	}
	// Anthropic's SDKs send their key as x-api-key.
	if k := r.Header.Get("X-Api-Key"); k != "" && s.auth.matches(k) {
		r = r.Clone(r.Context())
		r.Header.Del("X-Api-Key")
	}
	return r
}

// observedStore records the observed sessions — the OTLP receiver's and
// the recording endpoint's — through the runner.
type observedStore struct{ s *Server }

func (o observedStore) Open(ctx context.Context, name string, _ *delegation.Origin, stop func()) (observed.Recording, error) {
	rec, done, err := o.s.runner.Receive(ctx, &db.Session{Name: name, Tokenizer: tokens.Default, Scenario: json.RawMessage("{}")}, stop)
	if err != nil {
		return observed.Recording{}, err
	}
	return observed.Recording{ID: rec.SessionID(), Sink: rec, Done: done}, nil
}

// openAIError answers an error of the studio's (a refused token, a body too
// large, a Host it does not answer to) on a route OpenAI's clients call, in
// the shape they read.
func openAIError(c echo.Context, status int, msg, code string) {
	e := &proxy.Error{Status: status, Message: msg, Code: code}
	_ = c.JSONBlob(status, e.Body())
}

// anthropicError is openAIError for the route Anthropic's clients call.
func anthropicError(c echo.Context, status int, msg string) {
	_ = c.JSONBlob(status, proxy.AnthropicErrorBody(status, msg))
}
