package openai

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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
// has a message written for a person, saying what happened and what to do;
// these only classify it. None of them is retried: a retry cannot fix it.
var (
	// ErrContextLength: the request is longer than the model's context.
	ErrContextLength = errors.New("the context is longer than the model accepts")
	// ErrAuth: the endpoint rejected the API key, or wanted one (401, 403).
	ErrAuth = errors.New("the endpoint rejected the API key")
	// ErrModelNotFound: the endpoint does not know the model, or the base
	// URL is not a chat-completions API (404).
	ErrModelNotFound = errors.New("model not found")
	// ErrQuota: the account has no quota or credit left.
	ErrQuota = errors.New("the account is out of quota")
	// ErrUnreachable: nothing answers at the base URL (refused, no such
	// host, TLS failure).
	ErrUnreachable = errors.New("the endpoint cannot be reached")
	// ErrTruncated: the answer was cut off at a length limit
	// (finish_reason "length").
	ErrTruncated = errors.New("the answer was cut off at the length limit")
	// ErrContentFilter: the endpoint's content filter withheld the answer
	// or refused the request.
	ErrContentFilter = errors.New("the endpoint's content filter withheld the answer")
	// ErrRefused: the endpoint refused the request for another reason (a
	// 4xx the request would get again).
	ErrRefused = errors.New("the endpoint refused the request")
)

// classified is an error with a message for a person that still answers
// errors.Is for its class.
type classified struct {
	msg   string
	class error
}

func (e *classified) Error() string { return e.msg }
func (e *classified) Unwrap() error { return e.class }

func fail(class error, format string, args ...any) *failure {
	return &failure{err: &classified{class: class, msg: fmt.Sprintf(format, args...)}}
}

// endpointError is what an endpoint said went wrong, read from whichever
// shape its body has: OpenAI's {"error": {"message", "type", "code"}};
// {"error": "Not Found", "message": "Cannot POST …", "status": 404} (Express
// and NestJS servers, Ollama's {"error": "…"}); vLLM's top-level
// {"object": "error", "message", "type", "code"}; FastAPI's {"detail": …};
// or plain text.
type endpointError struct {
	status     int // the HTTP status; 0 for an error sent inside a 200
	bodyStatus int // a status the body gives (status, statusCode, a numeric code)
	code, typ  string
	msg        string
	raw        string // the whole body, to find the name of a rejected parameter
}

// kind is the error's code and type, lower case, for matching.
func (e endpointError) kind() string { return strings.ToLower(e.code + " " + e.typ) }

// effectiveStatus is the HTTP status, or the body's when the error came
// with 200 (an error event in a stream).
func (e endpointError) effectiveStatus() int {
	if e.status != 0 {
		return e.status
	}
	return e.bodyStatus
}

func parseErrorBody(b []byte) endpointError {
	e := endpointError{raw: string(b)}
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		e.msg = plainText(b)
		return e
	}
	top := func(keys ...string) string {
		for _, k := range keys {
			if s := jsonText(doc[k]); s != "" {
				return s
			}
		}
		return ""
	}
	var inner map[string]json.RawMessage
	if raw := doc["error"]; len(raw) > 0 {
		if json.Unmarshal(raw, &inner) == nil {
			e.msg, e.typ = jsonText(inner["message"]), jsonText(inner["type"])
			e.code = jsonText(inner["code"])
			if st := jsonText(inner["status"]); e.typ == "" {
				e.typ = st // Google's {"error": {"code": 400, "status": "INVALID_ARGUMENT"}}
			}
			if e.msg == "" {
				e.msg = jsonText(inner["detail"])
			}
		} else {
			// {"error": "Not Found", "message": "Cannot POST …"}: the error
			// is a heading; the message, when there is one, the detail.
			e.msg = jsonText(raw)
			if m := top("message", "detail"); m != "" && m != e.msg {
				e.msg += ": " + m
			}
		}
	}
	if e.msg == "" {
		e.msg = top("message", "detail", "msg", "title")
	}
	if e.typ == "" {
		e.typ = top("type")
	}
	if e.code == "" {
		e.code = top("code")
	}
	for _, s := range []string{e.code, top("status"), top("statusCode"), top("status_code")} {
		if n, err := strconv.Atoi(s); err == nil && n >= 400 && n <= 599 {
			e.bodyStatus = n
			break
		}
	}
	if e.msg == "" && len(doc) > 0 {
		e.msg = string(bytes.TrimSpace(b))
	}
	return e
}

