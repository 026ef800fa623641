// Package remote holds what every adapter of a model behind an HTTP API
// shares, whatever the wire format it speaks (OpenAI's chat completions,
// Anthropic's messages): the classes of error a caller may test for, the
// reading of what an endpoint said went wrong into a sentence for a person,
// which failures a retry can fix and the retries themselves, and the rule
// that an API key never appears in an error or a log line.
package remote

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// Errors a caller may test for with errors.Is. Every error an adapter
// returns has a message written for a person, saying what happened and what
// to do; these only classify it. None of them is retried: a retry cannot fix
// it.
var (
	// ErrContextLength: the request is longer than the model's context.
	ErrContextLength = errors.New("the context is longer than the model accepts")
	// ErrAuth: the endpoint rejected the API key, or wanted one (401, 403).
	ErrAuth = errors.New("the endpoint rejected the API key")
	// ErrModelNotFound: the endpoint does not know the model, or the base
	// URL is not the API the adapter speaks (404).
	ErrModelNotFound = errors.New("model not found")
	// ErrQuota: the account has no quota or credit left.
	ErrQuota = errors.New("the account is out of quota")
	// ErrUnreachable: nothing answers at the base URL (refused, no such
	// host, TLS failure).
	ErrUnreachable = errors.New("the endpoint cannot be reached")
	// ErrTruncated: the answer was cut off at a length limit.
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

// Classed is an error saying msg that errors.Is finds to be of class.
func Classed(class error, msg string) error { return &classified{class: class, msg: msg} }

// Fail is a failure not worth retrying, of class.
func Fail(class error, format string, args ...any) *Failure {
	return &Failure{Err: Classed(class, fmt.Sprintf(format, args...))}
}

// Failure is what went wrong with one attempt.
type Failure struct {
	Err    error  // returned as is when the failure is not retried
	Retry  bool   // worth another attempt
	What   string // what the attempt got, for the error after the last one
	Status int    // the HTTP status of a retried failure, for the advice after the last one
	// Cause is a retried failure's class (one of the Cause* codes), when
	// what the endpoint sent says it; "" leaves it to the status.
	Cause string
	// Now: retry at once, without counting it as a retry, after dropping
	// Drop (an optional part of the request the endpoint refused).
	Now  bool
	Drop string
	// RetryAfter is the endpoint's Retry-After, when it sent one.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// EndpointError is what an endpoint said went wrong, read from whichever
// shape its body has: OpenAI's {"error": {"message", "type", "code"}};
// Anthropic's {"type": "error", "error": {"type", "message"}};
// {"error": "Not Found", "message": "Cannot POST …", "status": 404} (Express
// and NestJS servers, Ollama's {"error": "…"}); vLLM's top-level
// {"object": "error", "message", "type", "code"}; FastAPI's {"detail": …};
// or plain text.
type EndpointError struct {
	Status     int // the HTTP status; 0 for an error sent inside a 200
	BodyStatus int // a status the body gives (status, statusCode, a numeric code)
	Code, Type string
	Msg        string
	Raw        string // the whole body, to find the name of a rejected parameter
}

// Kind is the error's code and type, lower case, for matching.
func (e EndpointError) Kind() string { return strings.ToLower(e.Code + " " + e.Type) }

// EffectiveStatus is the HTTP status, or the body's when the error came
// with 200 (an error event in a stream).
func (e EndpointError) EffectiveStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.BodyStatus
}

// ParseErrorBody reads an error answer's body, whatever its shape.
func ParseErrorBody(b []byte) EndpointError {
	e := EndpointError{Raw: string(b)}
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		e.Msg = plainText(b)
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
			e.Msg, e.Type = jsonText(inner["message"]), jsonText(inner["type"])
			e.Code = jsonText(inner["code"])
			if st := jsonText(inner["status"]); e.Type == "" {
				e.Type = st // Google's {"error": {"code": 400, "status": "INVALID_ARGUMENT"}}
			}
			if e.Msg == "" {
				e.Msg = jsonText(inner["detail"])
			}
		} else {
			// {"error": "Not Found", "message": "Cannot POST …"}: the error
			// is a heading; the message, when there is one, the detail.
			e.Msg = jsonText(raw)
			if m := top("message", "detail"); m != "" && m != e.Msg {
				e.Msg += ": " + m
			}
		}
	}
	if e.Msg == "" {
		e.Msg = top("message", "detail", "msg", "title")
	}
	if e.Type == "" {
		if t := top("type"); t != "error" { // Anthropic's envelope says only that it is one
			e.Type = t
		}
	}
	if e.Code == "" {
		e.Code = top("code")
	}
	for _, s := range []string{e.Code, top("status"), top("statusCode"), top("status_code")} {
		if n, err := strconv.Atoi(s); err == nil && n >= 400 && n <= 599 {
			e.BodyStatus = n
			break
		}
	}
	if e.Msg == "" && len(doc) > 0 {
		e.Msg = string(bytes.TrimSpace(b))
	}
	return e
}

