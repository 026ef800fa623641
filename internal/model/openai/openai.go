// Package openai is the model adapter for any OpenAI-compatible
// chat-completions endpoint: OpenAI itself, or a local server such as
// llama.cpp, vLLM or Ollama (formats.md §1, model.provider "openai").
//
// New returns a delegation.Model. Each Generate is one chat completion,
// streamed when the engine asks for text as it arrives. Transient failures
// (429, 5xx, broken connections, attempts that take too long) are retried
// a bounded number of times; every error it returns is written for a person,
// because the engine shows it in receipts and in the UI. The API key is used
// for the Authorization header only: it never appears in an error, a log
// line or a printed Config.
package openai

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// DefaultBaseURL is OpenAI's endpoint, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultKeyEnv is the environment variable the API key is read from when
// the scenario names none.
const DefaultKeyEnv = "OPENAI_API_KEY"

// Defaults of Config.
const (
	DefaultMaxRetries  = remote.DefaultMaxRetries
	DefaultCallTimeout = remote.DefaultCallTimeout
)

// Config says which endpoint and model to call, and how patiently.
type Config struct {
	// BaseURL is the endpoint's API root, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:8080/v1 (llama.cpp, vLLM, Ollama). Empty means
	// BaseURLFromEnv(); anything else must be an absolute http(s) URL.
	BaseURL string
	// Model is the default model; Request.Model overrides it per agent when
	// non-empty.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>"; "" sends no header
	// (local servers). The caller reads it from the environment (KeyFromEnv);
	// the Model does not keep it anywhere it could be printed.
	APIKey string
	// KeyEnv names the variable APIKey came from, for messages ("the key in
	// OPENAI_API_KEY was rejected"); "" means DefaultKeyEnv when APIKey is
	// set, and that no variable was read when it is not.
	KeyEnv string
	// WithheldKeyEnv names a variable whose key was kept from this endpoint
	// because it is meant for another (OPENAI_API_KEY at a URL that is not
	// OpenAI's), so that a 401 says so rather than to set it.
	WithheldKeyEnv string
	// HTTPClient makes the calls; nil means a client with connect and TLS
	// timeouts (each attempt's length is bounded by CallTimeout).
	HTTPClient *http.Client
	// MaxRetries bounds the retries after a 429, a 5xx, a connection reset
	// or an attempt that took longer than CallTimeout. 0 means
	// DefaultMaxRetries; a negative value means no retry.
	MaxRetries int
	// Backoff is how long to wait before retry number attempt (1, 2, …) when
	// the endpoint sends no Retry-After. nil means exponential with jitter
	// from about 250ms, capped at about 8s.
	Backoff func(attempt int) time.Duration
	// CallTimeout bounds one attempt: the whole answer when not streaming,
	// and the silence between two chunks when streaming (a long answer that
	// keeps arriving is not cut off). 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// NativeJSONSchema asks the endpoint for a JSON answer through its
	// response_format (json_schema) instead of the structured-answer tool the
	// engine gives an agent with a response_format.
	NativeJSONSchema bool
	// NoStream turns streaming off whatever Settings.Stream says: every call
	// waits for the whole answer (for servers whose streaming is broken,
	// such as those that cannot stream tool calls).
	NoStream bool
	// Settings are the request parameters sent with every call.
	Settings Settings
	// Logger receives a warning for each retried attempt, which the UI
	// would otherwise show only as a slow call. nil means slog.Default().
	Logger *slog.Logger
}

// Settings are the chat-completions request parameters an agent may set.
// Unset (nil or zero) fields are not sent, so the endpoint's defaults apply.
type Settings struct {
	// Stream: nil or true streams the answer when the engine asks for text
	// as it arrives; false waits for the whole answer.
	Stream *bool
	// MaxTokens caps the answer's length (max_tokens; an endpoint that
	// wants max_completion_tokens instead gets that). 0: not sent.
	MaxTokens int
	// Temperature is sent as given, 0 included.
	Temperature *float64
	// Seed asks for reproducible sampling.
	Seed *int
	// ToolChoice is "auto", "none", "required", or the name of one tool
	// the model must call. Sent only with tools.
	ToolChoice string
	// ParallelToolCalls: nil sends true with tools (a fan-out of several
	// task calls in one message); false asks for one call at a time.
	ParallelToolCalls *bool
}

