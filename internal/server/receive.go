package server

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/pricing"
	"github.com/delegationstudio/studio/internal/tokens"
)

// Defaults of how a received trace ends (docs/ingest.md).
const (
	// DefaultQuiet: a trace from which no span arrived for this long ends
	// as interrupted. Spans arrive when they end, so a single model call
	// may be silent for minutes; this is well past any.
	DefaultQuiet = 10 * time.Minute
	// DefaultGrace: once a trace's root span has arrived, spans still
	// missing (children whose parent never came) are waited for this long.
	DefaultGrace = 5 * time.Second
	// DefaultMaxTraces: the most traces received at once. Past it, the
	// trace quiet for longest ends (interrupted) to make room; the
	// engine's runs have a cap of their own (Limits.MaxRunning).
	DefaultMaxTraces = 256
)

// receiver turns OTLP traces into sessions as their spans arrive: one
// session per trace id, fed through the runner's recorder like any other.
type receiver struct {
	s     *Server
	quiet time.Duration
	grace time.Duration
	max   int // traces open at once

	mu     sync.Mutex
	traces map[string]*liveTrace // by trace id
	closed bool
	wg     sync.WaitGroup // the traces being ended to make room
}

// liveTrace is one trace being received.
type liveTrace struct {
	mu       sync.Mutex
	id       string // the session's
	tr       *ingest.Trace
	done     func() error
	rootSeen time.Time // when the root span arrived
	// last (unix nanoseconds: when a span last arrived) and ended are
	// atomic so that the receiver reads them under its own lock only: a
	// trace's lock is taken before the receiver's, never after.
	last  atomic.Int64
	ended atomic.Bool
}

func (lt *liveTrace) lastSpan() time.Time { return time.Unix(0, lt.last.Load()) }

func newReceiver(s *Server) *receiver {
	r := &receiver{s: s, quiet: s.cfg.OTLPQuiet, grace: s.cfg.OTLPGrace, max: s.cfg.OTLPMaxTraces, traces: map[string]*liveTrace{}}
	if r.max <= 0 {
		r.max = DefaultMaxTraces
	}
	if r.quiet <= 0 {
		r.quiet = DefaultQuiet
	}
	if r.grace <= 0 {
		r.grace = DefaultGrace
	}
	return r
}

// apiReceiveTraces is POST /v1/traces, OTLP/HTTP: protobuf or JSON, gzip or
// not. It answers ExportTraceServiceResponse in the request's encoding,
// with a partial success when some spans could not be used.
func (s *Server) apiReceiveTraces(c echo.Context) error {
	req := c.Request()
	mt, _, _ := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType))
	asJSON := mt == echo.MIMEApplicationJSON
	if !asJSON && mt != "application/x-protobuf" && mt != "application/protobuf" {
		return otlpError(c, false, http.StatusUnsupportedMediaType,
			"send OTLP as application/x-protobuf or application/json, not "+orQuote(mt))
	}
	body, status, err := readOTLPBody(req)
	if err != nil {
		return otlpError(c, asJSON, status, err.Error())
	}
	decode := ingest.DecodeProto
	if asJSON {
		decode = ingest.DecodeJSON
	}
	traces, err := decode(body)
	if err != nil {
		return otlpError(c, asJSON, http.StatusBadRequest, err.Error())
	}
	batch := ingest.Group(traces)
	rejected, reasons := batch.Rejected, batch.Reasons
	dups, example := 0, ""
	for _, id := range batch.Order {
		n, first, err := s.receiver.add(c.Request().Context(), id, batch.Traces[id])
		if err != nil {
			if errors.Is(err, errReceiverClosed) {
				return otlpError(c, asJSON, http.StatusServiceUnavailable, "the studio is stopping; send these spans again to the next one")
			}
			return err
		}
		if n > 0 && dups == 0 {
			example = fmt.Sprintf("%q, span id %s of trace %s", first.Name, first.ID, id)
		}
		dups += n
	}
	if dups > 0 {
		rejected += dups
		reasons = append(reasons, fmt.Sprintf("%d spans had a span id this trace already had (the first: %s) and were left out, the first one kept: "+
			"an exporter's retry is harmless; otherwise give each span an id of its own", dups, example))
	}
	return otlpResponse(c, asJSON, rejected, strings.Join(reasons, "; "))
}

func orQuote(s string) string {
	if s == "" {
		return "no Content-Type"
	}
	return fmt.Sprintf("%q", s)
}

