package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/model/openai"
)

// Upstream answers the requests the endpoint records.
type Upstream interface {
	// Chat answers one chat-completions request, writing the answer to out
	// as it comes (out records it); it returns when the answer is whole or
	// has failed. The context ends when the client goes away or the studio
	// stops.
	Chat(ctx context.Context, x *Exchange, out *Reply)
	// Models answers GET /v1/models (id "") or /v1/models/{id}.
	Models(ctx context.Context, h http.Header, id string, w http.ResponseWriter)
	// String says where calls go, for the session's origin: a URL, or
	// "script:" and the scenario.
	String() string
}

// Exchange is one request on its way to the upstream.
type Exchange struct {
	Request *Request
	Body    []byte      // as the client sent it
	Header  http.Header // the client's
	// Agent is who is calling, as the inference placed the call: the main
	// agent, a child (its subagent type and invocation), or unattached.
	Agent     ingest.AgentRef
	SessionID string
	Turn      *ingest.Turn
	// Timeout is how long the upstream may be silent.
	Timeout time.Duration
}

// writeTimeout bounds each write to the client: one that stops reading is
// let go rather than held forever.
const writeTimeout = 2 * time.Minute

// Reply is where an upstream writes its answer. It relays the answer to
// the client as it comes — each stream chunk written and flushed at once —
// and records it: text deltas shown live, the whole answer (or its error)
// recorded as the call's end *before* the last bytes go out, so that the
// client's next request, which may come the moment it has them, finds the
// answer's tool calls already waiting for their results.
type Reply struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	turn   *ingest.Turn
	now    func() time.Time
	stream bool

	answer openai.Answer
	// scrub, when set, keeps the operator's key out of the answer as
	// recorded (the upstream's scrubResponse): the relay has redacted it
	// piece by piece, and the whole is redacted again, as it was put
	// together.
	scrub    func(*delegation.Response)
	begun    bool // the status is written
	recorded bool // the call's end is recorded
	problem  string
}

func newReply(w http.ResponseWriter, turn *ingest.Turn, now func() time.Time, stream bool) *Reply {
	rc := http.NewResponseController(w)
	// The request is read: a long answer must not be cut by the server's
	// read deadline, which would end the request's context.
	_ = rc.SetReadDeadline(time.Time{})
	return &Reply{w: w, rc: rc, turn: turn, now: now, stream: stream}
}

// relayed are the upstream's headers a client may want: its request id,
// rate limits, processing time, when to retry.
func relayed(name string) bool {
	n := strings.ToLower(name)
	return n == "x-request-id" || n == "retry-after" || n == "retry-after-ms" ||
		strings.HasPrefix(n, "x-ratelimit-") || strings.HasPrefix(n, "openai-")
}

func (r *Reply) begin(status int, from http.Header, contentType string) {
	if r.begun {
		return
	}
	r.begun = true
	h := r.w.Header()
	for k, vs := range from {
		if relayed(k) {
			h[k] = append([]string(nil), vs...)
		}
	}
	h.Set("Content-Type", contentType)
	if contentType == "text/event-stream" {
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no") // a proxy in front must not hold chunks back
	}
	r.w.WriteHeader(status)
}

func (r *Reply) write(b []byte) { r.send(b, true) }

// send writes b, and sends it on at once unless told the next piece is
// already at hand (then both go out in one write, with the next).
func (r *Reply) send(b []byte, flush bool) {
	_ = r.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, _ = r.w.Write(b)
	if flush {
		_ = r.rc.Flush()
	}
}

// Begin starts a streamed answer with the upstream's status and headers.
func (r *Reply) Begin(status int, h http.Header) { r.begin(status, h, "text/event-stream") }

// Event relays one stream event (the data of an SSE event, not [DONE]) and
// reads it: its text is shown live. more says that the next event has
// already arrived whole: this one then goes out with it, in one write, not
// in a write of its own — nothing waits for what has not come yet.
func (r *Reply) Event(data []byte, more bool) {
	r.begin(http.StatusOK, nil, "text/event-stream")
	deltas, err := r.answer.Chunk(data)
	if err != nil && r.problem == "" {
		r.problem = err.Error()
	}
	for _, d := range deltas {
		r.turn.Delta(d)
	}
	r.send(append(append([]byte("data: "), data...), '\n', '\n'), !more)
}

// Comment relays an SSE comment (": keep-alive"), which resets no state.
func (r *Reply) Comment(line []byte) {
	r.begin(http.StatusOK, nil, "text/event-stream")
	r.write(append(append([]byte(nil), line...), '\n', '\n'))
}

