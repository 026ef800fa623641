package anthropic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// Errors a caller may test for with errors.Is: the classes every remote
// adapter shares.
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

// Generate makes one Messages call for the engine, with retries. An answer
// cut off at max_tokens, or refused (stop_reason "refusal"), is an error,
// not an answer: it would otherwise become a receipt as if complete.
func (m *Model) Generate(ctx context.Context, req *delegation.Request) (*delegation.Response, error) {
	if req == nil {
		return nil, errors.New("no request")
	}
	c := m.buildRequest(req)
	c.retrying = req.Retry
	var onDelta func(string)
	if m.stream && req.Stream != nil {
		onDelta = req.Stream
	}
	var msg *sdk.Message
	err := m.retrier.Do(ctx, c.model, onDelta != nil, c.retrying, func() *remote.Failure {
		var f *remote.Failure
		msg, f = m.attempt(ctx, c, onDelta)
		return f
	})
	if err != nil {
		return nil, err
	}
	resp := response(msg)
	m.ep.RedactAnswer(resp) // an endpoint may echo the key in its answer
	output := 0
	if resp.Usage != nil {
		output = resp.Usage.CompletionTokens
	}
	if err := remote.Unfinished("stop_reason", string(msg.StopReason), c.maxTokens, output, resp.Content); err != nil {
		return nil, err
	}
	return resp, nil
}

// options are one attempt's request options: the temperature, which the
// SDK's parameters do not carry, and for a whole answer a request timeout
// past the attempt's own (the SDK would otherwise refuse a large max_tokens
// without streaming), so the attempt's ends it first.
func (m *Model) options(stream bool) []option.RequestOption {
	var opts []option.RequestOption
	if t := m.settings.Temperature; t != nil {
		opts = append(opts, option.WithJSONSet("temperature", *t))
	}
	if !stream {
		opts = append(opts, option.WithRequestTimeout(m.callTimeout+time.Minute))
	}
	return opts
}

// attempt makes one call, bounded by CallTimeout.
func (m *Model) attempt(ctx context.Context, c *call, onDelta func(string)) (*sdk.Message, *remote.Failure) {
	at := remote.StartAttempt(ctx, m.callTimeout)
	defer at.End()
	if onDelta != nil {
		return m.streamOnce(ctx, at, c, onDelta)
	}
	msg, err := m.client.Messages.New(at.Ctx, c.params, m.options(false)...)
	if err != nil {
		return nil, m.classify(ctx, at, c, err)
	}
	return msg, nil
}

// streamOnce makes one streamed attempt: text deltas go to onDelta as they
// arrive; the SDK's accumulator puts the message together, tool_use inputs
// from their input_json_delta pieces. Each event re-arms the attempt's
// timeout, so CallTimeout bounds the silence between events.
func (m *Model) streamOnce(ctx context.Context, at *remote.Attempt, c *call, onDelta func(string)) (*sdk.Message, *remote.Failure) {
	st := m.client.Messages.NewStreaming(at.Ctx, c.params, m.options(true)...)
	defer st.Close()
	var msg sdk.Message
	sent, stopped := false, false
	// Each text block's deltas go out through a hold of its own, which
	// keeps the endpoint's key out of them; the whole message is redacted
	// once it is put together (Generate).
	holds := map[int64]*remote.KeyHold{}
	show := func(s string) {
		if s != "" {
			onDelta(s)
			sent = true
		}
	}
	for st.Next() {
		at.Reset()
		ev := st.Current()
		if err := msg.Accumulate(ev); err != nil {
			return nil, remote.BrokeOff(sent, &remote.Failure{Retry: true, What: "a stream out of order (" + m.ep.Clean(err.Error()) + ")"})
		}
		switch ev.Type {
		case "content_block_delta":
			if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
				h := holds[ev.Index]
				if h == nil {
					h = m.ep.KeyHold()
					holds[ev.Index] = h
				}
				show(h.Next(ev.Delta.Text))
			}
		case "content_block_stop":
			if h := holds[ev.Index]; h != nil {
				show(h.Rest())
			}
		case "message_stop":
			stopped = true
		}
	}
	for _, h := range holds {
		show(h.Rest())
	}
	if err := st.Err(); err != nil {
		return nil, remote.BrokeOff(sent, m.classify(ctx, at, c, err))
	}
	if !stopped {
		return nil, remote.BrokeOff(sent, &remote.Failure{Retry: true, What: "a stream that ended before its message_stop"})
	}
	return &msg, nil
}

// streamErrorPrefix is how the SDK says an error event it could not read
// as an API error ended a stream; the event's JSON follows.
const streamErrorPrefix = "received error while streaming: "

// classify turns an attempt's error into a failure: what the endpoint said
// (an error answer, or an error event in a stream), by the rules every
// remote adapter shares; else the connection's trouble.
func (m *Model) classify(ctx context.Context, at *remote.Attempt, c *call, err error) *remote.Failure {
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		e := remote.ParseErrorBody([]byte(apiErr.RawJSON()))
		if apiErr.StatusCode >= 400 {
			e.Status = apiErr.StatusCode
		}
		if e.Type == "" {
			e.Type = string(apiErr.Type())
		}
		if e.Msg == "" {
			e.Msg = apiErr.Message
		}
		var header map[string][]string
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		if f := at.Interrupted(ctx, header); f != nil {
			return f
		}
		return m.ep.Classify(e, c.model, header)
	}
	if f := at.Interrupted(ctx, nil); f != nil {
		return f
	}
	if i := strings.Index(err.Error(), streamErrorPrefix); i >= 0 {
		e := remote.ParseErrorBody([]byte(err.Error()[i+len(streamErrorPrefix):]))
		return m.ep.Classify(e, c.model, nil)
	}
	if strings.Contains(err.Error(), "streaming is required") {
		return &remote.Failure{Err: fmt.Errorf("the answer may take longer than the SDK allows without streaming: lower max_tokens, or let this agent stream")}
	}
	return m.ep.Transport(err)
}