// readOTLPBody reads a request body, gunzipping it when it says so, and
// refuses one past MaxOTLPBody either way.
func readOTLPBody(req *http.Request) ([]byte, int, error) {
	var r io.Reader = req.Body
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("the body says Content-Encoding: gzip but is not gzip: %v", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("Content-Encoding %q is not supported: send gzip or nothing", enc)
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxOTLPBody+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request is larger than the studio takes; send smaller batches")
		}
		return nil, http.StatusBadRequest, fmt.Errorf("cannot read the body: %v", err)
	}
	if len(b) > MaxOTLPBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the request is over %d MiB once decompressed, the most /v1/traces takes; send smaller batches (the exporters' default of 512 spans is far below it)", MaxOTLPBody>>20)
	}
	return b, 0, nil
}

// otlpResponse writes ExportTraceServiceResponse: empty when every span was
// used, else partial_success with how many were rejected and why.
func otlpResponse(c echo.Context, asJSON bool, rejected int, reason string) error {
	if asJSON {
		var out struct {
			PartialSuccess *struct {
				RejectedSpans string `json:"rejectedSpans,omitempty"`
				ErrorMessage  string `json:"errorMessage,omitempty"`
			} `json:"partialSuccess,omitempty"`
		}
		if rejected > 0 || reason != "" {
			out.PartialSuccess = &struct {
				RejectedSpans string `json:"rejectedSpans,omitempty"`
				ErrorMessage  string `json:"errorMessage,omitempty"`
			}{RejectedSpans: fmt.Sprint(rejected), ErrorMessage: reason}
		}
		return c.JSON(http.StatusOK, out)
	}
	// ExportTraceServiceResponse { ExportTracePartialSuccess partial_success = 1; }
	// ExportTracePartialSuccess { int64 rejected_spans = 1; string error_message = 2; }
	var b []byte
	if rejected > 0 || reason != "" {
		var ps []byte
		if rejected > 0 {
			ps = protowire.AppendTag(ps, 1, protowire.VarintType)
			ps = protowire.AppendVarint(ps, uint64(rejected))
		}
		if reason != "" {
			ps = protowire.AppendTag(ps, 2, protowire.BytesType)
			ps = protowire.AppendString(ps, reason)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ps)
	}
	return c.Blob(http.StatusOK, "application/x-protobuf", b)
}

// otlpError answers as OTLP/HTTP asks: a google.rpc.Status in the request's
// encoding (code 3, INVALID_ARGUMENT, for bad input), which in JSON also
// carries the studio's usual "error".
func otlpError(c echo.Context, asJSON bool, status int, msg string) error {
	code := 3 // INVALID_ARGUMENT
	switch status {
	case http.StatusRequestEntityTooLarge:
		code = 8 // RESOURCE_EXHAUSTED
	case http.StatusServiceUnavailable:
		code = 14 // UNAVAILABLE
	case http.StatusUnauthorized:
		code = 16 // UNAUTHENTICATED
	}
	if asJSON {
		return c.JSON(status, map[string]any{"code": code, "message": msg, "error": msg})
	}
	// google.rpc.Status { int32 code = 1; string message = 2; }
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, msg)
	return c.Blob(status, "application/x-protobuf", b)
}

var errReceiverClosed = errors.New("the receiver is closed")

// add feeds a trace's spans to its session, creating it for a trace not
// seen before (or whose session has ended: late spans get a session of
// their own), and ends it once its root span has arrived and nothing is
// missing.
// It returns how many spans had an id the trace already had, and the first.
func (r *receiver) add(ctx context.Context, traceID string, spans []ingest.Span) (int, *ingest.Span, error) {
	lt, err := r.get(ctx, traceID, spans)
	if err != nil {
		return 0, nil, err
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.ended.Load() {
		return 0, nil, nil
	}
	dups, first := lt.tr.Add(spans)
	now := r.s.now()
	lt.last.Store(now.UnixNano())
	if lt.tr.Root() != nil && lt.rootSeen.IsZero() {
		lt.rootSeen = now
	}
	if lt.tr.Complete() {
		r.endLocked(traceID, lt, "", "")
	}
	return dups, first, nil
}

func (r *receiver) get(ctx context.Context, traceID string, spans []ingest.Span) (*liveTrace, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errReceiverClosed
	}
	if lt := r.traces[traceID]; lt != nil && !lt.ended.Load() {
		return lt, nil
	}
	r.makeRoomLocked()
	name := ingest.NameOf(spans)
	lt := &liveTrace{}
	lt.last.Store(r.s.now().UnixNano())
	stop := func() {
		go r.end(traceID, lt, delegation.StatusInterrupted, "stopped in the studio before the trace ended")
	}
	rec, done, err := r.s.runner.Receive(ctx, &db.Session{Name: name, Tokenizer: tokens.Default,
		Scenario: json.RawMessage("{}")}, stop)
	if err != nil {
		return nil, err
	}
	lt.id, lt.done = rec.SessionID(), done
	counter, _ := tokens.Get(tokens.Default)
	lt.tr = ingest.NewTrace(ingest.Config{SessionID: lt.id, Name: name, Tokenizer: tokens.Default, Counter: counter,
		Sink: rec, TaskTool: r.s.cfg.TaskTool, Prices: pricing.Lookup})
	r.traces[traceID] = lt
	r.s.log.Info("receiving a trace", "trace", traceID, "session", lt.id, "service", name)
	return lt, nil
}

