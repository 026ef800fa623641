package openai

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// The optional parts of a request an endpoint may refuse (rejectedOption).
const (
	optStreamOptions = "stream_options"
	optMaxTokens     = "max_tokens"
	optParallel      = "parallel_tool_calls"
)

// compat is what an endpoint was found to refuse; it is shared by the
// Model's concurrent calls and only ever turns on.
type compat struct {
	noStreamOptions     atomic.Bool // send no stream_options (and so get no usage when streaming)
	maxCompletionTokens atomic.Bool // send max_completion_tokens instead of max_tokens
	noParallel          atomic.Bool // send no parallel_tool_calls
}

// apply turns on what the endpoint refused; it reports whether anything
// changed, so a refusal never loops.
func (c *compat) apply(opt string) bool {
	switch opt {
	case optStreamOptions:
		return !c.noStreamOptions.Swap(true)
	case optMaxTokens:
		return !c.maxCompletionTokens.Swap(true)
	case optParallel:
		return !c.noParallel.Swap(true)
	}
	return false
}

// withRetries makes attempts as every remote adapter does (remote.Retrier).
func (m *Model) withRetries(ctx context.Context, c *call, onDelta func(string)) (*result, error) {
	var res *result
	err := m.retrier.Do(ctx, c.model, onDelta != nil, c.retrying, func() *remote.Failure {
		var f *remote.Failure
		res, f = m.attempt(ctx, c, onDelta)
		return f
	})
	return res, err
}

// attempt makes one call, bounded by CallTimeout.
func (m *Model) attempt(ctx context.Context, c *call, onDelta func(string)) (*result, *remote.Failure) {
	info := &attemptInfo{temperature: m.settings.Temperature}
	at := remote.StartAttempt(context.WithValue(ctx, infoKey{}, info), m.callTimeout)
	defer at.End()
	if onDelta != nil {
		return m.streamOnce(ctx, at, c, info, onDelta)
	}
	resp, err := m.client.CreateChatCompletion(at.Ctx, m.wireRequest(c, false))
	if err != nil || info.said != nil {
		return nil, m.classify(ctx, at, c, info, err)
	}
	res, ok := fromCompletion(resp)
	if !ok {
		return nil, &remote.Failure{Err: fmt.Errorf("the model endpoint at %s answered with no choices: it may not speak the chat-completions format; check model.base_url", m.baseURL)}
	}
	return res, nil
}
