package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	goopenai "github.com/sashabaranov/go-openai"
)

// Errors a caller may test for with errors.Is. Every error Generate returns
// has a message written for a person; these only classify it.
var (
	// ErrContextLength: the request is longer than the model's context.
	ErrContextLength = errors.New("the context is longer than the model accepts")
	// ErrAuth: the endpoint rejected the API key (401 or 403).
	ErrAuth = errors.New("the endpoint rejected the API key")
	// ErrModelNotFound: the endpoint does not know the model (404).
	ErrModelNotFound = errors.New("model not found")
)

// maxRetryAfter caps how long a Retry-After may hold a call: a server asking
// for an hour would look like a hang.
const maxRetryAfter = 60 * time.Second

// errAttemptTimeout is the cause of an attempt's context when CallTimeout
// ended it, to tell it from the caller's cancellation.
var errAttemptTimeout = errors.New("attempt timed out")

// classified is an error with a message for a person that still answers
// errors.Is for its class.
type classified struct {
	msg   string
	class error
}

func (e *classified) Error() string { return e.msg }
func (e *classified) Unwrap() error { return e.class }

// failure is what went wrong with one attempt.
type failure struct {
	err   error  // returned as is when the failure is not retried
	retry bool   // worth another attempt
	what  string // what the attempt got, for the error after the last one
	// retryAfter is the endpoint's Retry-After, when it sent one.
	retryAfter    time.Duration
	hasRetryAfter bool
}

// attemptInfo is what the recorder saw of one attempt's HTTP response.
// One goroutine uses it: http.Client.Do and the body reads run in the
// goroutine that makes the attempt.
type attemptInfo struct {
	status  int
	header  http.Header
	sawDone bool
}

type infoKey struct{}

// recorder is the HTTP client go-openai uses: it keeps each response's
// status and headers in the attempt's attemptInfo, since go-openai's errors
// drop the headers (Retry-After), and watches streams for [DONE].
type recorder struct{ next *http.Client }

// Do sends the request and records what came back.
func (r recorder) Do(req *http.Request) (*http.Response, error) {
	resp, err := r.next.Do(req)
	if info, ok := req.Context().Value(infoKey{}).(*attemptInfo); ok && resp != nil {
		info.status, info.header = resp.StatusCode, resp.Header
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &doneWatcher{ReadCloser: resp.Body, info: info}
		}
	}
	return resp, err
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
		if !f.retry {
			return nil, f.err
		}
		if n > m.maxRetries {
			return nil, fmt.Errorf("the model endpoint at %s failed %d attempts in a row; the last one got %s", m.baseURL, n, f.what)
		}
		wait := m.backoff(n)
		if f.hasRetryAfter {
			wait = f.retryAfter
		}
		m.log.Warn("model call failed; retrying", "endpoint", m.baseURL, "model", c.model,
			"attempt", n, "of", m.maxRetries+1, "got", f.what, "wait", wait)
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

// stopped is the error for a call the caller cancelled. It wraps ctx's
// error: the engine tells a child's timeout by context.DeadlineExceeded.
func stopped(ctx context.Context) error {
	return fmt.Errorf("the model call was stopped: %w", ctx.Err())
}

// attempt makes one call, bounded by CallTimeout.
func (m *Model) attempt(ctx context.Context, c *call, onDelta func(string)) (*result, *failure) {
	info := &attemptInfo{}
	actx, cancel := context.WithCancelCause(context.WithValue(ctx, infoKey{}, info))
	defer cancel(nil)
	timer := time.AfterFunc(m.callTimeout, func() { cancel(errAttemptTimeout) })
	defer timer.Stop()
	if onDelta != nil {
		return m.streamOnce(ctx, actx, c, info, timer, onDelta)
	}
	resp, err := m.client.CreateChatCompletion(actx, c.req)
	if err != nil {
		return nil, m.classify(ctx, actx, c, info, err)
	}
	res, ok := fromCompletion(resp)
	if !ok {
		return nil, &failure{err: fmt.Errorf("the model endpoint at %s answered with no choices: it may not speak the chat-completions format", m.baseURL)}
	}
	return res, nil
}