// makeRoomLocked keeps a new trace within the cap: when r.max traces are
// open, the one from which no span arrived for longest leaves the map at
// once and ends, interrupted, on a goroutine of its own (ending takes its
// trace's lock, which is never taken under r.mu).
func (r *receiver) makeRoomLocked() {
	for len(r.traces) >= r.max {
		var oldestID string
		var oldest *liveTrace
		for id, lt := range r.traces {
			if oldest == nil || lt.last.Load() < oldest.last.Load() {
				oldestID, oldest = id, lt
			}
		}
		delete(r.traces, oldestID)
		quiet := r.s.now().Sub(oldest.lastSpan()).Round(time.Second)
		r.s.log.Warn("too many traces open at once; the quietest one is ended to make room",
			"trace", oldestID, "session", oldest.id, "open", r.max, "quiet_for", quiet)
		reason := fmt.Sprintf("the studio was receiving %d traces at once, the most it holds open (serve --otlp-max-traces); "+
			"this one had been quiet longest (no span for %s), so it was ended to make room; its later spans start a session of their own", r.max, quiet)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.end(oldestID, oldest, delegation.StatusInterrupted, reason)
		}()
	}
}

// end ends a trace's session (status "" lets its root span decide).
func (r *receiver) end(traceID string, lt *liveTrace, status, reason string) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	r.endLocked(traceID, lt, status, reason)
}

func (r *receiver) endLocked(traceID string, lt *liveTrace, status, reason string) {
	if lt.ended.Load() {
		return
	}
	lt.ended.Store(true)
	at := time.Time{}
	if status != "" {
		at = r.s.now()
	}
	lt.tr.Close(status, reason, at)
	if err := lt.done(); err != nil {
		r.s.log.Error("recording a received trace", "trace", traceID, "session", lt.id, "err", err)
	}
	r.mu.Lock()
	if r.traces[traceID] == lt {
		delete(r.traces, traceID)
	}
	r.mu.Unlock()
}

// sweep ends the traces whose time is up: those whose root arrived more
// than the grace ago (finished, with whatever never came shown as orphans),
// and those silent for the quiet period (interrupted).
func (r *receiver) sweep(now time.Time) {
	r.mu.Lock()
	type item struct {
		id string
		lt *liveTrace
	}
	var all []item
	for id, lt := range r.traces {
		all = append(all, item{id, lt})
	}
	r.mu.Unlock()
	for _, it := range all {
		lt := it.lt
		lt.mu.Lock()
		switch {
		case lt.ended.Load():
		case !lt.rootSeen.IsZero() && now.Sub(lt.rootSeen) >= r.grace:
			r.endLocked(it.id, lt, "", "")
		case now.Sub(lt.lastSpan()) >= r.quiet:
			r.endLocked(it.id, lt, delegation.StatusInterrupted,
				fmt.Sprintf("no span of this trace arrived for %s: the program stopped, or lost its exporter, before its root span ended", r.quiet))
		}
		lt.mu.Unlock()
	}
}

// run sweeps now and then until ctx ends.
func (r *receiver) run(ctx context.Context) {
	every := min(r.grace, r.quiet) / 2
	every = max(every, 50*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sweep(r.s.now())
		}
	}
}

// close ends every trace still being received, as interrupted, and takes
// no more.
func (r *receiver) close() {
	r.mu.Lock()
	r.closed = true
	var all []struct {
		id string
		lt *liveTrace
	}
	for id, lt := range r.traces {
		all = append(all, struct {
			id string
			lt *liveTrace
		}{id, lt})
	}
	r.mu.Unlock()
	for _, it := range all {
		r.end(it.id, it.lt, delegation.StatusInterrupted, db.ReasonStopped)
	}
	r.wg.Wait() // the traces ended to make room
}
