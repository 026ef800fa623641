package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/retryafter"
)

// Defaults of an adapter's patience.
const (
	DefaultMaxRetries  = 3
	DefaultCallTimeout = 120 * time.Second
)

// MaxRetryAfter caps how long a Retry-After may hold a call: a server asking
// for an hour would look like a hang.
const MaxRetryAfter = 60 * time.Second

// errAttemptTimeout is the cause of an attempt's context when its timeout
// ended it, to tell it from the caller's cancellation.
var errAttemptTimeout = errors.New("attempt timed out")

// Retrier makes an adapter's attempts until one succeeds, a failure is not
// worth retrying, the retries are used up, or the context ends.
type Retrier struct {
	Endpoint *Endpoint
	// MaxRetries bounds the retries: 0 means DefaultMaxRetries, a negative
	// number none.
	MaxRetries int
	// Backoff is the wait before retry number n when the endpoint sends no
	// Retry-After; nil means DefaultBackoff.
	Backoff func(n int) time.Duration
	Log     *slog.Logger
	// Drop leaves out, from now on, an optional part of the request the
	// endpoint refused (Failure.Now); it reports whether that changed
	// anything. nil: nothing is optional.
	Drop func(part string) bool
}

// NewRetrier fills in a Retrier's defaults.
func NewRetrier(ep *Endpoint, maxRetries int, backoff func(int) time.Duration, log *slog.Logger) *Retrier {
	if maxRetries == 0 {
		maxRetries = DefaultMaxRetries
	} else if maxRetries < 0 {
		maxRetries = 0
	}
	if backoff == nil {
		backoff = DefaultBackoff
	}
	if log == nil {
		log = slog.Default()
	}
	return &Retrier{Endpoint: ep, MaxRetries: maxRetries, Backoff: backoff, Log: log}
}

// Do calls attempt until it returns nil, or a failure that ends the call.
// model names the call's model in the log; retrying, when set, is told of
// each retry; streamed says the attempts stream, for the advice after the
// last one.
func (r *Retrier) Do(ctx context.Context, model string, streamed bool, retrying func(delegation.ModelRetry), attempt func() *Failure) error {
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return Stopped(ctx)
		}
		f := attempt()
		if f == nil {
			return nil
		}
		if ctx.Err() != nil {
			return Stopped(ctx)
		}
		if f.Now && r.Drop != nil {
			// Made again at once without the refused part; the request is
			// built without it from now on, so this cannot loop.
			if r.Drop(f.Drop) {
				r.Log.Warn("the endpoint refused part of the request; leaving it out from now on",
					"endpoint", r.Endpoint.URL, "model", model, "refused", f.Drop)
			}
			n--
			continue
		}
		if !f.Retry {
			return f.Err
		}
		if n > r.MaxRetries {
			return r.gaveUp(n, f, streamed)
		}
		wait := r.Backoff(n)
		if f.HasRetryAfter {
			wait = f.RetryAfter
		}
		r.Log.Warn("model call failed; retrying", "endpoint", r.Endpoint.URL, "model", model,
			"attempt", n, "of", r.MaxRetries+1, "got", f.What, "wait", wait)
		if retrying != nil {
			retrying(delegation.ModelRetry{Attempt: n, Attempts: r.MaxRetries + 1, Cause: retryCause(f),
				Error: f.What, WaitMS: wait.Milliseconds()})
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return Stopped(ctx)
			case <-t.C:
			}
		}
	}
}

// gaveUp is the error after the last attempt, with advice for the causes
// that have some.
func (r *Retrier) gaveUp(n int, f *Failure, streamed bool) error {
	text := fmt.Sprintf("the model endpoint at %s failed %d attempts in a row; the last one got %s", r.Endpoint.URL, n, f.What)
	switch cause := retryCause(f); {
	case cause == CauseRateLimit:
		text += "; the endpoint is limiting the rate of calls: lower agent.max_concurrency, or wait and try again later"
	case cause == CauseServerError && streamed:
		text += `; if this server cannot stream (some cannot stream tool calls), turn streaming off with --no-stream or "stream": false in the scenario's model`
	case cause == CauseServerError:
		text += "; the server is failing: see its log"
	case cause == CauseTimeout:
		text += "; the endpoint is slow to answer: try again later, or use a faster model"
	}
	return errors.New(text)
}

// retryCause names a retried failure's cause in a few fixed words, for
// counting: the class the endpoint's error said, else its status's.
func retryCause(f *Failure) string {
	switch {
	case f.Cause != "":
		return f.Cause
	case f.Status == http.StatusTooManyRequests:
		return CauseRateLimit
	case f.Status >= 500:
		return CauseServerError
	case strings.HasPrefix(f.What, "no answer within"), strings.HasPrefix(f.What, "no data for"), f.Status == http.StatusRequestTimeout:
		return CauseTimeout
	}
	return CauseStream
}

