// Package scenario reads the scenario file of formats.md §1: one JSON
// document with the team, the prompt, and where the model's answers come
// from. It checks the document against the published schema, then the
// delegation rules, and reports every problem at once, each at its field.
package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/scripted"
	"github.com/delegationstudio/studio/internal/pricing"
	"github.com/delegationstudio/studio/internal/tokens"
	"github.com/delegationstudio/studio/schema"
)

// File is the scenario document as written. Field names are the public
// format's; nil pointers and slices mean "not given".
type File struct {
	Schema      string            `json:"$schema,omitempty"`
	Name        string            `json:"name"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Prompt      string            `json:"prompt"`
	Tokenizer   string            `json:"tokenizer,omitempty"`
	Agent       *Agent            `json:"agent,omitempty"`
	Subagents   []Subagent        `json:"subagents,omitempty"`
	Files       map[string]string `json:"files,omitempty"`
	Model       *Model            `json:"model,omitempty"`
	Pricing     *Pricing          `json:"pricing,omitempty"`
	Script      json.RawMessage   `json:"script,omitempty"`
}

// Agent is the main agent and the team's settings.
type Agent struct {
	SystemPrompt   string         `json:"system_prompt,omitempty"`
	Tools          []string       `json:"tools,omitempty"`
	GeneralPurpose *bool          `json:"general_purpose,omitempty"`
	MaxSteps       int            `json:"max_steps,omitempty"`
	MaxConcurrency int            `json:"max_concurrency,omitempty"`
	FilesMerge     string         `json:"files_merge,omitempty"`
	Compat         *string        `json:"compat,omitempty"`
	Summarization  *Summarization `json:"summarization,omitempty"`
	TimeoutMS      int            `json:"timeout_ms,omitempty"`
	Model          string         `json:"model,omitempty"`
	BaseURL        string         `json:"base_url,omitempty"`
	Settings
}

// Summarization is when an agent's history is summarized: when its context
// reaches max_tokens (0 or absent: 170,000), keeping keep_messages (0 or
// absent: 6).
type Summarization struct {
	MaxTokens    int `json:"max_tokens,omitempty"`
	KeepMessages int `json:"keep_messages,omitempty"`
}

// Subagent is a subagent spec as written.
type Subagent struct {
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	SystemPrompt   string          `json:"system_prompt,omitempty"`
	Mode           string          `json:"mode,omitempty"`
	Tools          []string        `json:"tools,omitempty"`
	Model          string          `json:"model,omitempty"`
	Endpoint       string          `json:"endpoint,omitempty"`    // a configured endpoint of its own, by name; "" means its parent's
	BaseURL        string          `json:"base_url,omitempty"`    // an endpoint of its own (studio run only); "" means its parent's
	APIKeyEnv      string          `json:"api_key_env,omitempty"` // that endpoint's key variable; "" means the scenario's
	Skills         []string        `json:"skills,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	MaxSteps       int             `json:"max_steps,omitempty"`
	TimeoutMS      int             `json:"timeout_ms,omitempty"`
	Summarization  *Summarization  `json:"summarization,omitempty"`
	Pricing        *Pricing        `json:"pricing,omitempty"`
	Settings
}

// Pricing is what an agent's tokens cost, in dollars per million tokens,
// instead of the price table's for its model; or, written as a string, the
// name of a model of the price table (Model), to price the run as that
// model. CachedInput absent means the input price; so does CacheWrite, the
// price of input written to the prompt cache (Anthropic's surcharge; a
// table model has the table's).
type Pricing struct {
	Input       float64  `json:"input"`
	CachedInput *float64 `json:"cached_input,omitempty"`
	CacheWrite  *float64 `json:"cache_write,omitempty"`
	Output      float64  `json:"output"`
	Model       string   `json:"-"`
}

func (p *Pricing) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &p.Model) == nil {
		return nil
	}
	type plain Pricing
	return json.Unmarshal(b, (*plain)(p))
}

func (p Pricing) MarshalJSON() ([]byte, error) {
	if p.Model != "" {
		return json.Marshal(p.Model)
	}
	type plain Pricing
	return json.Marshal(plain(p))
}

