package session

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/anthropic"
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/scenario"
)

// Endpoint is a model endpoint set by whoever runs the studio (serve's
// --endpoint, --model-url or config file; run's --endpoint): the name
// scenarios know it by, the API it speaks, where it is, the environment
// variable that holds its key, and the model to call when a scenario names
// none.
type Endpoint struct {
	Name string
	// Provider is the API it speaks: "" or scenario.ProviderOpenAI (chat
	// completions), or scenario.ProviderAnthropic (Anthropic's Messages
	// API). It decides the adapter of every call made through it.
	Provider string
	// BaseURL: "" means $OPENAI_BASE_URL, then OpenAI's (for Anthropic's
	// kind, $ANTHROPIC_BASE_URL, then Anthropic's).
	BaseURL string
	// KeyEnv: "" means none, or OPENAI_API_KEY at OpenAI's own URL
	// (ANTHROPIC_API_KEY at Anthropic's).
	KeyEnv string
	Model  string
	// NoStream: its calls wait for each whole answer (serve --no-stream),
	// for a server that cannot stream, or cannot stream tool calls.
	NoStream bool
}

// Label describes an endpoint for a person, without its key.
func (e Endpoint) Label() string {
	label := e.Name + ": "
	if e.Model != "" {
		label += e.Model + " at "
	}
	label += e.URL()
	if e.Anthropic() {
		label += " (" + scenario.ProviderAnthropic + ")"
	}
	return label
}

// Anthropic reports whether the endpoint speaks Anthropic's Messages API.
func (e Endpoint) Anthropic() bool { return e.Provider == scenario.ProviderAnthropic }

// Kind is the API the endpoint speaks, as a scenario's model.provider
// names it: openai unless it was said to be anthropic.
func (e Endpoint) Kind() string {
	if e.Anthropic() {
		return scenario.ProviderAnthropic
	}
	return scenario.ProviderOpenAI
}

// URL is the endpoint's base URL: $OPENAI_BASE_URL, then OpenAI's, when
// none was given ($ANTHROPIC_BASE_URL, then Anthropic's, for its kind).
func (e Endpoint) URL() string {
	switch {
	case e.BaseURL != "":
		return e.BaseURL
	case e.Anthropic():
		return anthropic.BaseURLFromEnv()
	}
	return openai.BaseURLFromEnv()
}

