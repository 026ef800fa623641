package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/delegationstudio/studio/internal/model/remote"
)

// Errors a caller may test for with errors.Is: the classes every remote
// adapter shares (remote's), named here too for the callers of this one.
var (
	ErrContextLength = remote.ErrContextLength
	ErrAuth          = remote.ErrAuth
	ErrModelNotFound = remote.ErrModelNotFound
	ErrQuota         = remote.ErrQuota
	ErrUnreachable   = remote.ErrUnreachable
	ErrTruncated     = remote.ErrTruncated
	ErrContentFilter = remote.ErrContentFilter
	ErrRefused       = remote.ErrRefused
)

// classify turns an attempt's error into a failure: retried or not, and
// with a message that says what happened and what to do. It reads what the
// endpoint sent (status and body, kept by the wire layer) rather than
// go-openai's error types, which lose a body whose "error" is a string.
func (m *Model) classify(ctx context.Context, at *remote.Attempt, c *call, info *attemptInfo, err error) *remote.Failure {
	if f := at.Interrupted(ctx, info.header); f != nil {
		return f
	}
	switch {
	case info.said != nil:
		return m.classifyEndpoint(*info.said, c, info)
	case info.status >= 400:
		e := remote.ParseErrorBody(info.body)
		e.Status = info.status
		return m.classifyEndpoint(e, c, info)
	}
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) && apiErr.Message != "" {
		// An error event go-openai read that the wire layer did not see.
		code := ""
		if apiErr.Code != nil {
			code = fmt.Sprint(apiErr.Code)
		}
		return m.classifyEndpoint(remote.EndpointError{Msg: apiErr.Message, Type: apiErr.Type, Code: code}, c, info)
	}
	switch {
	case errors.Is(err, errStreamError):
		return &remote.Failure{Retry: true, What: "an error event in the stream"}
	case errors.Is(err, goopenai.ErrTooManyEmptyStreamMessages):
		return &remote.Failure{Retry: true, What: "a stream with no data in it"}
	}
	return m.ep.Transport(err)
}

// classifyEndpoint classifies an error the endpoint sent: a refused
// optional part is left out at once; anything else as every remote adapter
// classifies it.
func (m *Model) classifyEndpoint(e remote.EndpointError, c *call, info *attemptInfo) *remote.Failure {
	if opt := m.rejectedOption(e, c); opt != "" {
		where := "in the stream"
		if s := e.EffectiveStatus(); s != 0 {
			where = fmt.Sprintf("%d %s", s, http.StatusText(s))
		}
		return &remote.Failure{Retry: true, Now: true, Drop: opt, What: fmt.Sprintf("%s rejected (%s)", opt, where)}
	}
	return m.ep.Classify(e, c.model, info.header)
}

// rejectedOption names an optional part of the request the endpoint refused
// and the request can do without, so the attempt is made again at once
// without it: stream_options (servers that do not know it), our default
// parallel_tool_calls, and max_tokens where the endpoint wants
// max_completion_tokens (OpenAI's reasoning models).
func (m *Model) rejectedOption(e remote.EndpointError, c *call) string {
	status := e.EffectiveStatus()
	kind := e.Kind()
	if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity &&
		!(status == 0 && (strings.Contains(kind, "invalid") || strings.Contains(kind, "unsupported"))) {
		return ""
	}
	raw := e.Raw + " " + e.Msg
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
