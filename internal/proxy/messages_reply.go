package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/openai"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// MessagesReply is where an upstream writes its answer to a Messages
// request: Reply's relaying and recording, in Anthropic's wire format —
// named SSE events (event: NAME, data: JSON), no [DONE], errors in
// Anthropic's shape. As for chat completions, the answer is recorded
// before its last bytes (message_stop) go out.
type MessagesReply struct {
	r       *Reply
	answer  messageAnswer
	problem string
}

// anthropicRelayed are the headers of Anthropic's a client may want beside
// those Reply relays: its request id, rate limits, whether to retry.
func anthropicRelayed(name string) bool {
	n := strings.ToLower(name)
	return n == "request-id" || n == "x-should-retry" || strings.HasPrefix(n, "anthropic-ratelimit-")
}

func (o *MessagesReply) begin(status int, from http.Header, contentType string) {
	if !o.r.begun {
		for k, vs := range from {
			if anthropicRelayed(k) {
				o.r.w.Header()[k] = append([]string(nil), vs...)
			}
		}
	}
	o.r.begin(status, from, contentType)
}

// Begin starts a streamed answer with the upstream's status and headers.
func (o *MessagesReply) Begin(status int, h http.Header) { o.begin(status, h, "text/event-stream") }

// Event relays one stream event and reads it: its text is shown live, an
// error event is the call's failure. more: the next event is already at
// hand, and goes out in the same write.
func (o *MessagesReply) Event(name string, data []byte, more bool) {
	o.begin(http.StatusOK, nil, "text/event-stream")
	deltas, err := o.answer.event(data)
	if err != nil && o.problem == "" {
		o.problem = err.Error()
	}
	for _, d := range deltas {
		o.r.turn.Delta(d)
	}
	if o.answer.stopped {
		// message_stop: the answer is whole, recorded before it goes out.
		o.finish()
	}
	var b []byte
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), '\n', '\n')
	o.r.send(b, !more)
}

// Comment relays an SSE comment.
func (o *MessagesReply) Comment(line []byte) {
	o.begin(http.StatusOK, nil, "text/event-stream")
	o.r.write(append(append([]byte(nil), line...), '\n', '\n'))
}

// End ends a streamed answer, recording it if message_stop did not.
func (o *MessagesReply) End() {
	o.begin(http.StatusOK, nil, "text/event-stream")
	o.finish()
}

func (o *MessagesReply) finish() {
	switch {
	case o.problem != "":
		o.r.fail(o.problem)
	case !o.answer.stopped:
		o.r.fail("the stream ended before the answer was complete (no message_stop)")
	default:
		o.r.RecordAnswer(o.answer.response())
	}
}

// Whole relays a whole (not streamed) answer, recorded first.
func (o *MessagesReply) Whole(status int, h http.Header, body []byte) {
	if err := o.answer.whole(body); err != nil {
		o.r.fail(err.Error())
	} else {
		o.r.RecordAnswer(o.answer.response())
	}
	o.begin(status, h, "application/json")
	o.r.write(body)
}

// Fail relays an upstream's error answer with its status; the call is
// recorded as failed with what the body says.
func (o *MessagesReply) Fail(status int, h http.Header, body []byte) {
	msg := openai.ErrorText(body)
	o.r.fail(fmt.Sprintf("the upstream answered %d %s: %s", status, orDefault(http.StatusText(status), "error"), orDefault(msg, "no reason given")))
	if o.r.begun {
		o.errorEvent(&AnthropicError{Status: status, Message: orDefault(msg, http.StatusText(status))})
		return
	}
	o.begin(status, h, orDefault(h.Get("Content-Type"), "application/json"))
	o.r.write(body)
}

// Refuse answers with the studio's own error (a script with no turn for
// the caller, a request it cannot answer), as an error event in a stream
// under way.
func (o *MessagesReply) Refuse(e *AnthropicError) {
	o.r.fail(e.Message)
	if o.r.begun {
		o.errorEvent(e)
		return
	}
	o.begin(e.Status, retryHeader(e.RetryAfter), "application/json")
	o.r.write(e.Body())
}