// The tool_choice values that name no tool.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// check refuses settings no endpoint would take.
func (s Settings) check() error {
	switch {
	case s.MaxTokens < 0:
		return fmt.Errorf("max_tokens must be a positive number of tokens; got %d", s.MaxTokens)
	case s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2):
		return fmt.Errorf("temperature must be between 0 and 2; got %g", *s.Temperature)
	}
	return nil
}

// named are the names of the settings s sets, for refusals that name one.
func (s Settings) named() []string {
	var out []string
	for _, st := range []struct {
		name string
		set  bool
	}{
		{"temperature", s.Temperature != nil}, {"max_tokens", s.MaxTokens > 0}, {"seed", s.Seed != nil},
		{"tool_choice", s.ToolChoice != ""}, {"parallel_tool_calls", s.ParallelToolCalls != nil},
	} {
		if st.set {
			out = append(out, st.name)
		}
	}
	return out
}

// String describes the config without its API key, so printing a Config, by
// mistake or in a log line, cannot leak it.
func (c Config) String() string {
	key := "none"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("openai.Config{BaseURL: %q, Model: %q, APIKey: %s, MaxRetries: %d, CallTimeout: %s, NativeJSONSchema: %t, Stream: %t}",
		c.BaseURL, c.Model, key, c.MaxRetries, c.CallTimeout, c.NativeJSONSchema, c.streams())
}

// streams reports whether calls stream when the engine asks for text.
func (c Config) streams() bool {
	return !c.NoStream && (c.Settings.Stream == nil || *c.Settings.Stream)
}

// GoString is String: %#v must not print the key either.
func (c Config) GoString() string { return c.String() }

// LogValue keeps the key out of structured logs.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Model calls an OpenAI-compatible chat-completions endpoint. It is safe for
// concurrent use: the engine runs sibling subagents at once.
type Model struct {
	client      *goopenai.Client
	baseURL     string // for messages: without user info or query
	model       string
	callTimeout time.Duration
	native      bool
	stream      bool
	settings    Settings
	// ep is what errors say of the endpoint; it holds the key only inside
	// its redactor, so that no field of Model holds it in a form %+v would
	// print.
	ep      *remote.Endpoint
	retrier *remote.Retrier
	// compat holds what this endpoint was found to reject, so later calls
	// leave it out from the start (see rejectedOption).
	compat *compat
}

var _ delegation.Model = (*Model)(nil)