// price is the engine's form: a table model's price, or the prices given.
// ok is false for a table model the table does not know.
func (p *Pricing) price(source string) (*delegation.Price, bool) {
	if p == nil {
		return nil, true
	}
	if p.Model != "" {
		tp, ok := pricing.Lookup(p.Model)
		if !ok {
			return nil, false
		}
		tp.Source = source + ", as " + tp.Source
		return &tp, true
	}
	out := &delegation.Price{Input: p.Input, CachedInput: p.Input, Output: p.Output, Source: source}
	if p.CachedInput != nil {
		out.CachedInput = *p.CachedInput
	}
	if p.CacheWrite != nil {
		out.CacheWrite = *p.CacheWrite // absent: 0, the input price (delegation.Price.Of)
	}
	return out, true
}

// Model says where the model's answers come from.
type Model struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Endpoint names an endpoint the studio was configured with; it implies
	// provider openai. Under serve it is the only way to pick one.
	Endpoint         string `json:"endpoint,omitempty"`
	BaseURL          string `json:"base_url,omitempty"`
	APIKeyEnv        string `json:"api_key_env,omitempty"`
	NativeJSONSchema bool   `json:"native_json_schema,omitempty"`
	Settings
}

// Settings are the request parameters of an agent's calls to an
// OpenAI-compatible endpoint, settable on the model (every agent), the main
// agent and each subagent. Unset fields are inherited: a subagent's from
// the main agent, the main agent's from the model; tool_choice, which is
// about an agent's own tools, is set per agent only.
type Settings struct {
	Stream            *bool       `json:"stream,omitempty"`
	MaxTokens         int         `json:"max_tokens,omitempty"`
	Temperature       *float64    `json:"temperature,omitempty"`
	Seed              *int        `json:"seed,omitempty"`
	ToolChoice        *ToolChoice `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`
}

// Over returns s with the fields it leaves unset taken from parent, except
// tool_choice.
func (s Settings) Over(parent Settings) Settings {
	if s.Stream == nil {
		s.Stream = parent.Stream
	}
	if s.MaxTokens == 0 {
		s.MaxTokens = parent.MaxTokens
	}
	if s.Temperature == nil {
		s.Temperature = parent.Temperature
	}
	if s.Seed == nil {
		s.Seed = parent.Seed
	}
	if s.ParallelToolCalls == nil {
		s.ParallelToolCalls = parent.ParallelToolCalls
	}
	return s
}

// ToolChoice is "auto", "none", "required", or the name of a tool; in the
// file it is that string or OpenAI's {"type": "function", "function":
// {"name": …}}.
type ToolChoice struct{ Name string }

// The tool_choice values that name no tool.
var toolChoiceModes = []string{"auto", "none", "required"}

func (c *ToolChoice) UnmarshalJSON(b []byte) error {
	if json.Unmarshal(b, &c.Name) == nil {
		return nil
	}
	var obj struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	c.Name = obj.Function.Name
	return nil
}

func (c ToolChoice) MarshalJSON() ([]byte, error) {
	for _, m := range toolChoiceModes {
		if c.Name == m {
			return json.Marshal(c.Name)
		}
	}
	return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
}

// AgentSettings returns the settings of the named agent ("main" or a
// subagent's name), with what it inherits. The built-in general-purpose
// subagent, when not declared, has the main agent's.
func (f File) AgentSettings(name string) Settings {
	var model, main Settings
	if f.Model != nil {
		model = f.Model.Settings
	}
	if f.Agent != nil {
		main = f.Agent.Settings
	}
	main = main.Over(model)
	if name == "main" {
		return main
	}
	for _, s := range f.Subagents {
		if s.Name == name {
			return s.Settings.Over(main)
		}
	}
	main.ToolChoice = nil
	return main
}

// Providers.
const (
	ProviderScripted = "scripted"
	ProviderOpenAI   = "openai"
	// ProviderAnthropic is Anthropic's Messages API, by URL (model.base_url,
	// "" meaning Anthropic's own) and key variable.
	ProviderAnthropic = "anthropic"
)