// classify turns an attempt's error into a failure: retried or not, and
// with a message that says what happened and what to do.
func (m *Model) classify(ctx, actx context.Context, c *call, info *attemptInfo, err error) *failure {
	if ctx.Err() != nil {
		return &failure{err: stopped(ctx)}
	}
	if errors.Is(context.Cause(actx), errAttemptTimeout) {
		what := fmt.Sprintf("no answer within %s", m.callTimeout)
		if info.header != nil && strings.HasPrefix(info.header.Get("Content-Type"), "text/event-stream") {
			what = fmt.Sprintf("no data for %s", m.callTimeout)
		}
		return &failure{retry: true, what: what}
	}

	var status int
	var msg, code, typ string
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr):
		msg, typ = apiErr.Message, apiErr.Type
		if apiErr.Code != nil {
			code = fmt.Sprint(apiErr.Code)
		}
		// 0 when it came as an error event inside a stream that had
		// started with 200.
		status = apiErr.HTTPStatusCode
	case errors.As(err, &reqErr):
		status = reqErr.HTTPStatusCode
		msg = bodyText(reqErr.Body)
	default:
		return m.transportFailure(err)
	}
	msg = m.clean(msg)

	if isContextLength(code, typ, msg) {
		return &failure{err: &classified{class: ErrContextLength,
			msg: fmt.Sprintf("%s: %s", ErrContextLength, orDefault(msg, "the endpoint gave no detail"))}}
	}
	said := ""
	if msg != "" {
		said = ": " + msg
	}
	switch {
	case status == 0:
		return &failure{retry: true, what: "an error in the middle of the stream" + said}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		text := fmt.Sprintf("%s (%d): set %s or the scenario's model.api_key_env", ErrAuth, status, DefaultKeyEnv)
		if status == http.StatusForbidden && msg != "" {
			// A 403 is sometimes about something else (a region, a
			// project's access): the endpoint's words help then. A 401's
			// words are left out: OpenAI's quote part of the key.
			text += " (the endpoint said: " + msg + ")"
		}
		return &failure{err: &classified{class: ErrAuth, msg: text}}
	case status == http.StatusNotFound:
		text := fmt.Sprintf("model %q not found at %s: check model.model", c.model, m.baseURL)
		if !strings.Contains(strings.ToLower(msg), "model") {
			text += "; if the name is right, check model.base_url too: it must be the root that /chat/completions is under, often ending in /v1"
		}
		return &failure{err: &classified{class: ErrModelNotFound, msg: text}}
	case status == http.StatusTooManyRequests && (code == "insufficient_quota" || typ == "insufficient_quota"):
		return &failure{err: fmt.Errorf("the endpoint refused the call: the account is out of quota (429)%s", said)}
	case retryableStatus(status):
		f := &failure{retry: true, what: fmt.Sprintf("%d %s%s", status, http.StatusText(status), said)}
		f.retryAfter, f.hasRetryAfter = retryAfter(info.header, time.Now())
		return f
	default:
		return &failure{err: fmt.Errorf("the endpoint refused the request (%d %s)%s", status, http.StatusText(status), said)}
	}
}

// transportFailure classifies an error without an HTTP status: a broken
// connection is retried; a request go-openai refused to send, or an answer
// that is not a chat completion, is not.
func (m *Model) transportFailure(err error) *failure {
	var netErr net.Error
	var synErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &synErr), errors.As(err, &typeErr):
		return &failure{err: fmt.Errorf("the model endpoint at %s answered with something that is not a chat completion: %s", m.baseURL, m.clean(err.Error()))}
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return &failure{retry: true, what: "a connection error (" + m.clean(err.Error()) + ")"}
	case errors.Is(err, goopenai.ErrTooManyEmptyStreamMessages):
		return &failure{retry: true, what: "a stream with no data in it"}
	}
	return &failure{err: fmt.Errorf("the model call failed: %s", m.clean(err.Error()))}
}

// retryableStatus: overload, rate limits and gateway trouble pass; the
// 52x codes are Cloudflare's (and 529 Anthropic's "overloaded").
func retryableStatus(s int) bool {
	switch s {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return s >= 520 && s <= 529
}

// contextLengthRE matches how servers word it: OpenAI and vLLM ("maximum
// context length"), llama.cpp ("exceeds the available context size"),
// others ("context window").
var contextLengthRE = regexp.MustCompile(`(?i)context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long`)

func isContextLength(code, typ, msg string) bool {
	if code == "context_length_exceeded" || strings.Contains(typ, "context") {
		return true
	}
	return contextLengthRE.MatchString(msg)
}

// retryAfter reads how long the endpoint asks to wait: retry-after-ms
// (OpenAI's), or Retry-After in seconds or as an HTTP date. It is capped
// by maxRetryAfter.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 {
			return 0, false
		}
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s < 0 {
				return 0, false
			}
			d = time.Duration(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = max(t.Sub(now), 0)
		} else {
			return 0, false
		}
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// bodyText is an error body that is not the usual JSON, made short enough
// to read in a receipt.
func bodyText(b []byte) string {
	var v struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
		Detail  any    `json:"detail"`
	}
	if json.Unmarshal(b, &v) == nil {
		switch {
		case v.Message != "":
			return v.Message
		case v.Error != nil:
			if s, ok := v.Error.(string); ok {
				return s
			}
			e, _ := json.Marshal(v.Error)
			return string(e)
		case v.Detail != nil:
			e, _ := json.Marshal(v.Detail)
			return string(e)
		}
	}
	return string(b)
}

// clean makes an endpoint's text fit an error message: no API key, one
// line, not too long.
func (m *Model) clean(s string) string {
	s = m.redact(s)
	s = strings.Join(strings.Fields(s), " ")
	const maxRunes = 300
	if utf8.RuneCountInString(s) > maxRunes {
		r := []rune(s)
		s = string(r[:maxRunes]) + "…"
	}
	return s
}

// bearerRE and skKeyRE catch keys an endpoint might echo: its own
// "Authorization: Bearer …", or an OpenAI-style secret.
var (
	bearerRE = regexp.MustCompile(`(?i)(bearer\s+)\S+`)
	skKeyRE  = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*]{6,}`)
)

// redactor returns a function that removes the key, and anything shaped
// like one, from text.
func redactor(key string) func(string) string {
	return func(s string) string {
		if key != "" {
			s = strings.ReplaceAll(s, key, "[redacted]")
		}
		s = bearerRE.ReplaceAllString(s, "${1}[redacted]")
		return skKeyRE.ReplaceAllString(s, "sk-[redacted]")
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
