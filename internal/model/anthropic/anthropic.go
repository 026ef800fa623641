// Package anthropic is the model adapter for Anthropic's Messages API
// (POST /v1/messages; model.provider "anthropic"), on Anthropic's Go SDK.
//
// New returns a delegation.Model. Each Generate is one message, streamed
// when the engine asks for text as it arrives. It fails and retries as the
// OpenAI adapter does, by the rules they share (package remote): a 429, a
// 529 (overloaded) or another 5xx, a broken connection or an attempt that
// took too long is retried a bounded number of times, honouring
// Retry-After; a 401, a 400 or a 404 is not. Every error it returns is
// written for a person. The API key is used for the request's credentials
// only: it never appears in an error, a log line or a printed Config. The
// SDK is given the key, the base URL and the HTTP client explicitly and
// reads nothing from the environment (ANTHROPIC_API_KEY included): the
// caller decides which key goes where.
package anthropic

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// DefaultBaseURL is Anthropic's API, used when Config.BaseURL is empty and
// ANTHROPIC_BASE_URL is not set. Its calls go to DefaultBaseURL + "/v1/messages".
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultKeyEnv is the environment variable the API key is read from for
// Anthropic's own API when the scenario names none.
const DefaultKeyEnv = "ANTHROPIC_API_KEY"

// BaseURLEnv is the variable Anthropic's SDKs read their base URL from; the
// studio reads it as they do, as a setting of whoever runs it.
const BaseURLEnv = "ANTHROPIC_BASE_URL"

// DefaultMaxTokens is the max_tokens sent when the agent sets none: the
// Messages API requires one.
const DefaultMaxTokens = 8192

// Defaults of Config, the same as every remote adapter's.
const (
	DefaultMaxRetries  = remote.DefaultMaxRetries
	DefaultCallTimeout = remote.DefaultCallTimeout
)

// Config says which endpoint and model to call, and how patiently.
type Config struct {
	// BaseURL is the API root as Anthropic's SDKs take it, e.g.
	// https://api.anthropic.com (a trailing /v1 is taken too). Empty means
	// BaseURLFromEnv().
	BaseURL string
	// Model is the default model; Request.Model overrides it per agent.
	Model string
	// APIKey is the credential every call carries; "" sends none (a local
	// server or a recording studio that needs none). The caller reads it
	// from the environment; the Model keeps it nowhere it could be printed.
	APIKey string
	// KeyEnv names the variable APIKey came from, for messages; "" means
	// DefaultKeyEnv.
	KeyEnv string
	// HTTPClient makes the calls; nil means a client with connect and TLS
	// timeouts (each attempt's length is bounded by CallTimeout).
	HTTPClient *http.Client
	// MaxRetries bounds the retries: 0 means DefaultMaxRetries, a negative
	// value none.
	MaxRetries int
	// Backoff is the wait before retry number n when the endpoint sends no
	// Retry-After; nil means remote.DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// CallTimeout bounds one attempt: the whole answer when not streaming,
	// the silence between two events when streaming. 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// NoStream turns streaming off whatever Settings.Stream says.
	NoStream bool
	// Settings are the request parameters sent with every call.
	Settings Settings
	// Logger receives a warning for each retried attempt; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Settings are the request parameters an agent may set, by their names in
// a scenario (the OpenAI adapter's, as the Messages API says them).
type Settings struct {
	// Stream: nil or true streams when the engine asks for text as it
	// arrives; false waits for the whole answer.
	Stream *bool
	// MaxTokens caps the answer's length; 0 sends DefaultMaxTokens.
	MaxTokens int
	// Temperature is sent as given, 0 included (Anthropic's range: 0 to 1).
	Temperature *float64
	// Seed is refused: the Messages API has no seed.
	Seed *int
	// ToolChoice is "auto", "none", "required" (Anthropic's "any"), or the
	// name of one tool the model must call. Sent only with tools.
	ToolChoice string
	// ParallelToolCalls false sends disable_parallel_tool_use.
	ParallelToolCalls *bool
}

// The tool_choice values that name no tool.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
)

// check refuses settings the Messages API would not take.
func (s Settings) check() error {
	switch {
	case s.MaxTokens < 0:
		return fmt.Errorf("max_tokens must be a positive number of tokens; got %d", s.MaxTokens)
	case s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 1):
		return fmt.Errorf("temperature must be between 0 and 1 for Anthropic's models; got %g", *s.Temperature)
	case s.Seed != nil:
		return errors.New("seed: Anthropic's Messages API has no seed; remove it from this agent's settings")
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
		{"temperature", s.Temperature != nil}, {"max_tokens", s.MaxTokens > 0},
		{"tool_choice", s.ToolChoice != ""}, {"disable_parallel_tool_use", s.ParallelToolCalls != nil},
	} {
		if st.set {
			out = append(out, st.name)
		}
	}
	return out
}