// ErrorText is what an error body says, read whatever its shape, for a
// person.
func ErrorText(body []byte) string { return ParseErrorBody(body).Msg }

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

var titleRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`) })

// plainText is a body that is not JSON: an HTML page is named by its title.
func plainText(b []byte) string {
	t := strings.TrimSpace(string(b))
	if strings.HasPrefix(t, "<") {
		if m := titleRE().FindStringSubmatch(t); m != nil {
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
// Anthropic ("prompt is too long"), others ("context window").
var contextLengthRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)context[ _-]?(length|window|size)|maximum context|too many tokens|prompt is too long`)
})

func isContextLength(e EndpointError) bool {
	k := e.Kind()
	if strings.Contains(k, "context_length") || strings.Contains(k, "context_window") || strings.Contains(e.Type, "context") {
		return true
	}
	return contextLengthRE().MatchString(e.Msg)
}

// noToolsRE matches a server saying the model cannot call tools (Ollama:
// "… does not support tools"; others: "tools are not supported").
var noToolsRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(does not|doesn't) support tools|tools? (are|is) not supported|tool[ _]?call(s|ing)? (are|is)? ?not supported`)
})

// modelMissingRE reads a refusal that says the model does not exist, from
// a server that sends it as a 400 (mock-openai-api: "Model 'x' does not
// exist").
var modelMissingRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\bmodel\b.*\b(does not exist|doesn't exist|not found|unknown)`)
})