// ENoScript is the code of the problem that a scripted scenario has no
// script: a team being edited may lack one and still be kept.
const ENoScript = "no_script"

// Scenario is a checked scenario, ready to run.
type Scenario struct {
	File     File
	Raw      json.RawMessage // the document exactly as given, compacted: "the scenario exactly as run"
	Team     *delegation.Team
	Script   *scripted.Script // nil without a script
	Counter  tokens.Counter
	Provider string
	// Warnings are problems that do not stop the scenario from running.
	Warnings delegation.FieldErrors
}

// Parse checks a scenario document and builds it. The error, when there is
// one, is a delegation.FieldErrors with every problem found.
func Parse(doc []byte) (*Scenario, error) {
	return ParseContext(context.Background(), doc)
}

// ParseContext is Parse that gives up, with ctx's error, when ctx ends: the
// client that sent the document went away.
func ParseContext(ctx context.Context, doc []byte) (*Scenario, error) {
	return ParseWith(ctx, doc, Flags{})
}

// ParseWith is ParseContext with the command line's flags set over the
// document: it is checked against the schema as written, the flags given
// then win over its fields, and the rules are checked once, on the result,
// which is the scenario as run. The errors name the file's fields.
func ParseWith(ctx context.Context, doc []byte, fl Flags) (*Scenario, error) {
	errs, err := schema.ValidateScenarioContext(ctx, doc)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		out := make(delegation.FieldErrors, len(errs))
		reported := map[string]bool{}
		for i, e := range errs {
			out[i] = delegation.FieldError{Field: e.Field, Message: e.Message}
			reported[e.Field] = true
		}
		// Report the rules' problems too when the document can still be
		// read and the list is not full, so a person fixes everything in
		// one pass. The script's shape is the schema's to report.
		var f File
		if len(errs) <= schema.MaxErrors && json.Unmarshal(doc, &f) == nil {
			_, fe := checkTeam(f)
			for _, e := range fe {
				if !reported[e.Field] {
					out = append(out, e)
				}
			}
		}
		return nil, out.Capped()
	}
	var f File
	if err := json.Unmarshal(doc, &f); err != nil {
		// The schema accepted it, so this is a mismatch between the schema
		// and File: a bug, reported plainly.
		return nil, delegation.FieldErrors{{Message: fmt.Sprintf("cannot read the scenario: %v", err)}}
	}
	if !fl.zero() {
		return Build(fl.over(f), nil)
	}
	var raw bytes.Buffer
	if err := json.Compact(&raw, doc); err != nil {
		return nil, delegation.FieldErrors{{Message: fmt.Sprintf("cannot read the scenario: %v", err)}}
	}
	return Build(f, raw.Bytes())
}

// Flags are what studio run's command line sets over a scenario file
// (--model-url, --model, --api-key-env, --no-stream). Each one given wins
// over the fields it names; the file's other fields stay. Any of the first
// three runs the scenario against a model: a provider the file leaves
// unset, or scripted, becomes openai (OpenAI-compatible) and the script is
// set aside; openai and anthropic stay.
type Flags struct {
	BaseURL   string // the main agent's endpoint, over model.base_url, model.endpoint and agent.base_url
	Model     string // over model.model
	APIKeyEnv string // over model.api_key_env
	// FallbackURL is the URL of an openai provider that neither the flags
	// nor the file give one ($OPENAI_BASE_URL, then OpenAI's), for the
	// scenario as run to say where its calls went.
	FallbackURL string
	NoStream    bool // every agent's stream, off
}

func (fl Flags) zero() bool { return fl == Flags{} }