func (o *MessagesReply) errorEvent(e *AnthropicError) {
	o.r.write(append(append([]byte("event: error\ndata: "), e.Body()...), '\n', '\n'))
}

// Abort ends a call that could not be completed: 502 or 504, or an error
// event in a stream under way.
func (o *MessagesReply) Abort(status int, why string) {
	o.Refuse(&AnthropicError{Status: status, Message: why})
}

// close records the end of a call the upstream left unrecorded.
func (o *MessagesReply) close(ctx context.Context) {
	if o.r.recorded {
		return
	}
	if cutByStop(ctx, o.r) {
		o.Refuse(asAnthropic(errClosing))
		return
	}
	why := "the upstream gave no answer"
	if cause := context.Cause(ctx); cause != nil {
		why = causeText(cause)
	}
	if o.r.begun || ctx.Err() != nil {
		o.r.fail(why)
		return
	}
	o.Abort(http.StatusBadGateway, why)
}

// relayMessagesStream relays Anthropic's server-sent events one by one as
// they arrive, until the end of the stream, each made safe by f first: the
// key is redacted, in an event and split across events (textHolds), what
// a block holds back given before the event that ends it.
func relayMessagesStream(r io.Reader, out *MessagesReply, f *forwarder) error {
	holds := newTextHolds(f.key)
	rest := func(index string) {
		for _, b := range holds.messageRest(index) {
			out.Event("content_block_delta", b, false)
		}
	}
	_, err := readEvents(r, func(name, data []byte, more bool) bool {
		data = f.scrubAnswer(data)
		switch ends := blockEnd(data); {
		case ends == "":
			data = holds.message(data)
		default:
			rest(strings.TrimPrefix(ends, "all"))
		}
		out.Event(string(name), data, more)
		return false
	}, func(c []byte) { out.Comment(f.scrubAnswer(c)) })
	if err == nil {
		rest("")
		out.End()
	}
	return err
}

