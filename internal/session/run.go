// Package session runs sessions and computes the views of their logs: the
// delegation tree, each model call's context, totals per agent.
package session

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/model/scripted"
	"github.com/delegationstudio/studio/internal/scenario"
)

// RunOptions are what a run needs besides its scenario.
type RunOptions struct {
	SessionID string
	Sink      delegation.Sink
	// Model overrides the scenario's model; nil means the scenario's own.
	Model  delegation.Model
	Now    func() time.Time
	Logger *slog.Logger
}

// ModelFor returns the model a scenario's answers come from.
func ModelFor(sc *scenario.Scenario) (delegation.Model, error) { return ModelLogging(sc, nil) }

// ModelLogging is ModelFor with the logger endpoint adapters warn on (each
// retried attempt); nil means slog.Default().
func ModelLogging(sc *scenario.Scenario, log *slog.Logger) (delegation.Model, error) {
	switch sc.Provider {
	case scenario.ProviderScripted:
		return scripted.New(sc.Script), nil
	case scenario.ProviderOpenAI:
		return endpoints(sc, log)
	default:
		return nil, fmt.Errorf("model provider %q is not available in this build", sc.Provider)
	}
}

// Run runs a scenario to its end, handing every event to opts.Sink.
func Run(ctx context.Context, sc *scenario.Scenario, opts RunOptions) (*delegation.Result, error) {
	model := opts.Model
	if model == nil {
		var err error
		if model, err = ModelFor(sc); err != nil {
			return nil, err
		}
	}
	if d := sc.Timeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	eng := delegation.New(delegation.Config{
		SessionID: opts.SessionID,
		Name:      sc.File.Name,
		Team:      sc.Team,
		Model:     model,
		Counter:   sc.Counter,
		Tokenizer: sc.Tokenizer(),
		Sink:      opts.Sink,
		Files:     sc.File.Files,
		Now:       opts.Now,
		Logger:    opts.Logger,
	})
	return eng.Run(ctx, sc.File.Prompt), nil
}

// endpoints builds the OpenAI-compatible models of a scenario, one per
// agent that needs its own: the scenario's endpoint, the main agent's own
// base_url if it has one, a subagent's own base_url and key variable if it
// has them (otherwise its parent's), each with its agent's request settings.
// Keys come from the environment, never from the file.
func endpoints(sc *scenario.Scenario, log *slog.Logger) (delegation.Model, error) {
	f := sc.File
	m := f.Model
	type endpoint struct {
		url, keyEnv string
		settings    string // the settings, encoded: a comparable key
	}
	models := map[endpoint]delegation.Model{}
	get := func(url, keyEnv string, st scenario.Settings) (delegation.Model, error) {
		enc, _ := json.Marshal(st)
		e := endpoint{url, keyEnv, string(enc)}
		if md, ok := models[e]; ok {
			return md, nil
		}
		cfg := openai.Config{BaseURL: url, Model: m.Model, APIKey: openai.KeyFromEnv(keyEnv), KeyEnv: keyEnv,
			NativeJSONSchema: m.NativeJSONSchema, Settings: openaiSettings(st), Logger: log}
		md, err := openai.New(cfg)
		if err != nil {
			return nil, err
		}
		models[e] = md
		return md, nil
	}
	url, keyEnv := m.BaseURL, m.APIKeyEnv
	if f.Agent != nil && f.Agent.BaseURL != "" {
		url = f.Agent.BaseURL
	}
	r := &router{byName: map[string]delegation.Model{}}
	var err error
	if r.main, err = get(url, keyEnv, f.AgentSettings("main")); err != nil {
		return nil, err
	}
	// The built-in general-purpose subagent, unless declared, runs on the
	// main agent's endpoint with the main agent's settings, but its own
	// tool_choice (none).
	if r.fallback, err = get(url, keyEnv, f.AgentSettings("")); err != nil {
		return nil, err
	}
	for i, sub := range f.Subagents {
		u, k := url, keyEnv
		if sub.BaseURL != "" {
			u = sub.BaseURL
		}
		if sub.APIKeyEnv != "" {
			k = sub.APIKeyEnv
		}
		if r.byName[sub.Name], err = get(u, k, f.AgentSettings(sub.Name)); err != nil {
			return nil, fmt.Errorf("subagents[%d] (%s): %w", i, sub.Name, err)
		}
	}
	return r, nil
}

// openaiSettings maps a scenario's settings to the adapter's.
func openaiSettings(s scenario.Settings) openai.Settings {
	out := openai.Settings{Stream: s.Stream, MaxTokens: s.MaxTokens, Temperature: s.Temperature, Seed: s.Seed,
		ParallelToolCalls: s.ParallelToolCalls}
	if s.ToolChoice != nil {
		out.ToolChoice = s.ToolChoice.Name
	}
	return out
}

// router sends each agent's calls to its own model: the main agent's, a
// declared subagent's by its name, and the built-in general-purpose one's to
// the fallback.
type router struct {
	main, fallback delegation.Model
	byName         map[string]delegation.Model
}

var _ delegation.Model = (*router)(nil)

func (r *router) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req.Caller.Name == "main" {
		return r.main.Generate(ctx, req)
	}
	if m := r.byName[req.Caller.Name]; m != nil {
		return m.Generate(ctx, req)
	}
	return r.fallback.Generate(ctx, req)
}