// String describes the config without its API key.
func (c Config) String() string {
	key := "none"
	if c.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("anthropic.Config{BaseURL: %q, Model: %q, APIKey: %s, MaxRetries: %d, CallTimeout: %s, Stream: %t}",
		c.BaseURL, c.Model, key, c.MaxRetries, c.CallTimeout, c.streams())
}

// GoString is String: %#v must not print the key either.
func (c Config) GoString() string { return c.String() }

// LogValue keeps the key out of structured logs.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

func (c Config) streams() bool {
	return !c.NoStream && (c.Settings.Stream == nil || *c.Settings.Stream)
}

// Model calls Anthropic's Messages API. It is safe for concurrent use.
type Model struct {
	client      sdk.Client
	baseURL     string // for messages: without user info or query
	model       string
	callTimeout time.Duration
	stream      bool
	settings    Settings
	// ep holds the key only inside its redactor.
	ep      *remote.Endpoint
	retrier *remote.Retrier
}

var (
	_ delegation.Model     = (*Model)(nil)
	_ delegation.Describer = (*Model)(nil)
)

// New checks a config and returns a Model. Calling Anthropic's own API
// without a key fails here, before any call: it would only be refused.
func New(cfg Config) (*Model, error) {
	base, field := strings.TrimSpace(cfg.BaseURL), "model.base_url"
	if base == "" {
		base, field = BaseURLFromEnv(), BaseURLEnv
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s must be an absolute http(s) URL such as https://api.anthropic.com; got %q", field, base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s must not have a query or fragment (the path /v1/messages is appended to it); got %q", field, u.Redacted())
	}
	root := strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: root}).String()
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New(`model.model must name the model to call, e.g. "claude-sonnet-4-5"`)
	}
	keyEnv := cfg.KeyEnv
	if keyEnv == "" {
		keyEnv = DefaultKeyEnv
	}
	if cfg.APIKey == "" && anthropicHost(u) {
		return nil, fmt.Errorf("no API key for %s: set %s (or point model.base_url at a server that needs none)", shown, keyEnv)
	}
	if err := cfg.Settings.check(); err != nil {
		return nil, err
	}
	m := &Model{
		baseURL:     shown,
		model:       cfg.Model,
		callTimeout: cfg.CallTimeout,
		stream:      cfg.streams(),
		settings:    cfg.Settings,
		ep: remote.NewEndpoint(remote.Endpoint{URL: shown, KeyEnv: keyEnv, HasKey: cfg.APIKey != "",
			API: "/v1/messages", Format: "an Anthropic message",
			Root:     "the root that /v1/messages is under, such as https://api.anthropic.com",
			Settings: cfg.Settings.named()}, cfg.APIKey),
	}
	m.retrier = remote.NewRetrier(m.ep, cfg.MaxRetries, cfg.Backoff, cfg.Logger)
	if m.callTimeout <= 0 {
		m.callTimeout = DefaultCallTimeout
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = remote.DefaultHTTPClient()
	}
	opts := []option.RequestOption{
		// Nothing from the environment: not its key, not its base URL.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(shown + "/"),
		option.WithHTTPClient(hc),
		// The Retrier retries, by the rules every adapter shares.
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	m.client = sdk.NewClient(opts...)
	return m, nil
}

// String names the endpoint and model; never the key.
func (m *Model) String() string {
	return fmt.Sprintf("anthropic model %q at %s", m.model, m.baseURL)
}

// Describe says which model an agent's calls ask for and where they go.
func (m *Model) Describe(_ delegation.Caller, model string) (string, string) {
	if model == "" {
		model = m.model
	}
	return model, m.baseURL
}

// BaseURLFromEnv is the endpoint used when none is given: $ANTHROPIC_BASE_URL,
// as Anthropic's SDKs read it, else DefaultBaseURL.
func BaseURLFromEnv() string {
	if v := strings.TrimSpace(os.Getenv(BaseURLEnv)); v != "" {
		return v
	}
	return DefaultBaseURL
}

// IsAnthropic reports whether base is Anthropic's own API (https, at
// api.anthropic.com), or the one ANTHROPIC_BASE_URL names ("" means it):
// the URLs ANTHROPIC_API_KEY goes to when a scenario names no key variable.
// Both are settings of whoever runs the studio, never of a scenario.
func IsAnthropic(base string) bool {
	norm := func(s string) string { return strings.TrimSuffix(strings.TrimRight(s, "/"), "/v1") }
	if base == "" || norm(base) == norm(BaseURLFromEnv()) {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && anthropicHost(u)
}

// anthropicHost: u is Anthropic's own API.
func anthropicHost(u *url.URL) bool {
	return u.Scheme == "https" && strings.EqualFold(u.Hostname(), "api.anthropic.com")
}