// jsonText reads a message-like JSON value as text: a string, a number, a
// list of either (joined), FastAPI's [{"loc": [...], "msg": "…"}], or an
// object, compacted.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		var parts []string
		for _, item := range list {
			var d struct {
				Loc []any  `json:"loc"`
				Msg string `json:"msg"`
			}
			if json.Unmarshal(item, &d) == nil && d.Msg != "" {
				var loc []string
				for _, l := range d.Loc {
					loc = append(loc, fmt.Sprint(l))
				}
				parts = append(parts, strings.TrimPrefix(strings.Join(loc, ".")+": ", ": ")+d.Msg)
			} else if t := jsonText(item); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "; ")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

var titleRE = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

// plainText is a body that is not JSON: an HTML page is named by its title.
func plainText(b []byte) string {
	t := strings.TrimSpace(string(b))
	if strings.HasPrefix(t, "<") {
		if m := titleRE.FindStringSubmatch(t); m != nil {
			return "an HTML page titled " + strconv.Quote(strings.TrimSpace(m[1]))
		}
		if strings.Contains(strings.ToLower(t[:min(len(t), 200)]), "<html") {
			return "an HTML page"
		}
	}
	return t
}

// contextLengthRE matches how servers word it: OpenAI and vLLM ("maximum
// context length"), llama.cpp ("exceeds the available context size"),
// others ("context window").
var contextLengthRE = regexp.MustCompile(`(?i)context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long`)

func isContextLength(e endpointError) bool {
	k := e.kind()
	if strings.Contains(k, "context_length") || strings.Contains(k, "context_window") || strings.Contains(e.typ, "context") {
		return true
	}
	return contextLengthRE.MatchString(e.msg)
}

// noToolsRE matches a server saying the model cannot call tools (Ollama:
// "… does not support tools"; others: "tools are not supported").
var noToolsRE = regexp.MustCompile(`(?i)(does not|doesn't) support tools|tools? (are|is) not supported|tool[ _]?call(s|ing)? (are|is)? ?not supported`)

// modelMissingRE reads a refusal that says the model does not exist, from
// a server that sends it as a 400 (mock-openai-api: "Model 'x' does not
// exist").
var modelMissingRE = regexp.MustCompile(`(?i)\bmodel\b.*\b(does not exist|doesn't exist|not found|unknown)`)

// authMsgRE reads a bare message ({"error": "Invalid API key"}) that has no
// code or type to classify it by.
var authMsgRE = regexp.MustCompile(`(?i)(invalid|incorrect|missing|no) (api[ _-]?)?key|unauthori[sz]ed|authentication`)

func hasAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// classify turns an attempt's error into a failure: retried or not, and
// with a message that says what happened and what to do. It reads what the
// endpoint sent (status and body, kept by the wire layer) rather than
// go-openai's error types, which lose a body whose "error" is a string.
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
	switch {
	case info.said != nil:
		return m.classifyEndpoint(*info.said, c, info)
	case info.status >= 400:
		e := parseErrorBody(info.body)
		e.status = info.status
		return m.classifyEndpoint(e, c, info)
	}
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) && apiErr.Message != "" {
		// An error event go-openai read that the wire layer did not see.
		code := ""
		if apiErr.Code != nil {
			code = fmt.Sprint(apiErr.Code)
		}
		return m.classifyEndpoint(endpointError{msg: apiErr.Message, typ: apiErr.Type, code: code}, c, info)
	}
	return m.transportFailure(err)
}

