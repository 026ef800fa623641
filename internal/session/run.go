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
		m := sc.File.Model
		// The key comes from the environment, never from the file.
		return openai.New(openai.Config{BaseURL: m.BaseURL, Model: m.Model,
			APIKey: openai.KeyFromEnv(m.APIKeyEnv), NativeJSONSchema: m.NativeJSONSchema})
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
