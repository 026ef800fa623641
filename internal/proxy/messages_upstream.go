package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// AnthropicKeyEnv is the variable Anthropic's SDKs read their key from; it
// goes to Anthropic's own API only (AnthropicKeyVar).
const AnthropicKeyEnv = "ANTHROPIC_API_KEY"

// AnthropicKeyVar is the variable an Anthropic upstream's key is read from
// when none is named: ANTHROPIC_API_KEY at Anthropic's own API, as in its
// SDKs, and nowhere else, so that a key is never sent to a host it was not
// meant for.
func AnthropicKeyVar(base string) string {
	u, err := url.Parse(base)
	if err == nil && u.Scheme == "https" && strings.EqualFold(u.Hostname(), "api.anthropic.com") {
		return AnthropicKeyEnv
	}
	return ""
}

// AnthropicUpstream forwards Messages requests to an Anthropic server,
// body and answer as they are.
type AnthropicUpstream struct {
	forwarder // base as Anthropic's SDKs take it, without /v1: https://api.anthropic.com
}

// NewAnthropicUpstream forwards to the server at base, as Anthropic's SDKs
// take it (https://api.anthropic.com; a trailing /v1 is taken too). key,
// when not empty, is sent as x-api-key with requests that bring neither
// x-api-key nor Authorization; it is never stored or logged.
func NewAnthropicUpstream(base, key string) (*AnthropicUpstream, error) {
	f, err := newForwarder(base, key, "https://api.anthropic.com")
	if err != nil {
		return nil, err
	}
	f.base = strings.TrimSuffix(f.base, "/v1")
	return &AnthropicUpstream{f}, nil
}

// anthropicForwarded are the client's headers that go on to an Anthropic
// upstream besides the body: its key (x-api-key, or a bearer token), the
// API version and betas it asks for.
var anthropicForwarded = []string{"X-Api-Key", "Authorization", "Anthropic-Version", "Anthropic-Beta", "Idempotency-Key", "User-Agent", "Accept"}

func (u *AnthropicUpstream) newRequest(ctx context.Context, method, path string, h http.Header, body []byte) (*http.Request, error) {
	return u.forwarder.newRequest(ctx, method, path, h, body, anthropicForwarded, func(rh http.Header) {
		if rh.Get("X-Api-Key") == "" && rh.Get("Authorization") == "" {
			rh.Set("X-Api-Key", u.key)
		}
	})
}

// Messages forwards the request and relays the answer: a stream event by
// event as it arrives, a whole answer at once, an error with its status.
func (u *AnthropicUpstream) Messages(ctx context.Context, x *Exchange, _ *MessagesRequest, out *MessagesReply) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := newWatchdog(x.Timeout, cancel)
	defer dog.stop()
	out.r.scrub = u.scrubResponse
	req, err := u.newRequest(ctx, http.MethodPost, "/v1/messages", x.Header, x.Body)
	if err != nil {
		out.Abort(http.StatusBadGateway, "the request could not be forwarded: "+err.Error())
		return
	}
	resp, err := u.client.Do(req)
	if err != nil {
		u.broke(ctx, dog, out, err)
		return
	}
	defer resp.Body.Close()
	dog.kick()
	body := kickReader{r: resp.Body, w: dog}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode >= 300:
		b, err := io.ReadAll(io.LimitReader(body, maxErrorBody))
		if err != nil && ctx.Err() != nil {
			u.broke(ctx, dog, out, err)
			return
		}
		out.Fail(resp.StatusCode, u.scrubHeader(resp.Header), u.scrubError(b))
	case mt == "text/event-stream":
		out.Begin(resp.StatusCode, u.scrubHeader(resp.Header))
		switch err := relayMessagesStream(body, out, &u.forwarder); {
		case errors.Is(err, errEventTooLarge):
			out.Abort(http.StatusBadGateway, fmt.Sprintf("the upstream sent a stream event over %s, more than the studio relays: the answer was cut there",
				byteSize(int64(maxAnswer))))
		case err != nil:
			u.broke(ctx, dog, out, err)
		}
	default:
		b, err := io.ReadAll(io.LimitReader(body, int64(maxAnswer)+1))
		switch {
		case err != nil:
			u.broke(ctx, dog, out, err)
		case len(b) > maxAnswer:
			out.Abort(http.StatusBadGateway, fmt.Sprintf("the upstream's answer is over %s, more than the studio relays", byteSize(int64(maxAnswer))))
		default:
			out.Whole(resp.StatusCode, u.scrubHeader(resp.Header), u.scrubAnswer(b))
		}
	}
}

// Chat refuses chat completions: an Anthropic upstream answers Messages.
func (u *AnthropicUpstream) Chat(_ context.Context, _ *Exchange, out *Reply) {
	out.Refuse(&Error{Status: http.StatusNotFound, Code: "not_served", Message: "This studio's upstream, " + u.base +
		", speaks Anthropic's Messages API: send POST /v1/messages (Anthropic's SDKs, base URL the studio's, without /v1), " +
		"or start the studio with an OpenAI-compatible --upstream-url (docs/proxy.md)."})
}