// classifyEndpoint classifies an error the endpoint sent.
func (m *Model) classifyEndpoint(e endpointError, c *call, info *attemptInfo) *failure {
	status := e.effectiveStatus()
	k := e.kind()
	msg := m.clean(e.msg)
	said := ""
	if msg != "" {
		said = " (the endpoint said: " + msg + ")"
	}
	statusText := func() string {
		if status == 0 {
			return "in the stream"
		}
		return fmt.Sprintf("%d %s", status, http.StatusText(status))
	}
	if opt := m.rejectedOption(e, c); opt != "" {
		return &failure{retry: true, now: true, drop: opt, what: fmt.Sprintf("%s rejected (%s)", opt, statusText())}
	}
	switch {
	case isContextLength(e):
		return fail(ErrContextLength, "%s: %s; shorten the task, or lower agent.summarization.max_tokens so the history is summarized sooner",
			ErrContextLength, orDefault(msg, "the endpoint gave no detail"))
	case hasAny(k, "insufficient_quota", "billing", "quota_exceeded", "credit"):
		return fail(ErrQuota, "the account behind the key in %s is out of quota or credit at %s (%s): add credit or use another key; a retry will not help%s",
			m.keyEnv, m.baseURL, statusText(), said)
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		hasAny(k, "invalid_api_key", "authentication", "unauthorized", "permission_denied", "invalid_authentication") ||
		(k == " " && authMsgRE.MatchString(e.msg)):
		return m.authFailure(status, msg)
	case status == http.StatusNotFound || hasAny(k, "model_not_found", "invalid_model") ||
		((status == http.StatusBadRequest || status == 0) && modelMissingRE.MatchString(e.msg)):
		text := fmt.Sprintf("model %q not found at %s: check model.model", c.model, m.baseURL)
		if !strings.Contains(strings.ToLower(msg), "model") {
			text += "; if the name is right, check model.base_url too: it must be the root that /chat/completions is under, often ending in /v1"
		}
		return fail(ErrModelNotFound, "%s%s", text, said)
	case hasAny(k, "content_filter", "content_policy"):
		return fail(ErrContentFilter, "the endpoint's content filter refused the request (%s): rephrase the prompt or the task; a retry would be refused again%s", statusText(), said)
	case status == http.StatusMethodNotAllowed:
		return fail(ErrModelNotFound, "%s does not take chat completions (%s): check model.base_url; it must be the root that /chat/completions is under, often ending in /v1%s",
			m.baseURL, statusText(), said)
	case (status == http.StatusBadRequest || status == 0) && noToolsRE.MatchString(msg):
		return fail(ErrRefused, "model %q at %s cannot call tools: pick a model with tool support (llama.cpp's server needs --jinja)%s", c.model, m.baseURL, said)
	case status == http.StatusTooManyRequests || retryableStatus(status) ||
		hasAny(k, "rate_limit", "overloaded", "server_error", "timeout", "unavailable", "internal"):
		f := &failure{retry: true, status: status, what: statusText() + orDefault(prefixed(": ", msg), "")}
		f.retryAfter, f.hasRetryAfter = retryAfter(info.header, time.Now())
		return f
	case status == 0 && !hasAny(k, "invalid", "bad_request", "not_supported", "unsupported", "not_found"):
		// An error event of a kind we do not know, before any text: the
		// stream may have broken on the server's side.
		return &failure{retry: true, what: "an error event in the stream" + prefixed(": ", msg)}
	}
	text := fmt.Sprintf("the endpoint at %s refused the request (%s)%s", m.baseURL, statusText(), prefixed(": ", msg))
	if s := m.settingNamed(msg); s != "" {
		text += fmt.Sprintf("; change or remove %s in this agent's settings", s)
	}
	return fail(ErrRefused, "%s", text)
}

// authFailure says whether the key was wrong or missing, and where it came
// from. A 401's words are left out: OpenAI's quote part of the key.
func (m *Model) authFailure(status int, msg string) *failure {
	code := ""
	if status != 0 {
		code = fmt.Sprintf(" (%d)", status)
	}
	var text string
	if m.hasKey {
		text = fmt.Sprintf("the endpoint at %s rejected the API key in %s%s: check that key, or name the variable that holds the right one with model.api_key_env",
			m.baseURL, m.keyEnv, code)
	} else {
		text = fmt.Sprintf("the endpoint at %s wants an API key%s and none was sent: set %s, or name the variable that holds it with model.api_key_env",
			m.baseURL, code, m.keyEnv)
	}
	if status == http.StatusForbidden && msg != "" {
		// A 403 is sometimes about something else (a region, a project's
		// access): the endpoint's words help then.
		text += " (the endpoint said: " + msg + ")"
	}
	return fail(ErrAuth, "%s", text)
}