// Stopped is the error for a call the caller cancelled. It wraps ctx's
// error: the engine tells a child's timeout by context.DeadlineExceeded.
func Stopped(ctx context.Context) error {
	return fmt.Errorf("the model call was stopped: %w", ctx.Err())
}

// Attempt bounds one attempt: its context ends after d, unless Reset
// re-arms it (a stream's next chunk).
type Attempt struct {
	Ctx    context.Context
	d      time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

// StartAttempt starts an attempt of at most d under ctx.
func StartAttempt(ctx context.Context, d time.Duration) *Attempt {
	actx, cancel := context.WithCancelCause(ctx)
	a := &Attempt{Ctx: actx, d: d, cancel: cancel}
	a.timer = time.AfterFunc(d, func() { cancel(errAttemptTimeout) })
	return a
}

// Reset gives the attempt d more from now.
func (a *Attempt) Reset() { a.timer.Reset(a.d) }

// End releases the attempt.
func (a *Attempt) End() {
	a.timer.Stop()
	a.cancel(nil)
}

// Interrupted is the failure of an attempt that the caller stopped (ctx) or
// that ran out of time, or nil when it was neither. header is the answer's,
// when one began: a stream's silence is said as such.
func (a *Attempt) Interrupted(ctx context.Context, header http.Header) *Failure {
	if ctx.Err() != nil {
		return &Failure{Err: Stopped(ctx)}
	}
	if errors.Is(context.Cause(a.Ctx), errAttemptTimeout) {
		what := fmt.Sprintf("no answer within %s", a.d)
		if header != nil && strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
			what = fmt.Sprintf("no data for %s", a.d)
		}
		return &Failure{Retry: true, Cause: CauseTimeout, What: what}
	}
	return nil
}

// BrokeOff keeps a broken stream from being retried once text was shown
// (sent): a retry would show the answer's start twice, and a different
// answer may come back.
func BrokeOff(sent bool, f *Failure) *Failure {
	if sent && f.Retry {
		return &Failure{Err: fmt.Errorf("the answer broke off after the model had started writing it (%s); "+
			"it was not retried because its first part was already shown", f.What)}
	}
	return f
}

// DefaultBackoff is exponential from 250ms, capped at 8s, with jitter so
// that siblings that failed together do not retry in lockstep.
func DefaultBackoff(attempt int) time.Duration {
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

// RetryAfter reads how long the endpoint asks to wait, capped by
// MaxRetryAfter.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return retryafter.Parse(h, now, MaxRetryAfter)
}

// Unfinished is the error for an answer that did not finish: cut off at a
// length limit, or stopped by a content filter; nil for one that did.
// field and reason are how the wire said why it stopped ("finish_reason"
// "length", "stop_reason" "max_tokens"); maxTokens is the agent's limit (0:
// none set); output the answer's tokens as the endpoint counted them (0:
// not reported). Neither is retried: the same request would be cut again.
func Unfinished(field, reason string, maxTokens, output int, content string) error {
	ended := ""
	if tail := LastWords(content, 60); tail != "" {
		ended = fmt.Sprintf("; it ended %q", tail)
	}
	switch reason {
	case "length", "max_tokens", "model_length", "model_context_window_exceeded":
		limit := "the model's own output limit"
		fix := "set a larger max_tokens for this agent if the model allows it, or ask for a shorter answer"
		if maxTokens > 0 {
			limit = fmt.Sprintf("max_tokens %d", maxTokens)
			fix = "raise max_tokens for this agent, or ask for a shorter answer"
		}
		if output > 0 {
			limit += fmt.Sprintf(", after %d tokens", output)
		}
		return Classed(ErrTruncated, fmt.Sprintf(`%s (%s %q: %s)%s: %s`, ErrTruncated, field, reason, limit, ended, fix))
	case "content_filter", "safety", "prohibited_content", "refusal":
		return Classed(ErrContentFilter, fmt.Sprintf(`%s (%s %q)%s: rephrase the prompt or the task; a retry would be withheld again`,
			ErrContentFilter, field, reason, ended))
	}
	return nil
}

// LastWords is the end of s, at most n runes, starting at a word.
func LastWords(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	t := string(r[len(r)-n:])
	if i := strings.IndexByte(t, ' '); i >= 0 && i < len(t)-1 {
		t = t[i+1:]
	}
	return "…" + t
}
