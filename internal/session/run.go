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
	"github.com/delegationstudio/studio/internal/pricing"
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
	// Endpoints are where a remote scenario's calls may go, when Model is
	// nil.
	Endpoints Endpoints
}

// ModelFor returns the model a scenario's answers come from, as the command
// line runs it: with no configured endpoints.
func ModelFor(sc *scenario.Scenario) (delegation.Model, error) {
	return ModelWith(sc, Endpoints{}, nil)
}

// ModelLogging is ModelFor with the logger endpoint adapters warn on (each
// retried attempt); nil means slog.Default().
func ModelLogging(sc *scenario.Scenario, log *slog.Logger) (delegation.Model, error) {
	return ModelWith(sc, Endpoints{}, log)
}

// ModelWith is ModelLogging whose openai calls go where eps allows.
func ModelWith(sc *scenario.Scenario, eps Endpoints, log *slog.Logger) (delegation.Model, error) {
	switch sc.Provider {
	case scenario.ProviderScripted:
		return scripted.New(sc.Script), nil
	case scenario.ProviderOpenAI, scenario.ProviderAnthropic:
		return endpoints(sc, eps, log)
	default:
		return nil, fmt.Errorf("model provider %q is not available in this build", sc.Provider)
	}
}

// Run runs a scenario to its end, handing every event to opts.Sink.
func Run(ctx context.Context, sc *scenario.Scenario, opts RunOptions) (*delegation.Result, error) {
	model := opts.Model
	if model == nil {
		var err error
		if model, err = ModelWith(sc, opts.Endpoints, opts.Logger); err != nil {
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
		Prices:    pricing.Lookup,
	})
	return eng.Run(ctx, sc.File.Prompt), nil
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
	return r.modelOf(req.Caller).Generate(ctx, req)
}

var _ delegation.Describer = (*router)(nil)

// Describe says what the model an agent's calls go to says of them.
func (r *router) Describe(c delegation.Caller, model string) (string, string) {
	if d, ok := r.modelOf(c).(delegation.Describer); ok {
		return d.Describe(c, model)
	}
	return model, ""
}

func (r *router) modelOf(c delegation.Caller) delegation.Model {
	if c.Name == "main" {
		return r.main
	}
	if m := r.byName[c.Name]; m != nil {
		return m
	}
	return r.fallback
}