// blockEnd says which content blocks an event ends: its index for a
// content_block_stop, "all" for the message's end or an error, "" for
// none.
func blockEnd(data []byte) string {
	var ev struct {
		Type  string          `json:"type"`
		Index json.RawMessage `json:"index"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return ""
	}
	switch ev.Type {
	case "content_block_stop":
		if len(ev.Index) == 0 {
			return "all"
		}
		return string(ev.Index)
	case "message_delta", "message_stop", "error":
		return "all"
	}
	return ""
}

// messageAnswer puts an Anthropic answer together: a whole message, or the
// events of a stream.
type messageAnswer struct {
	blocks  []*answerBlock
	usage   anthropicUsage
	stopped bool // message_stop came
	// id, model and stop are the message's id, model and stop_reason as
	// the upstream sent them.
	id, model, stop string
}

type answerBlock struct {
	typ, id, name string
	text          strings.Builder // text, or thinking
	input         json.RawMessage // a tool_use's input as it started
	json          strings.Builder // its input_json_delta pieces
}

// anthropicUsage is Anthropic's usage: input_tokens are the ones neither
// written to nor read from the prompt cache.
type anthropicUsage struct {
	Input         *int `json:"input_tokens,omitempty"`
	Output        *int `json:"output_tokens,omitempty"`
	CacheCreation *int `json:"cache_creation_input_tokens,omitempty"`
	CacheRead     *int `json:"cache_read_input_tokens,omitempty"`
}

// merge takes the figures u gives (a message_delta's are cumulative).
func (a *anthropicUsage) merge(u *anthropicUsage) {
	if u == nil {
		return
	}
	for _, f := range [][2]**int{{&a.Input, &u.Input}, {&a.Output, &u.Output}, {&a.CacheCreation, &u.CacheCreation}, {&a.CacheRead, &u.CacheRead}} {
		if *f[1] != nil {
			*f[0] = *f[1]
		}
	}
}

type wireBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Thinking string          `json:"thinking,omitempty"`
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

type wireMessageObj struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content []wireBlock     `json:"content"`
	Stop    *string         `json:"stop_reason"`
	StopSeq *string         `json:"stop_sequence"`
	Usage   *anthropicUsage `json:"usage"`
}

func (a *messageAnswer) add(b wireBlock) {
	blk := &answerBlock{typ: b.Type, id: b.ID, name: b.Name, input: b.Input}
	blk.text.WriteString(b.Text + b.Thinking)
	a.blocks = append(a.blocks, blk)
}

// whole reads a whole answer.
func (a *messageAnswer) whole(body []byte) error {
	var m wireMessageObj
	if err := json.Unmarshal(body, &m); err != nil || m.Type != "message" {
		return errors.New("the upstream's answer is not an Anthropic message (a JSON object of type \"message\")")
	}
	for _, b := range m.Content {
		a.add(b)
	}
	a.usage.merge(m.Usage)
	a.id, a.model = m.ID, m.Model
	if m.Stop != nil {
		a.stop = *m.Stop
	}
	a.stopped = true
	return nil
}

// event reads one stream event, returning the text it adds.
func (a *messageAnswer) event(data []byte) ([]string, error) {
	var ev struct {
		Type    string          `json:"type"`
		Index   int             `json:"index"`
		Message *wireMessageObj `json:"message"`
		Block   *wireBlock      `json:"content_block"`
		Delta   *struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			Thinking    string `json:"thinking"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *anthropicUsage `json:"usage"`
		Error *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, fmt.Errorf("the upstream sent a stream event that is not JSON: %.100s", data)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			a.usage.merge(ev.Message.Usage)
			a.id, a.model = ev.Message.ID, ev.Message.Model
		}
	case "content_block_start":
		if ev.Block != nil {
			a.add(*ev.Block)
		}
	case "content_block_delta":
		if ev.Delta == nil || ev.Index < 0 || ev.Index >= len(a.blocks) {
			return nil, fmt.Errorf("the upstream sent a delta for content block %d, which it had not started", ev.Index)
		}
		blk := a.blocks[ev.Index]
		switch ev.Delta.Type {
		case "text_delta":
			blk.text.WriteString(ev.Delta.Text)
			if ev.Delta.Text != "" {
				return []string{ev.Delta.Text}, nil
			}
		case "thinking_delta":
			blk.text.WriteString(ev.Delta.Thinking)
		case "input_json_delta":
			blk.json.WriteString(ev.Delta.PartialJSON)
		}
	case "message_delta":
		a.usage.merge(ev.Usage)
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			a.stop = ev.Delta.StopReason
		}
	case "message_stop":
		a.stopped = true
	case "error":
		msg := "the upstream sent an error event"
		if ev.Error != nil {
			msg = "the upstream's stream ended with an error (" + ev.Error.Type + "): " + ev.Error.Message
		}
		return nil, errors.New(msg)
	}
	return nil, nil
}

// response is the answer as recorded: the text blocks' text, thinking as
// reasoning, tool_use blocks as tool calls, the usage with the cached
// tokens counted in the prompt's, the message's id, model and stop_reason.
func (a *messageAnswer) response() *delegation.Response {
	resp := &delegation.Response{Meta: delegation.MetaOf(a.id, a.model, a.stop)}
	var text, thinking strings.Builder
	for _, b := range a.blocks {
		switch b.typ {
		case "text":
			text.WriteString(b.text.String())
		case "thinking":
			thinking.WriteString(b.text.String())
		case "tool_use":
			args := json.RawMessage(b.json.String())
			if b.json.Len() == 0 {
				args = b.input
			}
			resp.ToolCalls = append(resp.ToolCalls, delegation.ToolCall{ID: b.id, Name: b.name, Args: args})
		}
	}
	resp.Content, resp.Reasoning = text.String(), thinking.String()
	v := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	u := a.usage
	if u.Input != nil || u.Output != nil {
		resp.Usage = remote.MessagesUsage(v(u.Input), v(u.Output), u.CacheRead, v(u.CacheCreation))
	}
	return resp
}