var (
	endpointNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
	// keyEnvRE is the one rule for the variables a key may be read from:
	// their names say they hold API keys, so no scenario or typo can send
	// another secret of the environment (a token, a cloud credential) to an
	// endpoint. The scenario schema says the same (keyEnv).
	keyEnvRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]*_API_KEY$`) })
)

// Check reports what is wrong with a configured endpoint, in words for the
// person who configured it.
func (e Endpoint) Check() error {
	if !endpointNameRE().MatchString(e.Name) {
		return fmt.Errorf("endpoint name %q: use letters, digits, '.', '_' and '-' (at most 64), e.g. local", e.Name)
	}
	if e.Provider != "" && e.Provider != scenario.ProviderOpenAI && e.Provider != scenario.ProviderAnthropic {
		return fmt.Errorf("endpoint %s: provider %q: give openai (chat completions, the default) or anthropic (Anthropic's Messages API), "+
			"as \"provider\" in a config file or before the URL on the command line (%s=anthropic:https://api.anthropic.com)", e.Name, e.Provider, e.Name)
	}
	if e.BaseURL != "" {
		u, err := url.Parse(e.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("endpoint %s: %q is not an absolute http(s) URL without a query, such as http://127.0.0.1:8080/v1", e.Name, e.BaseURL)
		}
	}
	if err := CheckKeyEnv(e.KeyEnv); err != nil {
		return fmt.Errorf("endpoint %s: %w", e.Name, err)
	}
	return nil
}

// CheckKeyEnv reports whether a key may be read from the variable name
// ("" for none), by keyEnvRE's rule.
func CheckKeyEnv(name string) error {
	if name != "" && !keyEnvRE().MatchString(name) {
		return fmt.Errorf("the key variable %q must be named like OPENAI_API_KEY (ending in _API_KEY)", name)
	}
	return nil
}

// ParseEndpoint reads an endpoint as the command line gives it:
// NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]], e.g. local=http://127.0.0.1:8080/v1,
// openrouter=https://openrouter.ai/api/v1,OPENROUTER_API_KEY,qwen/qwen3-32b
// or claude=anthropic:https://api.anthropic.com,,claude-sonnet-4-5. The
// provider is openai or anthropic; without one, openai.
func ParseEndpoint(spec string) (Endpoint, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		return Endpoint{}, fmt.Errorf("endpoint %q: write NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]], e.g. local=http://127.0.0.1:8080/v1", spec)
	}
	parts := strings.SplitN(rest, ",", 3)
	e := Endpoint{Name: strings.TrimSpace(name), BaseURL: strings.TrimSpace(parts[0])}
	if p, u, ok := strings.Cut(e.BaseURL, ":"); ok && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
		e.Provider, e.BaseURL = strings.TrimSpace(p), strings.TrimSpace(u)
	}
	if len(parts) > 1 {
		e.KeyEnv = strings.TrimSpace(parts[1])
	}
	if len(parts) > 2 {
		e.Model = strings.TrimSpace(parts[2])
	}
	if e.BaseURL == "" {
		return Endpoint{}, fmt.Errorf("endpoint %s: give its URL, e.g. %s=http://127.0.0.1:8080/v1", e.Name, e.Name)
	}
	return e, e.Check()
}

// Endpoints are where a session's model calls may go.
type Endpoints struct {
	List []Endpoint
	// Only keeps model calls to the listed endpoints, which a scenario
	// names (model.endpoint, subagents[].endpoint), the first being the
	// default: a scenario may give no URL and no key variable of its own.
	// serve sets it, because the scenarios it runs come from whoever can
	// reach it while the keys in its environment are its operator's. The
	// command line leaves it off: there the scenario's author is the one
	// whose keys they are.
	Only bool
}

// Lookup returns the endpoint of that name.
func (eps Endpoints) Lookup(name string) (Endpoint, bool) {
	for _, e := range eps.List {
		if e.Name == name {
			return e, true
		}
	}
	return Endpoint{}, false
}

func (eps Endpoints) names() string {
	if len(eps.List) == 0 {
		return "none"
	}
	names := make([]string, len(eps.List))
	for i, e := range eps.List {
		names[i] = e.Name
	}
	return strings.Join(names, ", ")
}

// target is where one agent's calls go.
type target struct {
	name               string // the configured endpoint's, if it is one
	provider           string // the API it speaks: a scenario's model.provider
	url, keyEnv, model string
	noStream           bool
}

// endpointRef is what a scenario says of one agent's endpoint, with the
// fields it said it in.
type endpointRef struct {
	name, url, keyEnv             string
	nameField, urlField, keyField string
}

func (r endpointRef) empty() bool { return r.name == "" && r.url == "" && r.keyEnv == "" }

// resolve finds where an agent's calls go; parent is where they go when
// the scenario says nothing for this agent (nil for the main agent).
// provider is the scenario's, the API of an endpoint given by URL; a named
// endpoint speaks its own.
func (eps Endpoints) resolve(r endpointRef, provider string, parent *target, errs *delegation.FieldErrors) target {
	if eps.Only {
		bad := false
		if r.url != "" {
			errs.Add(r.urlField, "this studio sends model calls only to the endpoints it was started with (%s); name one with %q instead of giving a URL, or run the scenario with 'studio run'", eps.names(), r.nameField)
			bad = true
		}
		if r.keyEnv != "" {
			errs.Add(r.keyField, "this studio reads only the key variables of the endpoints it was started with (%s); name one with %q instead of naming a variable", eps.names(), r.nameField)
			bad = true
		}
		if bad {
			return target{}
		}
	}
	if r.empty() && parent != nil {
		return *parent
	}
	if r.name == "" && eps.Only {
		if len(eps.List) == 0 {
			errs.Add(r.nameField, "this studio has no model endpoint: start it with --endpoint NAME=URL,KEY_ENV or --model-url URL --model NAME (see docs/models.md), or run the scenario with its script")
			return target{}
		}
		r.name = eps.List[0].Name
	}
	if r.name != "" {
		e, ok := eps.Lookup(r.name)
		if !ok {
			hint := "the endpoints are " + eps.names()
			if !eps.Only {
				hint = fmt.Sprintf("give it with --endpoint %s=URL[,KEY_ENV]", r.name)
			}
			errs.Add(r.nameField, "no endpoint %q: %s", r.name, hint)
			return target{}
		}
		t := target{name: e.Name, provider: e.Kind(), url: e.BaseURL, keyEnv: e.KeyEnv, model: e.Model, noStream: e.NoStream}
		if t.keyEnv != "" {
			if _, set := os.LookupEnv(t.keyEnv); !set {
				errs.Add(r.nameField, "endpoint %s reads its key from %s, which is not set in the studio's environment", e.Name, t.keyEnv)
			}
		}
		return t
	}
	t := target{provider: provider, url: r.url, keyEnv: r.keyEnv}
	if parent != nil {
		if t.url == "" {
			t.url, t.name, t.noStream, t.provider = parent.url, parent.name, parent.noStream, parent.provider
		}
		if t.keyEnv == "" && r.url == "" {
			t.keyEnv = parent.keyEnv
		}
		t.model = parent.model
	}
	if t.keyEnv != "" {
		if _, set := os.LookupEnv(t.keyEnv); !set {
			errs.Add(r.keyField, "%s is not set in the environment: export it, or remove %s to call the endpoint without a key", t.keyEnv, r.keyField)
		}
	}
	return t
}

// apiKey is the key a target's calls carry. A key named by its variable is
// read from it; with none named, OPENAI_API_KEY goes to OpenAI's own URL
// and nowhere else: a key is never sent to a host it was not meant for.
func (t target) apiKey() string {
	if v := t.keyVar(); v != "" {
		return openai.KeyFromEnv(v)
	}
	return ""
}

// keyVar is the variable a target's key is read from, or "" for none:
// with none named, OPENAI_API_KEY at OpenAI's URL, ANTHROPIC_API_KEY at
// Anthropic's (for an endpoint of its kind).
func (t target) keyVar() string {
	switch {
	case t.keyEnv != "":
		return t.keyEnv
	case t.provider == scenario.ProviderAnthropic:
		if anthropic.IsAnthropic(t.url) {
			return anthropic.DefaultKeyEnv
		}
	case isOpenAI(t.url):
		return openai.DefaultKeyEnv
	}
	return ""
}

// withheld names the variable of a key the rule above keeps from this
// target: OPENAI_API_KEY, set, at a URL that is not OpenAI's; "" otherwise.
// Its 401 then says so, and how to send it.
func (t target) withheld() string {
	if t.provider != scenario.ProviderAnthropic && t.keyVar() == "" && openai.KeyFromEnv(openai.DefaultKeyEnv) != "" {
		return openai.DefaultKeyEnv
	}
	return ""
}

// KeyVar is the environment variable the endpoint's key is read from, or
// "" when its calls carry none.
func (e Endpoint) KeyVar() string {
	return target{provider: e.Kind(), url: e.BaseURL, keyEnv: e.KeyEnv}.keyVar()
}

// isOpenAI reports whether base is OpenAI's own API, or the one the
// environment names in OPENAI_BASE_URL ("" means it): that one goes with
// OPENAI_API_KEY, as in OpenAI's SDKs, both being settings of whoever runs
// the studio, never of a scenario.
func isOpenAI(base string) bool {
	if base == "" || strings.TrimRight(base, "/") == strings.TrimRight(openai.BaseURLFromEnv(), "/") {
		return true
	}
	u, err := url.Parse(base)
	return err == nil && u.Scheme == "https" && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// Verify makes the endpoint's model once, so that a bad URL, a key
// variable that is not set, or OpenAI's own API without a key stops the
// studio at its start rather than at the first session.
func (e Endpoint) Verify() error {
	if err := e.Check(); err != nil {
		return err
	}
	if e.KeyEnv != "" {
		if _, set := os.LookupEnv(e.KeyEnv); !set {
			return fmt.Errorf("endpoint %s reads its key from %s, which is not set", e.Name, e.KeyEnv)
		}
	}
	model := e.Model
	if model == "" {
		model = "any" // the scenario names it
	}
	t := target{provider: e.Kind(), url: e.BaseURL, keyEnv: e.KeyEnv, model: model}
	var err error
	if e.Anthropic() {
		_, err = anthropicModel(t, scenario.Settings{}, nil)
	} else {
		_, err = openai.New(openai.Config{BaseURL: e.BaseURL, Model: model, APIKey: t.apiKey(), KeyEnv: t.keyVar()})
	}
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", e.Name, err)
	}
	return nil
}

// endpoints builds the remote models of a scenario, one per agent that
// needs its own: the main agent's endpoint (model.endpoint, or
// agent.base_url, model.base_url and model.api_key_env), and a subagent's
// own if it names one, otherwise its parent's, each with its agent's
// request settings. A named endpoint's calls speak its API; one given by
// URL speaks the scenario's model.provider. Under eps.Only a scenario can
// only name configured endpoints. Keys come from the environment, never
// from the file.
func endpoints(sc *scenario.Scenario, eps Endpoints, log *slog.Logger) (delegation.Model, error) {
	f := sc.File
	m := f.Model
	var errs delegation.FieldErrors
	mainRef := endpointRef{name: m.Endpoint, url: m.BaseURL, keyEnv: m.APIKeyEnv,
		nameField: "model.endpoint", urlField: "model.base_url", keyField: "model.api_key_env"}
	if f.Agent != nil && f.Agent.BaseURL != "" {
		mainRef.url, mainRef.urlField = f.Agent.BaseURL, "agent.base_url"
	}
	main := eps.resolve(mainRef, sc.Provider, nil, &errs)
	if m.Model != "" {
		main.model = m.Model
	}
	if main.model == "" && len(errs) == 0 {
		errs.Add("model.model", "name the model to call: endpoint %s has no model of its own", main.name)
	}
	subs := make([]target, len(f.Subagents))
	for i, sub := range f.Subagents {
		field := fmt.Sprintf("subagents[%d].", i)
		subs[i] = eps.resolve(endpointRef{name: sub.Endpoint, url: sub.BaseURL, keyEnv: sub.APIKeyEnv,
			nameField: field + "endpoint", urlField: field + "base_url", keyField: field + "api_key_env"}, sc.Provider, &main, &errs)
		if subs[i].model == "" {
			subs[i].model = main.model
		}
	}
	if len(errs) > 0 {
		return nil, errs.Capped()
	}

	type key struct {
		t        target
		settings string // the settings, encoded: a comparable key
	}
	models := map[key]delegation.Model{}
	get := func(t target, st scenario.Settings) (delegation.Model, error) {
		enc, _ := json.Marshal(st)
		k := key{t, string(enc)}
		if md, ok := models[k]; ok {
			return md, nil
		}
		var md delegation.Model
		var err error
		if t.provider == scenario.ProviderAnthropic {
			md, err = anthropicModel(t, st, log)
		} else {
			md, err = openai.New(openai.Config{BaseURL: t.url, Model: t.model, APIKey: t.apiKey(), KeyEnv: t.keyVar(), WithheldKeyEnv: t.withheld(),
				NativeJSONSchema: m.NativeJSONSchema, Settings: openaiSettings(st), NoStream: t.noStream, Logger: log})
		}
		if err != nil {
			return nil, err
		}
		models[k] = md
		return md, nil
	}
	r := &router{byName: map[string]delegation.Model{}}
	var err error
	if r.main, err = get(main, f.AgentSettings("main")); err != nil {
		return nil, err
	}
	// The built-in general-purpose subagent, unless declared, runs on the
	// main agent's endpoint with the main agent's settings, but its own
	// tool_choice (none).
	if r.fallback, err = get(main, f.AgentSettings("")); err != nil {
		return nil, err
	}
	for i, sub := range f.Subagents {
		if r.byName[sub.Name], err = get(subs[i], f.AgentSettings(sub.Name)); err != nil {
			return nil, fmt.Errorf("subagents[%d] (%s): %w", i, sub.Name, err)
		}
	}
	return r, nil
}

// anthropicModel is an agent's model on Anthropic's Messages API. Its key
// is the variable the scenario or endpoint names, or, with none named,
// ANTHROPIC_API_KEY at Anthropic's own API (or $ANTHROPIC_BASE_URL) and
// nowhere else (keyVar).
func anthropicModel(t target, st scenario.Settings, log *slog.Logger) (delegation.Model, error) {
	v := t.keyVar()
	key := ""
	if v != "" {
		key = openai.KeyFromEnv(v)
	}
	as := openaiSettings(st)
	return anthropic.New(anthropic.Config{BaseURL: t.url, Model: t.model, APIKey: key, KeyEnv: v, NoStream: t.noStream, Logger: log,
		Settings: anthropic.Settings{Stream: as.Stream, MaxTokens: as.MaxTokens, Temperature: as.Temperature, Seed: as.Seed,
			ToolChoice: as.ToolChoice, ParallelToolCalls: as.ParallelToolCalls}})
}