// New checks a config and returns a Model. Calling OpenAI's own endpoint
// without a key fails here, before any call: it would only be refused.
func New(cfg Config) (*Model, error) {
	base, field := strings.TrimSpace(cfg.BaseURL), "model.base_url"
	if base == "" {
		base, field = BaseURLFromEnv(), "OPENAI_BASE_URL"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s must be an absolute http(s) URL such as https://api.openai.com/v1 or http://127.0.0.1:8080/v1; got %q", field, base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// go-openai appends /chat/completions to the base as text.
		return nil, fmt.Errorf("%s must not have a query or fragment (the path /chat/completions is appended to it); got %q", field, u.Redacted())
	}
	base = strings.TrimRight(base, "/")
	// Errors name the endpoint; they must not carry credentials that a URL
	// may hold in its user info or query.
	shown := strings.TrimRight((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), "/")
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New(`model.model must name the model to call, e.g. "gpt-4.1-mini"`)
	}
	keyEnv := cfg.KeyEnv
	if cfg.APIKey == "" && strings.EqualFold(u.Hostname(), "api.openai.com") {
		if keyEnv == "" {
			keyEnv = DefaultKeyEnv
		}
		return nil, fmt.Errorf("no API key for %s: set %s (or point model.base_url, --model-url or OPENAI_BASE_URL at a server that needs none)", shown, keyEnv)
	}
	if keyEnv == "" && cfg.APIKey != "" {
		keyEnv = DefaultKeyEnv
	}
	if err := cfg.Settings.check(); err != nil {
		return nil, err
	}
	m := &Model{
		baseURL:     shown,
		model:       cfg.Model,
		callTimeout: cfg.CallTimeout,
		native:      cfg.NativeJSONSchema,
		stream:      cfg.streams(),
		settings:    cfg.Settings,
		compat:      new(compat),
		ep: remote.NewEndpoint(remote.Endpoint{URL: shown, KeyEnv: keyEnv, HasKey: cfg.APIKey != "", Withheld: cfg.WithheldKeyEnv,
			API: "chat completions", Format: "a chat completion",
			Root:     "the root that /chat/completions is under, often ending in /v1",
			Settings: cfg.Settings.named()}, cfg.APIKey),
	}
	m.retrier = remote.NewRetrier(m.ep, cfg.MaxRetries, cfg.Backoff, cfg.Logger)
	m.retrier.Drop = m.compat.apply
	if m.callTimeout <= 0 {
		m.callTimeout = DefaultCallTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = remote.DefaultHTTPClient()
	}
	cc := goopenai.DefaultConfig(cfg.APIKey)
	cc.BaseURL = base
	// The wire layer keeps each attempt's status, headers (Retry-After) and
	// error body, which go-openai's errors do not carry faithfully, and
	// mends what go-openai cannot say or read (wire_fix.go).
	cc.HTTPClient = recorder{next: hc}
	m.client = goopenai.NewClientWithConfig(cc)
	return m, nil
}

// String names the endpoint and model; never the key.
func (m *Model) String() string {
	return fmt.Sprintf("openai model %q at %s", m.model, m.baseURL)
}

// KeyFromEnv returns the API key: the variable apiKeyEnv names, or
// OPENAI_API_KEY when it names none. A named variable that is unset gives
// "", never OPENAI_API_KEY's key: that key is for OpenAI, and the scenario
// asked for another endpoint's. "" is allowed: local servers need no key.
func KeyFromEnv(apiKeyEnv string) string {
	if apiKeyEnv == "" {
		apiKeyEnv = DefaultKeyEnv
	}
	return strings.TrimSpace(os.Getenv(apiKeyEnv))
}

// BaseURLFromEnv is the endpoint used when none is given: OPENAI_BASE_URL,
// as OpenAI's own SDKs read it, else DefaultBaseURL.
func BaseURLFromEnv() string {
	if v := strings.TrimSpace(os.Getenv("OPENAI_BASE_URL")); v != "" {
		return v
	}
	return DefaultBaseURL
}

var _ delegation.Describer = (*Model)(nil)

// Describe says which model an agent's calls ask for and where they go.
func (m *Model) Describe(_ delegation.Caller, model string) (string, string) {
	if model == "" {
		model = m.model
	}
	return model, m.baseURL
}

// Generate makes one chat completion for the engine, with retries. An
// answer cut off at a length limit or withheld by a content filter is an
// error, not an answer: it would otherwise become a receipt as if complete.
func (m *Model) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req == nil {
		return nil, errors.New("no request")
	}
	call := m.buildRequest(req)
	var onDelta func(string)
	if m.stream && req.Stream != nil {
		onDelta = req.Stream
	}
	call.retrying = req.Retry
	resp, err := m.withRetries(ctx, call, onDelta)
	if err != nil {
		return nil, err
	}
	out := call.finish(resp)
	m.ep.RedactAnswer(out) // an endpoint may echo the key in its answer
	if err := m.finishProblem(resp, out.Content); err != nil {
		return nil, err
	}
	return out, nil
}

// finishProblem is the error for an answer that did not finish: cut off at
// a length limit, or stopped by a content filter; content is the answer's,
// redacted.
func (m *Model) finishProblem(r *result, content string) error {
	output := 0
	if r.usage != nil {
		output = r.usage.CompletionTokens
	}
	return remote.Unfinished("finish_reason", r.finishReason, m.settings.MaxTokens, output, content)
}
