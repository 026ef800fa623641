package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/model/remote"
)

// forwarder is what both upstreams share: where requests go, the key a
// request that brings none is sent with, the client, and the rule that
// keeps the key out of what comes back.
type forwarder struct {
	base string // without a trailing slash
	// key is sent with a request that carries no key of its own (the
	// environment's, read at start); "" sends none. It is never stored or
	// logged.
	key    string
	client *http.Client
	// redact keeps the key (and anything shaped like one) out of what the
	// upstream sends back, before it is relayed or recorded: an upstream may
	// echo the key it got in an error, a header, an answer.
	redact func(string) string
}

// newForwarder checks base (an absolute http(s) URL without a query, as in
// example) and makes the forwarder's client.
func newForwarder(base, key, example string) (forwarder, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return forwarder{}, fmt.Errorf("upstream %q is not an absolute http(s) URL without a query, such as %s", base, example)
	}
	// No overall timeout: an answer may stream for many minutes. Silence is
	// what is bounded, by the call's watchdog.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 0
	return forwarder{base: strings.TrimRight(base, "/"), key: key, redact: remote.Redactor(key), client: &http.Client{Transport: tr,
		// A redirect would carry the key to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

func (f *forwarder) String() string { return f.base }

// newRequest is a request to path with the body and, of the client's
// headers h, those named in pass; keyed adds the forwarder's key when the
// request brings none.
func (f *forwarder) newRequest(ctx context.Context, method, path string, h http.Header, body []byte, pass []string, keyed func(http.Header)) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, rd)
	if err != nil {
		return nil, err
	}
	for _, k := range pass {
		if v := h.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	if f.key != "" {
		keyed(req.Header)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// scrubError, scrubAnswer and scrubHeader make what the upstream sent safe
// to relay and record: an error's body, or headers, without the key or
// anything shaped like one; an answer's bytes without the key itself (its
// content is otherwise the model's, as it said it).
func (f *forwarder) scrubError(b []byte) []byte  { return []byte(f.redact(string(b))) }
func (f *forwarder) scrubAnswer(b []byte) []byte { return remote.RedactKey(b, f.key) }

// scrubResponse keeps the key out of the answer as recorded, by the rule
// the engine's adapters keep it out of theirs.
func (f *forwarder) scrubResponse(r *delegation.Response) { remote.RedactResponse(r, f.key) }

func (f *forwarder) scrubHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out[k] = append(out[k], f.redact(v))
		}
	}
	return out
}

// aborter is a reply a call that broke is answered on.
type aborter interface{ Abort(status int, why string) }

// broke answers a call whose upstream failed: silent past the timeout
// (504), unreachable or broken off (502), or left by the client.
func (f *forwarder) broke(ctx context.Context, dog *watchdog, out aborter, err error) {
	var silent errSilent
	switch cause := context.Cause(ctx); {
	case dog.hasFired() || errors.As(cause, &silent):
		out.Abort(http.StatusGatewayTimeout, errSilent{dog.d}.Error())
	case ctx.Err() != nil:
		// The client went away or the studio stopped: the reply's close says so.
	default:
		out.Abort(http.StatusBadGateway, "the upstream "+f.base+" could not be reached or broke off: "+transportError(err))
	}
}

// HTTPUpstream forwards requests to an OpenAI-compatible server, body and
// answer as they are.
type HTTPUpstream struct {
	forwarder // base is the server's /v1
}

// NewHTTPUpstream forwards to the server at base (its /v1, as OpenAI's SDKs
// take it). key, when not empty, is sent as a bearer token with requests
// that bring no Authorization of their own; it is never stored or logged.
func NewHTTPUpstream(base, key string) (*HTTPUpstream, error) {
	f, err := newForwarder(base, key, "https://api.openai.com/v1")
	if err != nil {
		return nil, err
	}
	return &HTTPUpstream{f}, nil
}

// forwarded are the client's headers that go on to the upstream besides
// the body's: its key, and the settings OpenAI reads from headers.
var forwarded = []string{"Authorization", "OpenAI-Organization", "OpenAI-Project", "OpenAI-Beta", "Idempotency-Key", "User-Agent", "Accept"}

func (u *HTTPUpstream) newRequest(ctx context.Context, method, path string, h http.Header, body []byte) (*http.Request, error) {
	return u.forwarder.newRequest(ctx, method, path, h, body, forwarded, func(rh http.Header) {
		if rh.Get("Authorization") == "" {
			rh.Set("Authorization", "Bearer "+u.key)
		}
	})
}

// errSilent is why a call to a silent upstream is cut.
type errSilent struct{ d time.Duration }

func (e errSilent) Error() string {
	return fmt.Sprintf("the upstream sent nothing for %s (the studio's --upstream-timeout): the call was cut", e.d)
}

// watchdog cancels a call when the upstream is silent for too long; every
// read from it starts the wait again.
type watchdog struct {
	d     time.Duration
	t     *time.Timer
	once  sync.Once
	fired chan struct{}
}

func newWatchdog(d time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{d: d, fired: make(chan struct{})}
	w.t = time.AfterFunc(d, func() {
		w.once.Do(func() { close(w.fired) })
		cancel(errSilent{d})
	})
	return w
}