// over returns f with the flags set over it.
func (fl Flags) over(f File) File {
	if fl.BaseURL != "" || fl.Model != "" || fl.APIKeyEnv != "" {
		m := Model{}
		if f.Model != nil {
			m = *f.Model
		}
		if m.Provider == "" || m.Provider == ProviderScripted {
			m.Provider = ProviderOpenAI
		}
		f.Script = nil
		if fl.BaseURL != "" {
			m.BaseURL, m.Endpoint = fl.BaseURL, ""
			if f.Agent != nil && f.Agent.BaseURL != "" {
				a := *f.Agent
				a.BaseURL, f.Agent = "", &a
			}
		}
		if fl.Model != "" {
			m.Model = fl.Model
		}
		if fl.APIKeyEnv != "" {
			m.APIKeyEnv = fl.APIKeyEnv
		}
		if m.Provider == ProviderOpenAI && m.BaseURL == "" && m.Endpoint == "" && (f.Agent == nil || f.Agent.BaseURL == "") {
			m.BaseURL = fl.FallbackURL
		}
		f.Model = &m
	}
	if fl.NoStream {
		f = f.withoutStreaming()
	}
	return f
}

// Build checks a decoded scenario; raw is its document, kept for the trace
// (nil means f re-encoded).
func Build(f File, raw json.RawMessage) (*Scenario, error) {
	sc, errs := checkTeam(f)
	sc.Raw = raw
	if sc.Raw == nil {
		sc.Raw, _ = json.Marshal(f)
	}
	errs = append(errs, sc.checkModel()...)
	if len(errs) > 0 {
		return nil, errs.Capped()
	}
	return sc, nil
}

// checkTeam checks what the delegation rules govern: the tokenizer, the team
// and the files.
func checkTeam(f File) (*Scenario, delegation.FieldErrors) {
	var errs delegation.FieldErrors
	sc := &Scenario{File: f}
	counter, err := tokens.Get(f.Tokenizer)
	if err != nil {
		errs.Add("tokenizer", "%v", err)
	}
	sc.Counter = counter

	team, err := delegation.BuildTeam(f.TeamSpec())
	var fe delegation.FieldErrors
	if errors.As(err, &fe) {
		errs = append(errs, fe...)
	} else if err != nil {
		errs.Add("", "%v", err)
	}
	sc.Team = team
	if team != nil {
		sc.Warnings = append(sc.Warnings, team.Warnings...)
	}
	errs = append(errs, checkPricing(f)...)
	for _, p := range slices.Sorted(maps.Keys(f.Files)) {
		if err := delegation.CheckPath(p); err != nil {
			errs.Add("files"+schema.Key(p), "%v", err)
		}
	}
	return sc, errs
}

// checkPricing checks that a pricing naming a model names one of the price
// table's.
func checkPricing(f File) delegation.FieldErrors {
	var errs delegation.FieldErrors
	check := func(field string, p *Pricing) {
		if _, ok := p.price(""); !ok {
			errs.Add(field, "the price table (of %s) has no model %q: name one of %s, or give the prices as {\"input\": …, \"cached_input\": …, \"cache_write\": …, \"output\": …} in dollars per million tokens",
				pricing.AsOf(), p.Model, strings.Join(pricing.Default().Names(), ", "))
		}
	}
	check("pricing", f.Pricing)
	for i, s := range f.Subagents {
		check(fmt.Sprintf("subagents[%d].pricing", i), s.Pricing)
	}
	return errs
}

