package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
)

// serveConfig is serve's config file (--config): where model calls may go
// and which other names the studio answers to. Flags add to it.
//
//	{"endpoints": [{"name": "local", "base_url": "http://127.0.0.1:8080/v1", "model": "qwen2.5"},
//	               {"name": "openai", "api_key_env": "OPENAI_API_KEY", "model": "gpt-4.1-mini"},
//	               {"name": "claude", "provider": "anthropic", "model": "claude-sonnet-4-5"}],
//	 "allowed_hosts": ["studio.example.lan"]}
type serveConfig struct {
	Endpoints []struct {
		Name      string `json:"name"`
		Provider  string `json:"provider"`
		BaseURL   string `json:"base_url"`
		APIKeyEnv string `json:"api_key_env"`
		Model     string `json:"model"`
	} `json:"endpoints"`
	AllowedHosts []string `json:"allowed_hosts"`
}

// readServeConfig reads a config file, refusing fields it does not know (a
// typo would otherwise be a silently missing endpoint).
func readServeConfig(path string) (endpoints []session.Endpoint, hosts []string, err error) {
	b, err := readLimited(path, 1<<20)
	if err != nil {
		return nil, nil, err
	}
	var cfg serveConfig
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("config %s: one JSON object, please", path)
	}
	for _, e := range cfg.Endpoints {
		ep := session.Endpoint{Name: e.Name, Provider: e.Provider, BaseURL: e.BaseURL, KeyEnv: e.APIKeyEnv, Model: e.Model}
		if err := ep.Check(); err != nil {
			return nil, nil, fmt.Errorf("config %s: %w", path, err)
		}
		endpoints = append(endpoints, ep)
	}
	return endpoints, cfg.AllowedHosts, nil
}

// endpointFlags collects --endpoint NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]] flags.
type endpointFlags []session.Endpoint

func (f *endpointFlags) String() string { return "" }

func (f *endpointFlags) Set(v string) error {
	e, err := session.ParseEndpoint(v)
	if err != nil {
		return err
	}
	*f = append(*f, e)
	return nil
}

// listFlags collects a repeatable string flag.
type listFlags []string

func (f *listFlags) String() string { return strings.Join(*f, ",") }

func (f *listFlags) Set(v string) error {
	*f = append(*f, v)
	return nil
}

// checkEndpoints refuses two endpoints of one name.
func checkEndpoints(list []session.Endpoint) error {
	seen := map[string]bool{}
	for _, e := range list {
		if seen[e.Name] {
			return fmt.Errorf("two endpoints are named %s: give each its own name", e.Name)
		}
		seen[e.Name] = true
	}
	return nil
}

// readToken reads the access token from a file (--token-file): its first
// line, so the token is in no process list.
func readToken(path string) (string, error) {
	b, err := readLimited(path, 4096)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}

// keyNote says where an endpoint's key comes from, for the start-up lines.
func keyNote(e session.Endpoint) string {
	env := e.KeyVar()
	if env == "" {
		return "no key"
	}
	if os.Getenv(env) == "" {
		return "key from " + env + ", which is NOT set"
	}
	return "key from " + env
}

// chosenUpstream is where the recording endpoint sends its calls, and a
// note for the start-up line on the key they carry.
type chosenUpstream struct {
	upstream proxy.Upstream
	note     string
}