// Models forwards GET /v1/models (or /v1/models/{id}) and relays the
// answer, as Anthropic's API lists its models.
func (u *AnthropicUpstream) Models(ctx context.Context, h http.Header, id string, w http.ResponseWriter) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path := "/v1/models"
	if id != "" {
		path += "/" + url.PathEscape(id)
	}
	req, err := u.newRequest(ctx, http.MethodGet, path, h, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = u.client.Do(req); err == nil {
			defer resp.Body.Close()
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
			if rerr == nil {
				for k, vs := range u.scrubHeader(resp.Header) {
					if relayed(k) || anthropicRelayed(k) {
						w.Header()[k] = vs
					}
				}
				w.Header().Set("Content-Type", orDefault(resp.Header.Get("Content-Type"), "application/json"))
				w.WriteHeader(resp.StatusCode)
				_, _ = w.Write(u.scrubAnswer(b))
				return
			}
			err = rerr
		}
	}
	(&AnthropicError{Status: http.StatusBadGateway, Message: "the upstream " + u.base + " could not be reached: " + transportError(err)}).Write(w)
}

// Messages plays the calling agent's next turn of the script, as
// Anthropic writes an answer: a whole message, or its stream of events
// (message_start, a content block per text and tool_use, message_delta with
// the stop reason and usage, message_stop).
func (u *ScriptUpstream) Messages(ctx context.Context, x *Exchange, m *MessagesRequest, out *MessagesReply) {
	if err := m.CheckSequence(); err != nil {
		out.Refuse(err)
		return
	}
	w := &eventWriter{out: out, msg: wireMessageObj{ID: "msg_" + strings.ReplaceAll(x.Turn.CallID(), ".", "_") + "_" + shortID(x.SessionID),
		Type: "message", Role: "assistant", Model: x.Request.Model, Content: []wireBlock{}}}
	input := x.Turn.InputTokens()
	var stream func(string)
	if x.Request.Stream {
		stream = func(delta string) { w.text(input, delta) }
	}
	resp, err := u.play(ctx, x, stream)
	if err != nil {
		out.Refuse(asAnthropic(err))
		return
	}
	if resp == nil {
		return // the client left, or the studio stops: close says so
	}
	stop := "end_turn"
	if len(resp.ToolCalls) > 0 {
		stop = "tool_use"
	}
	zero, output := 0, resp.Usage.CompletionTokens
	usage := &anthropicUsage{Input: &resp.Usage.PromptTokens, Output: &output, CacheCreation: &zero, CacheRead: &zero}
	blocks := []wireBlock{}
	if resp.Content != "" {
		blocks = append(blocks, wireBlock{Type: "text", Text: resp.Content})
	}
	for _, c := range resp.ToolCalls {
		blocks = append(blocks, wireBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: toolInput(c.Args)})
	}
	if !x.Request.Stream {
		w.msg.Content, w.msg.Stop, w.msg.Usage = blocks, &stop, usage
		body, _ := json.Marshal(w.msg)
		out.r.RecordAnswer(resp)
		out.r.Raw(http.StatusOK, "application/json", body)
		return
	}
	if resp.Content != "" && !w.sentText {
		w.text(input, resp.Content)
	}
	w.start(input)
	if w.open {
		w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": w.index})
		w.index++
	}
	for _, c := range resp.ToolCalls {
		w.event("content_block_start", map[string]any{"type": "content_block_start", "index": w.index,
			"content_block": wireBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: json.RawMessage("{}")}})
		w.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": w.index,
			"delta": map[string]string{"type": "input_json_delta", "partial_json": string(toolInput(c.Args))}})
		w.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": w.index})
		w.index++
	}
	w.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": output}})
	out.r.RecordAnswer(resp)
	w.event("message_stop", map[string]string{"type": "message_stop"})
}

// toolInput is a tool call's arguments as a tool_use input: a JSON object.
func toolInput(args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return args
}

// eventWriter writes a scripted answer as Anthropic's stream events;
// nothing is written before the first, so that a turn the script cannot
// play is still answered with an error status.
type eventWriter struct {
	out      *MessagesReply
	msg      wireMessageObj
	started  bool // message_start went out
	open     bool // a text block is open
	index    int
	sentText bool
}

func (w *eventWriter) start(input int) {
	if w.started {
		return
	}
	w.started = true
	zero, one := 0, 1
	m := w.msg
	m.Usage = &anthropicUsage{Input: &input, Output: &one, CacheCreation: &zero, CacheRead: &zero}
	w.event("message_start", map[string]any{"type": "message_start", "message": m})
	w.event("ping", map[string]string{"type": "ping"})
}

func (w *eventWriter) text(input int, delta string) {
	w.start(input)
	if !w.open {
		w.open = true
		w.event("content_block_start", map[string]any{"type": "content_block_start", "index": w.index,
			"content_block": map[string]string{"type": "text", "text": ""}})
	}
	if delta != "" {
		w.sentText = true
		w.out.r.turn.Delta(delta)
	}
	w.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": w.index,
		"delta": map[string]string{"type": "text_delta", "text": delta}})
}

func (w *eventWriter) event(name string, v any) {
	b, _ := json.Marshal(v)
	w.out.r.Raw(http.StatusOK, "text/event-stream", []byte("event: "+name+"\ndata: "+string(b)+"\n\n"))
}

var _ MessagesUpstream = (*AnthropicUpstream)(nil)
var _ MessagesUpstream = (*ScriptUpstream)(nil)
