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

	"github.com/delegationstudio/studio/internal/model/remote"
)

// HTTPUpstream forwards requests to an OpenAI-compatible server, body and
// answer as they are.
type HTTPUpstream struct {
	base string // the base URL, without a trailing slash: …/v1
	// key is the Authorization a request that carries none is sent with
	// (the environment's key, read at start); "" sends none.
	key    string
	client *http.Client
	// redact keeps the key (and anything shaped like one) out of what the
	// upstream sends back, before it is relayed or recorded: an upstream may
	// echo the Authorization it got in an error, a header, an answer.
	redact func(string) string
}

// NewHTTPUpstream forwards to the server at base (its /v1, as OpenAI's SDKs
// take it). key, when not empty, is sent as a bearer token with requests
// that bring no Authorization of their own; it is never stored or logged.
func NewHTTPUpstream(base, key string) (*HTTPUpstream, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("upstream %q is not an absolute http(s) URL without a query, such as https://api.openai.com/v1", base)
	}
	// No overall timeout: an answer may stream for many minutes. Silence is
	// what is bounded, by the call's watchdog.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 0
	return &HTTPUpstream{base: strings.TrimRight(base, "/"), key: key, redact: remote.Redactor(key), client: &http.Client{Transport: tr,
		// A redirect would carry the key to wherever it points.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

func (u *HTTPUpstream) String() string { return u.base }

// forwarded are the client's headers that go on to the upstream besides
// the body's: its key, and the settings OpenAI reads from headers.
var forwarded = []string{"Authorization", "OpenAI-Organization", "OpenAI-Project", "OpenAI-Beta", "Idempotency-Key", "User-Agent", "Accept"}

func (u *HTTPUpstream) newRequest(ctx context.Context, method, path string, h http.Header, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.base+path, rd)
	if err != nil {
		return nil, err
	}
	for _, k := range forwarded {
		if v := h.Get(k); v != "" {
			req.Header.Set(k, v)
		}
	}
	if req.Header.Get("Authorization") == "" && u.key != "" {
		req.Header.Set("Authorization", "Bearer "+u.key)
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
func (u *HTTPUpstream) scrubError(b []byte) []byte  { return []byte(u.redact(string(b))) }
func (u *HTTPUpstream) scrubAnswer(b []byte) []byte { return remote.RedactKey(b, u.key) }

func (u *HTTPUpstream) scrubHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vs := range h {
		for _, v := range vs {
			out[k] = append(out[k], u.redact(v))
		}
	}
	return out
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
		switch err := relayStream(body, out, u.scrubAnswer); {
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

// broke answers a call whose upstream failed: silent past the timeout
// (504), unreachable or broken off (502), or left by the client.
func (u *HTTPUpstream) broke(ctx context.Context, dog *watchdog, out *Reply, err error) {
	var silent errSilent
	switch cause := context.Cause(ctx); {
	case dog.hasFired() || errors.As(cause, &silent):
		out.Abort(http.StatusGatewayTimeout, errSilent{dog.d}.Error())
	case ctx.Err() != nil:
		// The client went away or the studio stopped: Reply.close says so.
	default:
		out.Abort(http.StatusBadGateway, "the upstream "+u.base+" could not be reached or broke off: "+transportError(err))
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
// [DONE] or the end of the stream, each made safe by scrub first.
func relayStream(r io.Reader, out *Reply, scrub func([]byte) []byte) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var data [][]byte
	flush := func() bool {
		if len(data) == 0 {
			return false
		}
		ev := bytes.Join(data, []byte("\n"))
		data = data[:0]
		if string(bytes.TrimSpace(ev)) == "[DONE]" {
			out.End(true)
			return true
		}
		out.Event(scrub(ev), nextAtHand(br))
		return false
	}
	size := 0
	for {
		line, err := readLine(br, maxAnswer-size)
		if len(line) > 0 {
			size += len(line)
			if size > maxAnswer {
				return errEventTooLarge
			}
			text := bytes.TrimRight(line, "\r\n")
			switch {
			case len(text) == 0:
				if flush() {
					return nil
				}
				size = 0
			case text[0] == ':':
				out.Comment(scrub(text))
			case bytes.HasPrefix(text, []byte("data:")):
				data = append(data, bytes.TrimPrefix(bytes.TrimPrefix(text, []byte("data:")), []byte(" ")))
			}
			// event:, id: and retry: fields are not used by chat completions.
		}
		if errors.Is(err, io.EOF) {
			if flush() {
				return nil
			}
			out.End(false)
			return nil
		}
		if err != nil {
			return err
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
