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
	"math/rand/v2"
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
	// DefaultBaseURL; anything else must be an absolute http(s) URL.
	BaseURL string
	// Model is the default model; Request.Model overrides it per agent when
	// non-empty.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>"; "" sends no header
	// (local servers). The caller reads it from the environment (KeyFromEnv);
	// the Model does not keep it anywhere it could be printed.
	APIKey string
	// HTTPClient makes the calls; nil means a client with connect and TLS
	// timeouts (each attempt's length is bounded by CallTimeout).
	HTTPClient *http.Client
	// MaxRetries bounds the retries after a 429, a 5xx, a connection error or
	// an attempt that took longer than CallTimeout. 0 means
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
	// Stream says to use server-sent events when the request has a Stream
	// callback, so text reaches the UI as it is generated. Streaming is the
	// default whatever this field says, because a bool's zero value cannot
	// default to true: set NoStream to turn it off.
	Stream bool
	// NoStream turns streaming off: every call waits for the whole answer
	// (for servers whose streaming is broken).
	NoStream bool
	// Logger receives a warning for each retried attempt, which the UI
	// would otherwise show only as a slow call. nil means slog.Default().
	Logger *slog.Logger
}

// String describes the config without its API key, so printing a Config, by
// mistake or in a log line, cannot leak it.
func (c Config) String() string {
	key := "none"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("openai.Config{BaseURL: %q, Model: %q, APIKey: %s, MaxRetries: %d, CallTimeout: %s, NativeJSONSchema: %t, Stream: %t}",
		c.BaseURL, c.Model, key, c.MaxRetries, c.CallTimeout, c.NativeJSONSchema, !c.NoStream)
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
	log         *slog.Logger
	// redact removes the API key from text the endpoint sent back before it
	// goes into an error. It closes over the key so that no field of Model
	// holds it in a form %+v would print.
	redact func(string) string
}

var _ delegation.Model = (*Model)(nil)

// New checks a config and returns a Model.
func New(cfg Config) (*Model, error) {
	base := strings.TrimSpace(cfg.BaseURL)
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("model.base_url must be an absolute http(s) URL such as https://api.openai.com/v1 or http://127.0.0.1:8080/v1; got %q", cfg.BaseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		// go-openai appends /chat/completions to the base as text.
		return nil, fmt.Errorf("model.base_url must not have a query or fragment (the path /chat/completions is appended to it); got %q", u.Redacted())
	}
	base = strings.TrimRight(base, "/")
	// Errors name the endpoint; they must not carry credentials that a URL
	// may hold in its user info or query.
	shown := strings.TrimRight((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), "/")
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New(`model.model must name the model to call, e.g. "gpt-4.1-mini"`)
	}
	m := &Model{
		baseURL:     shown,
		model:       cfg.Model,
		maxRetries:  cfg.MaxRetries,
		backoff:     cfg.Backoff,
		callTimeout: cfg.CallTimeout,
		native:      cfg.NativeJSONSchema,
		stream:      !cfg.NoStream,
		log:         cfg.Logger,
		redact:      redactor(cfg.APIKey),
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
	// The recorder keeps each attempt's status and headers (Retry-After),
	// which go-openai's errors do not carry.
	cc.HTTPClient = recorder{next: hc}
	m.client = goopenai.NewClientWithConfig(cc)
	return m, nil
}

// String names the endpoint and model; never the key.
func (m *Model) String() string {
	return fmt.Sprintf("openai model %q at %s", m.model, m.baseURL)
}

// KeyFromEnv returns the API key: the variable named by apiKeyEnv when it is
// set, else OPENAI_API_KEY. "" is allowed: local servers need no key.
func KeyFromEnv(apiKeyEnv string) string {
	if apiKeyEnv != "" {
		if v, ok := os.LookupEnv(apiKeyEnv); ok {
			return strings.TrimSpace(v)
		}
	}
	return strings.TrimSpace(os.Getenv(DefaultKeyEnv))
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

// defaultBackoff is exponential from 250ms, capped at 8s, with jitter so
// that siblings that failed together do not retry in lockstep.
func defaultBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := 250 * time.Millisecond
	for i := 1; i < attempt && d < 8*time.Second; i++ {
		d *= 2
	}
	d = min(d, 8*time.Second)
	return d/2 + rand.N(d/2+1)
}

// Generate makes one chat completion for the engine, with retries.
func (m *Model) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req == nil {
		return nil, errors.New("no request")
	}
	call := m.buildRequest(req)
	var onDelta func(string)
	if m.stream && req.Stream != nil {
		onDelta = req.Stream
	}
	resp, err := m.withRetries(ctx, call, onDelta)
	if err != nil {
		return nil, err
	}
	return call.finish(resp), nil
}
