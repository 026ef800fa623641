// Package session runs sessions and computes the views of their logs: the
// delegation tree, each model call's context, totals per agent.
package session

import (
	"context"
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
func ModelFor(sc *scenario.Scenario) (delegation.Model, error) {
	switch sc.Provider {
	case scenario.ProviderScripted:
		return scripted.New(sc.Script), nil
	case scenario.ProviderOpenAI:
		return endpoints(sc)
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

// endpoints builds the OpenAI-compatible models of a scenario: the
// scenario's endpoint, the main agent's own base_url if it has one, and a
// subagent's own base_url and key variable if it has them (otherwise its
// parent's). Keys come from the environment, never from the file.
func endpoints(sc *scenario.Scenario) (delegation.Model, error) {
	f := sc.File
	m := f.Model
	type endpoint struct{ url, keyEnv string }
	models := map[endpoint]delegation.Model{}
	get := func(e endpoint) (delegation.Model, error) {
		if md, ok := models[e]; ok {
			return md, nil
		}
		md, err := openai.New(openai.Config{BaseURL: e.url, Model: m.Model,
			APIKey: openai.KeyFromEnv(e.keyEnv), NativeJSONSchema: m.NativeJSONSchema})
		if err != nil {
			return nil, err
		}
		models[e] = md
		return md, nil
	}
	main := endpoint{url: m.BaseURL, keyEnv: m.APIKeyEnv}
	if f.Agent != nil && f.Agent.BaseURL != "" {
		main.url = f.Agent.BaseURL
	}
	r := &router{byName: map[string]delegation.Model{}}
	var err error
	if r.fallback, err = get(main); err != nil {
		return nil, err
	}
	for _, sub := range f.Subagents {
		e := main
		if sub.BaseURL != "" {
			e.url = sub.BaseURL
		}
		if sub.APIKeyEnv != "" {
			e.keyEnv = sub.APIKeyEnv
		}
		if r.byName[sub.Name], err = get(e); err != nil {
			return nil, fmt.Errorf("subagents %s: %w", sub.Name, err)
		}
	}
	return r, nil
}

// router sends each agent's calls to its own endpoint: a subagent's by its
// name, the main agent's (and the built-in general-purpose one's) to the
// fallback.
type router struct {
	byName   map[string]delegation.Model
	fallback delegation.Model
}

var _ delegation.Model = (*router)(nil)

func (r *router) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if m := r.byName[req.Caller.Name]; m != nil && req.Caller.Name != "main" {
		return m.Generate(ctx, req)
	}
	return r.fallback.Generate(ctx, req)
}