func (w *watchdog) kick() { w.t.Reset(w.d) }
func (w *watchdog) stop() { w.t.Stop() }
func (w *watchdog) hasFired() bool {
	select {
	case <-w.fired:
		return true
	default:
		return false
	}
}

// kickReader starts the watchdog's wait again at every read that brings
// bytes.
type kickReader struct {
	r io.Reader
	w *watchdog
}

func (k kickReader) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if n > 0 {
		k.w.kick()
	}
	return n, err
}

// maxAnswer bounds a whole answer and one stream event read from the
// upstream; maxErrorBody an error's body.
// (A variable for the tests.)
var maxAnswer = 64 << 20

const maxErrorBody = 1 << 20

// Chat forwards the request and relays the answer: a stream event by event
// as it arrives, a whole answer at once, an error with its status.
func (u *HTTPUpstream) Chat(ctx context.Context, x *Exchange, out *Reply) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := newWatchdog(x.Timeout, cancel)
	defer dog.stop()
	out.scrub = u.scrubResponse
	req, err := u.newRequest(ctx, http.MethodPost, "/chat/completions", x.Header, x.Body)
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
		switch err := relayStream(body, out, &u.forwarder); {
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

// transportError is a transport error without the URL go's client puts in
// it (already said).
func transportError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// relayStream relays server-sent events one by one as they arrive, until
// [DONE] or the end of the stream, each made safe by f first: the key is
// redacted, in an event and split across events (textHolds).
func relayStream(r io.Reader, out *Reply, f *forwarder) error {
	holds := newTextHolds(f.key)
	rest := func() {
		if b := holds.chatRest(); b != nil {
			out.Event(b, false)
		}
	}
	done, err := readEvents(r, func(_, data []byte, more bool) bool {
		switch {
		case len(data) == 0: // event:, id: and retry: fields are not used by chat completions
			return false
		case string(bytes.TrimSpace(data)) == "[DONE]":
			rest()
			out.End(true)
			return true
		}
		out.Event(holds.chat(f.scrubAnswer(data)), more)
		return false
	}, func(c []byte) { out.Comment(f.scrubAnswer(c)) })
	if err == nil && !done {
		rest()
		out.End(false)
	}
	return err
}

// readEvents reads server-sent events as they arrive, each of any size up
// to maxAnswer (then errEventTooLarge): event gets its name (event:), its
// data lines joined, and whether more is already at hand, and ends the
// reading by returning true (then readEvents says done); comment gets each
// comment line. The end of the stream ends it too, its last event given.
func readEvents(r io.Reader, event func(name, data []byte, more bool) bool, comment func([]byte)) (done bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var name []byte
	var data [][]byte
	flush := func() bool {
		if len(data) == 0 && len(name) == 0 {
			return false
		}
		stop := event(name, bytes.Join(data, []byte("\n")), nextAtHand(br))
		name, data = nil, data[:0]
		return stop
	}
	size := 0
	for {
		line, err := readLine(br, maxAnswer-size)
		if len(line) > 0 {
			size += len(line)
			if size > maxAnswer {
				return false, errEventTooLarge
			}
			text := bytes.TrimRight(line, "\r\n")
			switch {
			case len(text) == 0:
				if flush() {
					return true, nil
				}
				size = 0
			case text[0] == ':':
				comment(text)
			case bytes.HasPrefix(text, []byte("event:")):
				name = bytes.TrimSpace(bytes.TrimPrefix(text, []byte("event:")))
			case bytes.HasPrefix(text, []byte("data:")):
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(text, []byte("data:")), []byte(" ")))
			}
		}
		if errors.Is(err, io.EOF) {
			return flush(), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// errEventTooLarge ends a stream with an event larger than the studio
// relays (maxAnswer): said to the caller in an error event, never dropped.
var errEventTooLarge = errors.New("a stream event too large")

// readLine reads one line, its newline included, of any length up to
// limit bytes (then errEventTooLarge, past it) or the end of the stream.
// The line is the caller's: it stays as read when the buffer is refilled.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		// ReadSlice's bytes are the buffer's, overwritten by the next read:
		// copied before it.
		line = append(line, part...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
		if len(line) > limit {
			return line, errEventTooLarge
		}
	}
}

// nextAtHand reports whether the next event has already arrived whole (its
// blank line is in the buffer), so that the one before it can go out with
// it: a fast upstream's pieces, read many at a time, are relayed many to a
// write, as they came, rather than one write and flush each.
func nextAtHand(br *bufio.Reader) bool {
	b, _ := br.Peek(br.Buffered())
	return bytes.Contains(b, []byte("\n\n"))
}

// Models forwards GET /models (or /models/{id}) and relays the answer.
func (u *HTTPUpstream) Models(ctx context.Context, h http.Header, id string, w http.ResponseWriter) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	path := "/models"
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
				b = u.scrubError(b)
				for k, vs := range u.scrubHeader(resp.Header) {
					if relayed(k) {
						w.Header()[k] = vs
					}
				}
				w.Header().Set("Content-Type", orDefault(resp.Header.Get("Content-Type"), "application/json"))
				w.WriteHeader(resp.StatusCode)
				_, _ = w.Write(b)
				return
			}
			err = rerr
		}
	}
	(&Error{Status: http.StatusBadGateway, Code: "upstream_unreachable",
		Message: "the upstream " + u.base + " could not be reached: " + transportError(err)}).Write(w)
}