// upstreamFrom reads serve's --upstream, --upstream-url and
// --upstream-key-env. A key comes from the environment only, by the rules
// of every endpoint (session.Endpoint): a *_API_KEY variable that is set,
// OPENAI_API_KEY only to OpenAI's own URL or $OPENAI_BASE_URL. It is read
// once, here, and never written anywhere.
func upstreamFrom(c *command, spec, rawURL, provider, keyEnv string, list []session.Endpoint, stderr io.Writer) (chosenUpstream, int) {
	switch {
	case provider != "openai" && provider != "anthropic":
		return chosenUpstream{}, c.fail("--upstream-provider %q: give openai (chat completions) or anthropic (Anthropic's Messages API)", provider)
	case provider == "anthropic" && rawURL == "":
		return chosenUpstream{}, c.fail("--upstream-provider anthropic goes with --upstream-url, e.g. --upstream-url https://api.anthropic.com " +
			"(a script answers both APIs without it)")
	case spec != "" && rawURL != "":
		return chosenUpstream{}, c.fail("give --upstream or --upstream-url, not both")
	case keyEnv != "" && rawURL == "":
		return chosenUpstream{}, c.fail("--upstream-key-env goes with --upstream-url (an endpoint named by --upstream has its own key variable)")
	case spec == "" && rawURL == "":
		return chosenUpstream{}, exitOK
	}
	if file, ok := strings.CutPrefix(spec, "script:"); ok {
		if file == "" {
			return chosenUpstream{}, c.fail("--upstream script: give the scenario, e.g. script:examples/order-number.json or script:lesson:order-number")
		}
		sc, code := loadScenario(file, scenario.Flags{}, nil, stderr)
		if sc == nil {
			return chosenUpstream{}, code
		}
		up, err := proxy.NewScriptUpstream(sc, file)
		if err != nil {
			return chosenUpstream{}, c.fail("--upstream: %v", err)
		}
		return chosenUpstream{upstream: up, note: "answered from its script, no key"}, exitOK
	}
	ep := session.Endpoint{Name: "upstream", BaseURL: rawURL, KeyEnv: keyEnv}
	if spec != "" {
		var ok bool
		if ep, ok = (session.Endpoints{List: list}).Lookup(spec); !ok {
			return chosenUpstream{}, c.fail("--upstream %q: give script:SCENARIO.json, or the name of an endpoint given with --endpoint or --config (%s)", spec, endpointNames(list))
		}
		if ep.BaseURL == "" {
			ep.BaseURL = ep.URL()
		}
		if ep.Anthropic() {
			provider = scenario.ProviderAnthropic
		}
	}
	if err := ep.Check(); err != nil {
		return chosenUpstream{}, c.fail("--upstream-url: %v", err)
	}
	if ep.KeyEnv != "" {
		if _, set := os.LookupEnv(ep.KeyEnv); !set {
			return chosenUpstream{}, c.fail("the upstream's key is read from %s, which is not set", ep.KeyEnv)
		}
	}
	if provider == "anthropic" {
		return anthropicUpstream(c, ep)
	}
	note := "the caller's Authorization; without one, no key"
	key := ""
	if v := ep.KeyVar(); v != "" {
		key = openai.KeyFromEnv(v)
		note = "the caller's Authorization, else the key in " + v
		if key == "" {
			note += ", which is NOT set"
		}
	}
	up, err := proxy.NewHTTPUpstream(ep.BaseURL, key)
	if err != nil {
		return chosenUpstream{}, c.fail("--upstream-url: %v", err)
	}
	return chosenUpstream{upstream: up, note: note}, exitOK
}

func endpointNames(list []session.Endpoint) string {
	if len(list) == 0 {
		return "none is given"
	}
	names := make([]string, len(list))
	for i, e := range list {
		names[i] = e.Name
	}
	return "given: " + strings.Join(names, ", ")
}

// anthropicUpstream is an Anthropic server for the recording endpoint: the
// caller's x-api-key (or Authorization) passes through; a call that brings
// neither is sent with the key of --upstream-key-env, or ANTHROPIC_API_KEY
// at Anthropic's own API and nowhere else.
func anthropicUpstream(c *command, ep session.Endpoint) (chosenUpstream, int) {
	v := ep.KeyEnv
	if v == "" {
		v = proxy.AnthropicKeyVar(ep.BaseURL)
	}
	note := "Anthropic's Messages API; the caller's x-api-key; without one, no key"
	key := ""
	if v != "" {
		key = openai.KeyFromEnv(v)
		note = "Anthropic's Messages API; the caller's x-api-key, else the key in " + v
		if key == "" {
			note += ", which is NOT set"
		}
	}
	up, err := proxy.NewAnthropicUpstream(ep.BaseURL, key)
	if err != nil {
		return chosenUpstream{}, c.fail("--upstream-url: %v", err)
	}
	return chosenUpstream{upstream: up, note: note}, exitOK
}