// checkModel checks where the answers come from: the provider, and the
// script for the scripted model.
func (sc *Scenario) checkModel() delegation.FieldErrors {
	var errs delegation.FieldErrors
	f := sc.File
	sc.Provider = ProviderScripted
	if f.Model != nil && f.Model.Provider != "" {
		sc.Provider = f.Model.Provider
	} else if f.Model != nil && f.Model.Endpoint != "" {
		sc.Provider = ProviderOpenAI
	}
	if m := f.Model; m != nil && m.Endpoint != "" && m.BaseURL != "" {
		errs.Add("model.base_url", "give the endpoint by name (model.endpoint) or by URL (model.base_url), not both")
	}
	for i, sub := range f.Subagents {
		if sub.Endpoint != "" && sub.BaseURL != "" {
			errs.Add(fmt.Sprintf("subagents[%d].base_url", i), "give the endpoint by name (endpoint) or by URL (base_url), not both")
		}
	}
	script := bytes.TrimSpace(f.Script)
	switch sc.Provider {
	case ProviderScripted:
		if len(script) == 0 || bytes.Equal(script, []byte("null")) {
			errs = append(errs, delegation.FieldError{Field: "script", Code: ENoScript,
				Message: `the scripted model needs a script: add "script": {"main": [{"content": "…"}]}, or set model.provider to "openai"`})
			break
		}
		parsed, serrs := scripted.Parse(f.Script)
		errs = append(errs, serrs...)
		sc.Script = parsed
		if sc.Team != nil && parsed != nil {
			for _, key := range parsed.Keys() {
				if key != "main" && sc.Team.Subagent(key) == nil {
					sc.Warnings.Add("script."+key, "names no agent of the team (the agents are main, %s); its turns will never be played", strings.Join(sc.Team.Names(), ", "))
				}
			}
		}
	case ProviderOpenAI:
		// A named endpoint may bring its own model; that is checked when
		// the session starts, against the endpoints it knows.
		if f.Model.Model == "" && f.Model.Endpoint == "" {
			errs.Add("model.model", `name the model to call, e.g. "gpt-4.1-mini"`)
		}
		errs = append(errs, sc.checkToolChoices()...)
	case ProviderAnthropic:
		// A named endpoint speaks its own API and may bring its own model.
		switch {
		case f.Model.Model == "" && f.Model.Endpoint == "":
			errs.Add("model.model", `name the model to call, e.g. "claude-sonnet-4-5"`)
		case f.Model.NativeJSONSchema:
			errs.Add("model.native_json_schema", "is for OpenAI-compatible endpoints; remove it (the structured answer comes through its tool)")
		}
		errs = append(errs, sc.checkToolChoices()...)
	default:
		errs.Add("model.provider", "unknown provider '%s'; use 'scripted', 'openai' or 'anthropic'", sc.Provider)
	}
	return errs
}

// checkToolChoices checks that a tool_choice naming a tool names one of its
// agent's tools.
func (sc *Scenario) checkToolChoices() delegation.FieldErrors {
	var errs delegation.FieldErrors
	if sc.Team == nil {
		return nil
	}
	check := func(field string, c *ToolChoice, tools []delegation.ToolDef) {
		if c == nil {
			return
		}
		names := []string{}
		for _, t := range tools {
			if t.Name == c.Name {
				return
			}
			names = append(names, t.Name)
		}
		for _, m := range toolChoiceModes {
			if c.Name == m {
				return
			}
		}
		errs.Add(field, "%q is neither auto, none nor required, nor one of this agent's tools (%s)", c.Name, strings.Join(names, ", "))
	}
	if a := sc.File.Agent; a != nil {
		check("agent.tool_choice", a.ToolChoice, sc.Team.MainTools())
	}
	for i, s := range sc.File.Subagents {
		check(fmt.Sprintf("subagents[%d].tool_choice", i), s.ToolChoice, sc.Team.SubagentTools(s.Name))
	}
	return errs
}

// TeamSpec turns the file's agent and subagents into the engine's specs.
func (f File) TeamSpec() delegation.TeamSpec {
	var ts delegation.TeamSpec
	if a := f.Agent; a != nil {
		ts.Main = delegation.MainSpec{
			SystemPrompt:     a.SystemPrompt,
			Tools:            a.Tools,
			NoGeneralPurpose: a.GeneralPurpose != nil && !*a.GeneralPurpose,
			Model:            a.Model,
			MaxSteps:         a.MaxSteps,
			MaxConcurrency:   a.MaxConcurrency,
			FilesMerge:       delegation.Merge(a.FilesMerge),
		}
		ts.Main.Summarization = a.Summarization.spec()
		if a.Compat != nil {
			ts.Main.Compat = delegation.Compat(*a.Compat)
		}
	}
	if f.Model != nil && ts.Main.Model == "" {
		ts.Main.Model = f.Model.Model
	}
	ts.Main.Pricing, _ = f.Pricing.price("scenario")
	for _, s := range f.Subagents {
		ts.Subagents = append(ts.Subagents, delegation.Spec{
			Name: s.Name, Description: s.Description, SystemPrompt: s.SystemPrompt,
			Mode: delegation.Mode(s.Mode), Tools: s.Tools, Model: s.Model, Skills: s.Skills,
			ResponseFormat: s.ResponseFormat, MaxSteps: s.MaxSteps,
			Timeout:       time.Duration(s.TimeoutMS) * time.Millisecond,
			Summarization: s.Summarization.spec(),
		})
		ts.Subagents[len(ts.Subagents)-1].Pricing, _ = s.Pricing.price("subagent " + s.Name)
	}
	return ts
}