// rejectedOption names an optional part of the request the endpoint refused
// and the request can do without, so the attempt is made again at once
// without it: stream_options (servers that do not know it), our default
// parallel_tool_calls, and max_tokens where the endpoint wants
// max_completion_tokens (OpenAI's reasoning models).
func (m *Model) rejectedOption(e endpointError, c *call) string {
	status := e.effectiveStatus()
	if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity &&
		!(status == 0 && hasAny(e.kind(), "invalid", "unsupported")) {
		return ""
	}
	raw := e.raw + " " + e.msg
	switch {
	case c.sentStreamOptions && strings.Contains(raw, "stream_options") && !m.compat.noStreamOptions.Load():
		return optStreamOptions
	case c.sentMaxTokens && strings.Contains(raw, "max_completion_tokens") && !m.compat.maxCompletionTokens.Load():
		return optMaxTokens
	case c.defaultParallel && strings.Contains(raw, "parallel_tool_calls") && !m.compat.noParallel.Load():
		return optParallel
	}
	return ""
}

// settingNamed is the request setting an endpoint's refusal names, if the
// agent set it.
func (m *Model) settingNamed(msg string) string {
	s := m.settings
	for _, st := range []struct {
		name string
		set  bool
	}{
		{"temperature", s.Temperature != nil}, {"max_tokens", s.MaxTokens > 0}, {"seed", s.Seed != nil},
		{"tool_choice", s.ToolChoice != ""}, {"parallel_tool_calls", s.ParallelToolCalls != nil},
	} {
		if st.set && strings.Contains(msg, st.name) {
			return st.name
		}
	}
	return ""
}

// transportFailure classifies an error without an HTTP status: a reset or
// cut connection is retried; a refused connection, an unknown host or a
// failed TLS handshake is not (nothing listens there: a retry finds the
// same), nor a request go-openai refused to send, nor an answer that is not
// a chat completion.
func (m *Model) transportFailure(err error) *failure {
	var netErr net.Error
	var dnsErr *net.DNSError
	var synErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	var unknownCA x509.UnknownAuthorityError
	var recErr tls.RecordHeaderError
	switch {
	case errors.As(err, &synErr), errors.As(err, &typeErr):
		return fail(ErrRefused, "the model endpoint at %s answered with something that is not a chat completion (%s): check model.base_url; it must be the root that /chat/completions is under, often ending in /v1",
			m.baseURL, m.clean(err.Error()))
	case errors.Is(err, syscall.ECONNREFUSED):
		return fail(ErrUnreachable, "nothing is listening at %s (connection refused): start the server, or fix model.base_url", m.baseURL)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fail(ErrUnreachable, "no host %q for %s: check model.base_url", dnsErr.Name, m.baseURL)
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &unknownCA):
		return fail(ErrUnreachable, "the TLS certificate of %s is not trusted (%s): fix the server's certificate, or use its http:// address on a trusted network", m.baseURL, m.clean(err.Error()))
	case errors.As(err, &recErr):
		return fail(ErrUnreachable, "%s does not speak TLS: use http:// in model.base_url", m.baseURL)
	case errors.Is(err, errStreamError):
		return &failure{retry: true, what: "an error event in the stream"}
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
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
// "Authorization: Bearer …", or an OpenAI-style secret (masked ones too).
// Neither reaches past a quote or a backslash, so that a JSON body they
// are applied to stays JSON.
var (
	bearerRE = regexp.MustCompile(`(?i)(bearer\s+)[^\s"\\]+`)
	skKeyRE  = regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*]{6,}`)
)

// Redacted is what a key is replaced with.
const Redacted = "[redacted]"

// Redactor returns a function that removes the key, and anything shaped
// like one, from text an endpoint sent back: an error's message, its body,
// a header. The engine's model calls and the recording endpoint's relay
// share it.
func Redactor(key string) func(string) string {
	return func(s string) string {
		if key != "" && strings.Contains(s, key) {
			s = string(RedactKey([]byte(s), key))
		}
		s = bearerRE.ReplaceAllString(s, "${1}"+Redacted)
		return skKeyRE.ReplaceAllString(s, "sk-"+Redacted)
	}
}

// RedactKey removes the key itself, and only it, from text: an answer's
// content, where something merely shaped like a key is the model's to say.
func RedactKey(b []byte, key string) []byte {
	if key == "" || !bytes.Contains(b, []byte(key)) {
		return b
	}
	return bytes.ReplaceAll(b, []byte(key), []byte(Redacted))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// prefixed is p+s, or "" when s is.
func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