// End ends a streamed answer: it is recorded, then [DONE] is relayed when
// the upstream sent it (done).
func (r *Reply) End(done bool) {
	r.begin(http.StatusOK, nil, "text/event-stream")
	switch {
	case r.problem != "":
		r.fail(r.problem)
	case !r.answer.Complete() && !done:
		r.fail("the stream ended before the answer was complete (no finish_reason, no [DONE])")
	default:
		r.record()
	}
	if done {
		r.write([]byte("data: [DONE]\n\n"))
	}
}

// Whole relays a whole (not streamed) answer, recorded first.
func (r *Reply) Whole(status int, h http.Header, body []byte) {
	if err := r.answer.Whole(body); err != nil {
		r.fail(err.Error())
	} else {
		r.record()
	}
	r.begin(status, h, "application/json")
	r.write(body)
}

// Fail relays an upstream's error answer with its status; the call is
// recorded as failed with what the body says.
func (r *Reply) Fail(status int, h http.Header, body []byte) {
	msg := openai.ErrorText(body)
	r.fail(fmt.Sprintf("the upstream answered %d %s: %s", status, http.StatusText(status), orDefault(msg, "no reason given")))
	if r.begun {
		// A stream already under way can only carry the error as an event.
		r.write(append(append([]byte("data: "), (&Error{Status: status, Message: orDefault(msg, http.StatusText(status))}).Body()...), '\n', '\n'))
		return
	}
	ct := "application/json"
	if got := h.Get("Content-Type"); got != "" {
		ct = got
	}
	r.begin(status, h, ct)
	r.write(body)
}

// Refuse answers with the studio's own error (a scripted upstream that has
// no turn for the caller, a request it cannot answer).
func (r *Reply) Refuse(e *Error) {
	r.fail(e.Message)
	if r.begun {
		r.write(append(append([]byte("data: "), e.Body()...), '\n', '\n'))
		return
	}
	r.begin(e.Status, retryHeader(e.RetryAfter), "application/json")
	r.write(e.Body())
}

// Abort ends a call that could not be completed — the upstream hung, could
// not be reached, or broke off — answering 502 or 504 when nothing was
// written yet, else an error event in the stream.
func (r *Reply) Abort(status int, why string) {
	r.Refuse(&Error{Status: status, Message: why, Code: codeFor(status)})
}

func codeFor(status int) string {
	switch status {
	case http.StatusGatewayTimeout:
		return "upstream_timeout"
	case http.StatusBadGateway:
		return "upstream_unreachable"
	}
	return ""
}

// record ends the call with the answer read.
func (r *Reply) record() {
	if r.recorded {
		return
	}
	r.RecordAnswer(r.answer.Response())
}

// RecordAnswer ends the call with an answer the upstream made itself (the
// scripted one), which it then writes, or one read off the wire (record,
// messages_reply.go).
func (r *Reply) RecordAnswer(resp *delegation.Response) {
	if r.recorded {
		return
	}
	r.recorded = true
	if r.scrub != nil {
		r.scrub(resp)
	}
	r.turn.Finish(ingest.CallOutput{Output: &ingest.Message{Role: delegation.RoleAssistant, Content: resp.Content,
		Reasoning: resp.Reasoning, ToolCalls: resp.ToolCalls}, Usage: resp.Usage, Response: resp.Meta, At: r.now()})
}

// Raw writes bytes the upstream made itself, as they are: its status, once,
// then its body or its events.
func (r *Reply) Raw(status int, contentType string, b []byte) {
	r.begin(status, nil, contentType)
	r.write(b)
}

func (r *Reply) fail(why string) {
	if r.recorded {
		return
	}
	r.recorded = true
	r.turn.Finish(ingest.CallOutput{Error: why, At: r.now()})
}

// close records the end of a call the upstream left unrecorded: the client
// went away, the studio stopped, or the upstream returned without a word.
func (r *Reply) close(ctx context.Context) {
	if r.recorded {
		return
	}
	if cutByStop(ctx, r) {
		r.Refuse(errClosing)
		return
	}
	why := "the upstream gave no answer"
	if cause := context.Cause(ctx); cause != nil {
		why = causeText(cause)
	}
	if r.begun || ctx.Err() != nil {
		r.fail(why)
		return
	}
	r.Abort(http.StatusBadGateway, why)
}

// cutByStop says whether the studio's stop cut the call before its answer
// was whole; the call is then recorded as failed, "the studio stopped",
// and its caller answers errClosing in its provider's shape — a 503 the
// client retries, or an error event ending a stream under way — rather
// than leave the client an empty 200 or a stream that ends without a word.
func cutByStop(ctx context.Context, r *Reply) bool {
	if r.recorded || !errors.Is(context.Cause(ctx), errStopped) {
		return false
	}
	r.fail(errStopped.Error())
	return true
}

func causeText(err error) string {
	if errors.Is(err, context.Canceled) {
		return "the client closed the connection before the answer was complete"
	}
	return err.Error()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
