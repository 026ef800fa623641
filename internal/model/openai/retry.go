package openai

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/retryafter"
)

// maxRetryAfter caps how long a Retry-After may hold a call: a server asking
// for an hour would look like a hang.
const maxRetryAfter = 60 * time.Second

// errAttemptTimeout is the cause of an attempt's context when CallTimeout
// ended it, to tell it from the caller's cancellation.
var errAttemptTimeout = errors.New("attempt timed out")

// failure is what went wrong with one attempt.
type failure struct {
	err    error  // returned as is when the failure is not retried
	retry  bool   // worth another attempt
	what   string // what the attempt got, for the error after the last one
	status int    // the HTTP status of a retried failure, for the advice after the last one
	// now: retry at once, without counting it as a retry, after dropping
	// drop (an optional part of the request the endpoint refused).
	now  bool
	drop string
	// retryAfter is the endpoint's Retry-After, when it sent one.
	retryAfter    time.Duration
	hasRetryAfter bool
}

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

// withRetries makes attempts until one succeeds, a failure is not worth
// retrying, the retries are used up, or ctx ends.
func (m *Model) withRetries(ctx context.Context, c *call, onDelta func(string)) (*result, error) {
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return nil, stopped(ctx)
		}
		res, f := m.attempt(ctx, c, onDelta)
		if f == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, stopped(ctx)
		}
		if f.now {
			// Made again at once without the refused part; the request is
			// built from compat, so this cannot loop.
			if m.compat.apply(f.drop) {
				m.log.Warn("the endpoint refused part of the request; leaving it out from now on",
					"endpoint", m.baseURL, "model", c.model, "refused", f.drop)
			}
			n--
			continue
		}
		if !f.retry {
			return nil, f.err
		}
		if n > m.maxRetries {
			return nil, m.gaveUp(n, f, onDelta != nil)
		}
		wait := m.backoff(n)
		if f.hasRetryAfter {
			wait = f.retryAfter
		}
		m.log.Warn("model call failed; retrying", "endpoint", m.baseURL, "model", c.model,
			"attempt", n, "of", m.maxRetries+1, "got", f.what, "wait", wait)
		if c.retrying != nil {
			c.retrying(delegation.ModelRetry{Attempt: n, Attempts: m.maxRetries + 1, Cause: retryCause(f),
				Error: f.what, WaitMS: wait.Milliseconds()})
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, stopped(ctx)
			case <-t.C:
			}
		}
	}
}

// gaveUp is the error after the last attempt, with advice for the causes
// that have some.
func (m *Model) gaveUp(n int, f *failure, streamed bool) error {
	text := fmt.Sprintf("the model endpoint at %s failed %d attempts in a row; the last one got %s", m.baseURL, n, f.what)
	switch {
	case f.status == http.StatusTooManyRequests:
		text += ": it is limiting the rate of calls; lower agent.max_concurrency, or try again later"
	case f.status >= 500 && streamed:
		text += `: if this server cannot stream (some cannot stream tool calls), turn streaming off with --no-stream or "stream": false in the scenario's model`
	case f.status >= 500:
		text += ": the server is failing; see its log"
	}
	return errors.New(text)
}

// retryCause names a retried failure's cause in a few fixed words, for
// counting.
func retryCause(f *failure) string {
	switch {
	case f.status == http.StatusTooManyRequests:
		return "rate_limit"
	case f.status >= 500:
		return "server_error"
	case strings.HasPrefix(f.what, "no answer within"), strings.HasPrefix(f.what, "no data for"), f.status == http.StatusRequestTimeout:
		return "timeout"
	case strings.HasPrefix(f.what, "a connection error"):
		return "connection"
	}
	return "stream"
}

// stopped is the error for a call the caller cancelled. It wraps ctx's
// error: the engine tells a child's timeout by context.DeadlineExceeded.
func stopped(ctx context.Context) error {
	return fmt.Errorf("the model call was stopped: %w", ctx.Err())
}

// attempt makes one call, bounded by CallTimeout.
func (m *Model) attempt(ctx context.Context, c *call, onDelta func(string)) (*result, *failure) {
	info := &attemptInfo{temperature: m.settings.Temperature}
	actx, cancel := context.WithCancelCause(context.WithValue(ctx, infoKey{}, info))
	defer cancel(nil)
	timer := time.AfterFunc(m.callTimeout, func() { cancel(errAttemptTimeout) })
	defer timer.Stop()
	if onDelta != nil {
		return m.streamOnce(ctx, actx, c, info, timer, onDelta)
	}
	resp, err := m.client.CreateChatCompletion(actx, m.wireRequest(c, false))
	if err != nil || info.said != nil {
		return nil, m.classify(ctx, actx, c, info, err)
	}
	res, ok := fromCompletion(resp)
	if !ok {
		return nil, &failure{err: fmt.Errorf("the model endpoint at %s answered with no choices: it may not speak the chat-completions format; check model.base_url", m.baseURL)}
	}
	return res, nil
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

// retryAfter reads how long the endpoint asks to wait, capped by
// maxRetryAfter.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return retryafter.Parse(h, now, maxRetryAfter)
}
