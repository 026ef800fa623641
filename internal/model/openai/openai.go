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
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/delegation"
)

// DefaultBaseURL is OpenAI's endpoint, used when Config.BaseURL is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultKeyEnv is the environment variable the API key is read from when
// the scenario names none.
const DefaultKeyEnv = "OPENAI_API_KEY"

// Defaults of Config.
const (
	DefaultMaxRetries  = 3
	DefaultCallTimeout = 120 * time.Second
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
	// OPENAI_API_KEY was rejected"); "" means DefaultKeyEnv.
	KeyEnv string
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
	maxRetries  int
	backoff     func(int) time.Duration
	callTimeout time.Duration
	native      bool
	stream      bool
	settings    Settings
	keyEnv      string
	hasKey      bool
	log         *slog.Logger
	// compat holds what this endpoint was found to reject, so later calls
	// leave it out from the start (see fallback).
	compat *compat
	// redact removes the API key from text the endpoint sent back before it
	// goes into an error. It closes over the key so that no field of Model
	// holds it in a form %+v would print.
	redact func(string) string
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
	if keyEnv == "" {
		keyEnv = DefaultKeyEnv
	}
	if cfg.APIKey == "" && strings.EqualFold(u.Hostname(), "api.openai.com") {
		return nil, fmt.Errorf("no API key for %s: set %s (or point model.base_url, --model-url or OPENAI_BASE_URL at a server that needs none)", shown, keyEnv)
	}
	if err := cfg.Settings.check(); err != nil {
		return nil, err
	}
	m := &Model{
		baseURL:     shown,
		model:       cfg.Model,
		maxRetries:  cfg.MaxRetries,
		backoff:     cfg.Backoff,
		callTimeout: cfg.CallTimeout,
		native:      cfg.NativeJSONSchema,
		stream:      cfg.streams(),
		settings:    cfg.Settings,
		keyEnv:      keyEnv,
		hasKey:      cfg.APIKey != "",
		log:         cfg.Logger,
		redact:      Redactor(cfg.APIKey),
		compat:      new(compat),
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.maxRetries == 0 {
		m.maxRetries = DefaultMaxRetries
	} else if m.maxRetries < 0 {
		m.maxRetries = 0
	}
	if m.backoff == nil {
		m.backoff = defaultBackoff
	}
	if m.callTimeout <= 0 {
		m.callTimeout = DefaultCallTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = defaultHTTPClient()
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

// defaultHTTPClient bounds connecting, not answering: a generation may take
// minutes, and CallTimeout already bounds each attempt. A Client.Timeout
// would also cut long streams that are still arriving.
func defaultHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	// Sibling subagents call the same host at once.
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: tr}
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
	if err := m.finishProblem(resp); err != nil {
		return nil, err
	}
	return call.finish(resp), nil
}

// finishProblem is the error for an answer that did not finish: cut off at
// a length limit, or stopped by a content filter. Neither is retried: the
// same request would be cut again.
func (m *Model) finishProblem(r *result) error {
	ended := ""
	if tail := lastWords(r.content, 60); tail != "" {
		ended = fmt.Sprintf("; it ended %q", tail)
	}
	switch r.finishReason {
	case "length", "max_tokens", "model_length":
		limit := "the model's own output limit"
		fix := "set a larger max_tokens for this agent if the model allows it, or ask for a shorter answer"
		if m.settings.MaxTokens > 0 {
			limit = fmt.Sprintf("max_tokens %d", m.settings.MaxTokens)
			fix = "raise max_tokens for this agent, or ask for a shorter answer"
		}
		if u := r.usage; u != nil && u.CompletionTokens > 0 {
			limit += fmt.Sprintf(", after %d tokens", u.CompletionTokens)
		}
		return &classified{class: ErrTruncated, msg: fmt.Sprintf(`%s (finish_reason "length": %s)%s: %s`, ErrTruncated, limit, ended, fix)}
	case "content_filter", "safety", "prohibited_content":
		return &classified{class: ErrContentFilter, msg: fmt.Sprintf(`%s (finish_reason %q)%s: rephrase the prompt or the task; a retry would be withheld again`,
			ErrContentFilter, r.finishReason, ended)}
	}
	return nil
}

// lastWords is the end of s, at most n runes, starting at a word.
func lastWords(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	t := string(r[len(r)-n:])
	if i := strings.IndexByte(t, ' '); i >= 0 && i < len(t)-1 {
		t = t[i+1:]
	}
	return "…" + t
}
