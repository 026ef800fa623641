package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Error is an answer in OpenAI's error shape:
//
//	{"error": {"message": "…", "type": "invalid_request_error", "param": "messages[0].role", "code": "invalid_value"}}
//
// Clients (OpenAI's SDKs, LangChain, LiteLLM) read the message from it and
// decide from the status whether to retry, so the studio's own refusals
// use it too.
type Error struct {
	Status  int
	Message string
	Type    string // "" takes the status's (TypeFor)
	Param   string // "" is null
	Code    string // "" is null
	// RetryAfter, in seconds, is sent as Retry-After when not 0: when a
	// retry may succeed.
	RetryAfter int
}

func (e *Error) Error() string { return e.Message }

// Body is the error as JSON.
func (e *Error) Body() []byte {
	type inner struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	in := inner{Message: e.Message, Type: e.Type}
	if in.Type == "" {
		in.Type = TypeFor(e.Status)
	}
	if e.Param != "" {
		in.Param = &e.Param
	}
	if e.Code != "" {
		in.Code = &e.Code
	}
	b, _ := json.Marshal(map[string]inner{"error": in})
	return b
}

// Write sends the error.
func (e *Error) Write(w http.ResponseWriter) {
	setRetryAfter(w.Header(), e.RetryAfter)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// retryHeader is the Retry-After of an error that has one, else nil.
func retryHeader(seconds int) http.Header {
	if seconds <= 0 {
		return nil
	}
	return http.Header{"Retry-After": {strconv.Itoa(seconds)}}
}

func setRetryAfter(h http.Header, seconds int) {
	for k, v := range retryHeader(seconds) {
		h[k] = v
	}
}

// TypeFor is the error type OpenAI gives a status.
func TypeFor(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func invalid(param, code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Param: param, Code: code}
}

func missing(param string) *Error {
	return invalid(param, "missing_required_parameter", "Missing required parameter: '%s'.", param)
}

func wrongType(param, want string, got json.RawMessage) *Error {
	return invalid(param, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", param, want, kindOf(got))
}

// kindOf names a JSON value's type as OpenAI's messages do.
func kindOf(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "an invalid value"
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64:
		if x == float64(int64(x)) {
			return "an integer"
		}
		return "a decimal"
	case []any:
		return "an array"
	}
	return "an object"
}