// authMsgRE reads a bare message ({"error": "Invalid API key"}) that has no
// code or type to classify it by.
var authMsgRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(invalid|incorrect|missing|no) (api[ _-]?)?key|unauthori[sz]ed|authentication`)
})

func hasAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Endpoint is what an adapter's errors say of the endpoint they came from,
// and how they keep its key out.
type Endpoint struct {
	// URL is the endpoint as errors show it: without user info or query.
	URL string
	// KeyEnv names the variable the key came from ("" when none was
	// read); HasKey: one was sent.
	KeyEnv string
	HasKey bool
	// Withheld names a variable that holds a key which was not sent to
	// this endpoint because it is meant for another (OPENAI_API_KEY goes
	// only to OpenAI's API and to OPENAI_BASE_URL), for the advice of a 401.
	Withheld string
	// API is the path the adapter calls under URL ("/chat/completions",
	// "/v1/messages") and Format what it answers with ("a chat
	// completion"), for the errors that suggest the URL is wrong.
	API, Format string
	// Root is what URL must be, said after "it must be" ("the root that
	// /chat/completions is under, often ending in /v1").
	Root string
	// Settings are the request settings the agent set, by their names in a
	// scenario, so a refusal that names one can say to change it.
	Settings []string
	redact   func(string) string
	// key gives the API key, for the rules that keep it out of an answer
	// (answerkey.go); a func, so that printing an Endpoint cannot show it.
	key func() string
}

// NewEndpoint describes an endpoint; key is the API key its calls carry,
// kept only inside the redactor and the answer's rules.
func NewEndpoint(ep Endpoint, key string) *Endpoint {
	ep.redact = Redactor(key)
	ep.key = func() string { return key }
	return &ep
}

// Redact removes the key, and anything shaped like one, from text.
func (ep *Endpoint) Redact(s string) string {
	if ep.redact == nil {
		return Redactor("")(s)
	}
	return ep.redact(s)
}

// Classify classifies an error the endpoint sent, for a call of model;
// header is the answer's (for its Retry-After).
func (ep *Endpoint) Classify(e EndpointError, model string, header http.Header) *Failure {
	status := e.EffectiveStatus()
	k := e.Kind()
	msg := ep.Clean(e.Msg)
	said := ""
	if msg != "" {
		said = " (the endpoint said: " + msg + ")"
	}
	statusText := func() string {
		if status == 0 {
			return "in the stream"
		}
		return fmt.Sprintf("%d %s", status, StatusText(status))
	}
	switch {
	case isContextLength(e):
		return Fail(ErrContextLength, "%s: %s; shorten the task, or lower agent.summarization.max_tokens so the history is summarized sooner",
			ErrContextLength, orDefault(msg, "the endpoint gave no detail"))
	case hasAny(k, "insufficient_quota", "billing", "quota_exceeded", "credit"):
		if !ep.HasKey {
			return Fail(ErrQuota, "the endpoint at %s says the account is out of quota or credit (%s), but no API key was sent: %s%s",
				ep.URL, statusText(), ep.keyAdvice(), said)
		}
		return Fail(ErrQuota, "the account behind the key in %s is out of quota or credit at %s (%s): add credit or use another key; a retry will not help%s",
			ep.KeyEnv, ep.URL, statusText(), said)
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		hasAny(k, "invalid_api_key", "authentication", "unauthorized", "permission_denied", "permission_error", "invalid_authentication") ||
		(k == " " && authMsgRE().MatchString(e.Msg)):
		return ep.authFailure(status, msg)
	case status == http.StatusNotFound || hasAny(k, "model_not_found", "invalid_model", "not_found_error") ||
		((status == http.StatusBadRequest || status == 0) && modelMissingRE().MatchString(e.Msg)):
		text := fmt.Sprintf("model %q not found at %s: check model.model", model, ep.URL)
		if !strings.Contains(strings.ToLower(msg), "model") {
			text += "; if the name is right, check model.base_url too: it must be " + ep.Root
		}
		return Fail(ErrModelNotFound, "%s%s", text, said)
	case hasAny(k, "content_filter", "content_policy"):
		return Fail(ErrContentFilter, "the endpoint's content filter refused the request (%s): rephrase the prompt or the task; a retry would be refused again%s", statusText(), said)
	case status == http.StatusMethodNotAllowed:
		return Fail(ErrModelNotFound, "%s does not take %s (%s): check model.base_url; it must be %s%s",
			ep.URL, ep.API, statusText(), ep.Root, said)
	case (status == http.StatusBadRequest || status == 0) && noToolsRE().MatchString(msg):
		return Fail(ErrRefused, "model %q at %s cannot call tools: pick a model with tool support (llama.cpp's server needs --jinja)%s", model, ep.URL, said)
	case status == http.StatusTooManyRequests || RetryableStatus(status) ||
		hasAny(k, "rate_limit", "overloaded", "server_error", "timeout", "unavailable", "internal", "api_error"):
		f := &Failure{Retry: true, Status: status, What: statusText() + prefixed(": ", msg)}
		if status == 0 {
			// No status to go by: the event's code or type says the class.
			f.What, f.Cause = streamEvent(e, msg), causeOf(k)
		}
		f.RetryAfter, f.HasRetryAfter = RetryAfter(header, time.Now())
		return f
	case status == 0 && !hasAny(k, "invalid", "bad_request", "not_supported", "unsupported", "not_found"):
		// An error event of a kind we do not know, before any text: the
		// stream may have broken on the server's side.
		return &Failure{Retry: true, Cause: CauseStream, What: streamEvent(e, msg)}
	}
	text := fmt.Sprintf("the endpoint at %s refused the request (%s)%s", ep.URL, statusText(), prefixed(": ", msg))
	if s := ep.settingNamed(msg); s != "" {
		text += fmt.Sprintf("; change or remove %s in this agent's settings", s)
	}
	return Fail(ErrRefused, "%s", text)
}

// authFailure says whether the key was wrong or missing, and where it came
// from. A 401's words are left out: OpenAI's quote part of the key.
func (ep *Endpoint) authFailure(status int, msg string) *Failure {
	code := ""
	if status != 0 {
		code = fmt.Sprintf(" (%d)", status)
	}
	var text string
	if ep.HasKey {
		text = fmt.Sprintf("the endpoint at %s rejected the API key in %s%s: check that key, or name the variable that holds the right one with model.api_key_env",
			ep.URL, ep.KeyEnv, code)
	} else {
		text = fmt.Sprintf("the endpoint at %s wants an API key%s and none was sent: %s", ep.URL, code, ep.keyAdvice())
	}
	if status == http.StatusForbidden && msg != "" {
		// A 403 is sometimes about something else (a region, a project's
		// access): the endpoint's words help then.
		text += " (the endpoint said: " + msg + ")"
	}
	return Fail(ErrAuth, "%s", text)
}

// keyAdvice says, for a call that carried no key, why none was sent and how
// to send one.
func (ep *Endpoint) keyAdvice() string {
	switch {
	case ep.KeyEnv != "":
		return fmt.Sprintf("%s, which should hold it, is empty or not set: set it to the endpoint's key", ep.KeyEnv)
	case ep.Withheld != "":
		return fmt.Sprintf("%[1]s is set but was withheld, because it goes only to OpenAI's API and to OPENAI_BASE_URL; "+
			"to send it to %[2]s, set OPENAI_BASE_URL=%[2]s, or give the endpoint its key variable "+
			"(--endpoint NAME=%[2]s,%[1]s, or model.api_key_env in the scenario)", ep.Withheld, ep.URL)
	}
	return fmt.Sprintf("give the endpoint the variable that holds its key (--endpoint NAME=%s,KEY_ENV, or model.api_key_env in the scenario)", ep.URL)
}

// streamEvent is what an attempt got when the endpoint sent an error event
// inside a stream: its code or type, and its message.
func streamEvent(e EndpointError, msg string) string {
	what := "an error event in the stream"
	var kinds []string
	for _, s := range []string{e.Code, e.Type} {
		if s != "" && !slices.Contains(kinds, s) {
			kinds = append(kinds, s)
		}
	}
	if len(kinds) > 0 {
		what += " (" + strings.Join(kinds, ", ") + ")"
	}
	if msg != "" {
		what += ": " + strconv.Quote(msg)
	}
	return what
}

// The classes of a retried failure, for counting (ModelRetry.Cause) and for
// the advice after the last attempt.
const (
	CauseRateLimit   = "rate_limit"
	CauseServerError = "server_error"
	CauseTimeout     = "timeout"
	CauseConnection  = "connection"
	CauseStream      = "stream"
)

// causeOf is the class an endpoint's error code or type says, or "".
func causeOf(kind string) string {
	switch {
	case hasAny(kind, "rate_limit"):
		return CauseRateLimit
	case hasAny(kind, "timeout"):
		return CauseTimeout
	case hasAny(kind, "overloaded", "server_error", "unavailable", "internal", "api_error"):
		return CauseServerError
	}
	return ""
}

// settingNamed is the request setting an endpoint's refusal names, if the
// agent set it.
func (ep *Endpoint) settingNamed(msg string) string {
	for _, s := range ep.Settings {
		if strings.Contains(msg, s) {
			return s
		}
	}
	return ""
}

// Transport classifies an error without an HTTP status: a reset or cut
// connection is retried; a refused connection, an unknown host or a failed
// TLS handshake is not (nothing listens there: a retry finds the same), nor
// a request the client refused to send, nor an answer that is not the
// format the adapter reads.
func (ep *Endpoint) Transport(err error) *Failure {
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
		return Fail(ErrRefused, "the model endpoint at %s answered with something that is not %s (%s): check model.base_url; it must be %s",
			ep.URL, ep.Format, ep.Clean(err.Error()), ep.Root)
	case errors.Is(err, syscall.ECONNREFUSED):
		return Fail(ErrUnreachable, "nothing is listening at %s (connection refused): start the server, or fix model.base_url", ep.URL)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return Fail(ErrUnreachable, "no host %q for %s: check model.base_url", dnsErr.Name, ep.URL)
	case errors.As(err, &certErr), errors.As(err, &hostErr), errors.As(err, &unknownCA):
		return Fail(ErrUnreachable, "the TLS certificate of %s is not trusted (%s): fix the server's certificate, or use its http:// address on a trusted network", ep.URL, ep.Clean(err.Error()))
	case errors.As(err, &recErr):
		return Fail(ErrUnreachable, "%s does not speak TLS: use http:// in model.base_url", ep.URL)
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &Failure{Retry: true, Cause: CauseConnection, What: "a connection error (" + ep.Clean(err.Error()) + ")"}
	}
	return &Failure{Err: fmt.Errorf("the model call failed: %s", ep.Clean(err.Error()))}
}

// StatusText is the status's name: Go's, or Anthropic's for its 529.
func StatusText(s int) string {
	if s == 529 {
		return "Overloaded"
	}
	return http.StatusText(s)
}

// RetryableStatus: overload, rate limits and gateway trouble pass; the
// 52x codes are Cloudflare's (and 529 Anthropic's "overloaded").
func RetryableStatus(s int) bool {
	switch s {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return s >= 520 && s <= 529
}

// Clean makes an endpoint's text fit an error message: no API key, one
// line, not too long.
func (ep *Endpoint) Clean(s string) string {
	s = ep.Redact(s)
	s = strings.Join(strings.Fields(s), " ")
	const maxRunes = 300
	if utf8.RuneCountInString(s) > maxRunes {
		r := []rune(s)
		s = string(r[:maxRunes]) + "…"
	}
	return s
}

// bearerRE and keyRE catch keys an endpoint might echo: its own
// "Authorization: Bearer …", or a secret shaped as OpenAI's (sk-…) and
// Anthropic's (sk-ant-…) are, masked ones too. Neither reaches past a
// quote or a backslash, so that a JSON body they are applied to stays JSON.
var (
	bearerRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)(bearer\s+)[^\s"\\]+`) })
	skKeyRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bsk-[A-Za-z0-9_\-*]{6,}`) })
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
		s = bearerRE().ReplaceAllString(s, "${1}"+Redacted)
		return skKeyRE().ReplaceAllString(s, "sk-"+Redacted)
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

// KeyHold redacts the key from text that arrives in pieces (a stream's
// deltas), where the key may be split across two pieces or more: each
// piece goes out with the key redacted, less a tail that may be the key's
// start (at most len(key)-1 bytes), held until the next piece completes
// it or not, or until the end (Rest). The rule is RedactKey's.
type KeyHold struct {
	key  string
	held string
}

// NewKeyHold holds back pieces of key; "" holds nothing.
func NewKeyHold(key string) *KeyHold { return &KeyHold{key: key} }

// Next is what of the text held and piece can go out now.
func (h *KeyHold) Next(piece string) string {
	s := h.held + piece
	h.held = ""
	if h.key == "" {
		return s
	}
	s = string(RedactKey([]byte(s), h.key))
	n := keyStart(s, h.key)
	h.held = s[len(s)-n:]
	return s[:len(s)-n]
}

// Rest is the text still held, which the end of the pieces has shown not
// to be the key.
func (h *KeyHold) Rest() string {
	s := h.held
	h.held = ""
	return s
}

// Holding reports whether text is held.
func (h *KeyHold) Holding() bool { return h.held != "" }

// keyStart is the length of the longest tail of s that is the start of key
// without being all of it.
func keyStart(s, key string) int {
	for n := min(len(s), len(key)-1); n > 0; n-- {
		if key[:n] == s[len(s)-n:] {
			return n
		}
	}
	return 0
}

// MayEndInKeyStart reports whether JSON text b may hold a string that ends
// with the start of key, for KeyHold to hold back: false only when no
// string of b does (as JSON writes the key's characters, unescaped), so
// that a JSON event none of whose strings could can go out as it came
// without being read.
func MayEndInKeyStart(b []byte, key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return true // a character JSON may escape: read the event
		}
	}
	for i := bytes.IndexByte(b, key[0]); i >= 0; {
		n := 0
		for n < len(key)-1 && i+n < len(b) && b[i+n] == key[n] {
			n++
		}
		if n > 0 && i+n < len(b) && b[i+n] == '"' && !isName(b[i+n+1:]) {
			return true
		}
		next := bytes.IndexByte(b[i+1:], key[0])
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return false
}

// isName reports whether the JSON after a string's closing quote makes it
// an object's member name (a colon follows), not a value.
func isName(after []byte) bool {
	after = bytes.TrimLeft(after, " \t\r\n")
	return len(after) > 0 && after[0] == ':'
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