// spec is the engine's form; nil means the defaults.
func (s *Summarization) spec() delegation.Summarization {
	if s == nil {
		return delegation.Summarization{}
	}
	return delegation.Summarization{MaxTokens: s.MaxTokens, KeepMessages: s.KeepMessages}
}

// Timeout is the whole session's time limit, or 0 for none.
func (sc *Scenario) Timeout() time.Duration {
	if sc.File.Agent == nil {
		return 0
	}
	return time.Duration(sc.File.Agent.TimeoutMS) * time.Millisecond
}

// Tokenizer is the scenario's tokenizer name.
func (sc *Scenario) Tokenizer() string { return sc.Counter.Name() }

// WithEndpoint points a scenario at a model endpoint: one the studio was
// configured with, by name (m.Endpoint), or one by URL (m.BaseURL, ""
// meaning OpenAI's, with m.APIKeyEnv). m.Provider is the API it speaks
// (unset: openai). Its team and prompt stay, its script is set aside. A URL
// needs a model; with none, a named endpoint's own is used. Unset, the key
// variable (with a URL) and native_json_schema are the scenario's own.
func WithEndpoint(sc *Scenario, m Model) (*Scenario, error) {
	if m.Model == "" && m.Endpoint == "" {
		return nil, delegation.FieldErrors{{Field: "model.model", Message: "name the model to call at the endpoint"}}
	}
	f := sc.File
	if m.Provider == "" {
		m.Provider = ProviderOpenAI
	}
	if f.Model != nil {
		if m.APIKeyEnv == "" && m.Endpoint == "" {
			m.APIKeyEnv = f.Model.APIKeyEnv
		}
		m.NativeJSONSchema = (m.NativeJSONSchema || f.Model.NativeJSONSchema) && m.Provider == ProviderOpenAI
		m.Settings = f.Model.Settings
	}
	f.Model, f.Script = &m, nil
	return rebuild(f)
}

// WithoutStreaming turns streaming off for every agent, whatever the file
// says (--no-stream): for a server that cannot stream, or cannot stream
// tool calls. The scenario as run, in the trace, says so.
func WithoutStreaming(sc *Scenario) (*Scenario, error) {
	return rebuild(sc.File.withoutStreaming())
}

// withoutStreaming is f with every agent's streaming off.
func (f File) withoutStreaming() File {
	off := false
	if f.Model == nil {
		f.Model = &Model{}
	} else {
		m := *f.Model
		f.Model = &m
	}
	f.Model.Stream = &off
	if f.Agent != nil {
		a := *f.Agent
		a.Stream, f.Agent = nil, &a
	}
	subs := make([]Subagent, len(f.Subagents))
	for i, s := range f.Subagents {
		s.Stream = nil
		subs[i] = s
	}
	if f.Subagents != nil {
		f.Subagents = subs
	}
	return f
}

func rebuild(f File) (*Scenario, error) {
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return Build(f, raw)
}

// WithCompat runs a scenario with a team setting compat (delegation.md §9):
// its script, team and prompt stay; the settings compat switches are left
// to it (files_merge, max_concurrency). An empty compat restores ours.
func WithCompat(sc *Scenario, compat delegation.Compat) (*Scenario, error) {
	f := sc.File
	a := Agent{}
	if f.Agent != nil {
		a = *f.Agent
	}
	a.FilesMerge, a.MaxConcurrency, a.Compat = "", 0, nil
	if compat != delegation.CompatNone {
		c := string(compat)
		a.Compat = &c
	}
	f.Agent = &a
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return Build(f, raw)
}
