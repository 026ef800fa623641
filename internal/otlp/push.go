package otlp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/delegationstudio/studio/internal/retryafter"
)

// Protocols of OTLP/HTTP, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolProtobuf = "http/protobuf"
	ProtocolJSON     = "http/json"
)

// Defaults of PushConfig.
const (
	DefaultTimeout    = 10 * time.Second
	DefaultMaxRetries = 5
	// DefaultBatchBytes keeps each request well under the OpenTelemetry
	// Collector's default limits on an OTLP/HTTP request.
	DefaultBatchBytes = 4 << 20
	// maxRetryAfter is the longest Retry-After the pusher waits.
	maxRetryAfter = 2 * time.Minute
)

// PushConfig says where and how spans are pushed.
type PushConfig struct {
	// Endpoint is the URL the spans are POSTed to, e.g.
	// http://localhost:4318/v1/traces.
	Endpoint string
	// Protocol is ProtocolProtobuf (the default when empty) or ProtocolJSON.
	Protocol string
	// Headers are sent with every request (an Authorization header, say).
	Headers map[string]string
	// Timeout bounds each request (0: DefaultTimeout).
	Timeout time.Duration
	// MaxRetries bounds the retries of a request the endpoint throttled
	// (429) or could not take for now (502, 503, 504), or that did not reach
	// it (0: DefaultMaxRetries; negative: none).
	MaxRetries int
	// Backoff is the wait before retry number attempt (1, 2, …) when the
	// endpoint gives no Retry-After; nil means exponential from about half a
	// second, with jitter, capped at about 30 s.
	Backoff func(attempt int) time.Duration
	// Wait waits d or until ctx ends; nil means a timer. Tests replace it.
	Wait func(ctx context.Context, d time.Duration) error
	// BatchBytes bounds a request's body; a larger session is sent in
	// several requests (0: DefaultBatchBytes).
	BatchBytes int
	// Client makes the requests; nil means http.DefaultClient's transport.
	Client *http.Client
}

// Environment variables of the OTLP exporter's configuration
// (OpenTelemetry's specification), read by ConfigFromEnv.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"
	EnvTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTimeout        = "OTEL_EXPORTER_OTLP_TIMEOUT"
	EnvTracesTimeout  = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
)

// ConfigFromEnv builds a push configuration as an OpenTelemetry SDK's OTLP
// exporter would, from the OTEL_EXPORTER_OTLP_* variables, with the
// command line's endpoint and protocol, when given, before them. endpoint
// is a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT: /v1/traces is added to
// its path unless it already ends so; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// taken as it is. It reports false when no endpoint is set anywhere.
func ConfigFromEnv(endpoint, protocol string, getenv func(string) string) (PushConfig, bool, error) {
	var cfg PushConfig
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := strings.TrimSpace(getenv(k)); v != "" {
				return v
			}
		}
		return ""
	}
	switch {
	case strings.TrimSpace(endpoint) != "":
		cfg.Endpoint = tracesURL(strings.TrimSpace(endpoint))
	case first(EnvTracesEndpoint) != "":
		cfg.Endpoint = first(EnvTracesEndpoint)
	case first(EnvEndpoint) != "":
		cfg.Endpoint = tracesURL(first(EnvEndpoint))
	default:
		return cfg, false, nil
	}
	cfg.Protocol = strings.TrimSpace(protocol)
	if cfg.Protocol == "" {
		cfg.Protocol = first(EnvTracesProtocol, EnvProtocol)
	}
	var err error
	if cfg.Headers, err = parseHeaders(first(EnvHeaders), EnvHeaders); err != nil {
		return cfg, true, err
	}
	signal, err := parseHeaders(first(EnvTracesHeaders), EnvTracesHeaders)
	if err != nil {
		return cfg, true, err
	}
	for k, v := range signal {
		cfg.Headers[k] = v
	}
	if t := first(EnvTracesTimeout, EnvTimeout); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms < 0 {
			return cfg, true, fmt.Errorf("%s=%q: give the timeout in milliseconds, e.g. 10000", EnvTimeout, t)
		}
		cfg.Timeout = time.Duration(ms) * time.Millisecond
	}
	return cfg, true, cfg.check()
}

// tracesURL adds the traces path to a base OTLP/HTTP endpoint.
func tracesURL(base string) string {
	u, err := url.Parse(base)
	if err != nil || strings.HasSuffix(u.Path, "/v1/traces") {
		return base
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/v1/traces"
	return u.String()
}

// parseHeaders reads key1=value1,key2=value2 with percent-encoded values,
// as the OTEL_EXPORTER_OTLP_HEADERS variable writes them.
func parseHeaders(s, name string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not key=value; write the headers as key1=value1,key2=value2 (values percent-encoded)", name, strings.TrimSpace(pair))
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: the value of %s is not percent-encoded right: %v", name, k, err)
		}
		out[k] = dec
	}
	return out, nil
}

func (c *PushConfig) check() error {
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolProtobuf
	case ProtocolProtobuf, ProtocolJSON:
	case "grpc":
		return fmt.Errorf("OTLP protocol grpc is not supported: use %s (the default) or %s, and the collector's OTLP/HTTP port (4318)", ProtocolProtobuf, ProtocolJSON)
	default:
		return fmt.Errorf("OTLP protocol %q: use %s (the default) or %s", c.Protocol, ProtocolProtobuf, ProtocolJSON)
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("OTLP endpoint %q: give an absolute http(s) URL, e.g. http://localhost:4318", c.Endpoint)
	}
	return nil
}

// Pusher sends sessions' spans to an OTLP/HTTP endpoint.
type Pusher struct {
	cfg    PushConfig
	client *http.Client
	shown  string // the endpoint without credentials, for messages
}

// NewPusher checks a configuration and returns a Pusher.
func NewPusher(cfg PushConfig) (*Pusher, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Backoff == nil {
		cfg.Backoff = defaultBackoff
	}
	if cfg.Wait == nil {
		cfg.Wait = wait
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	client := cfg.Client
	if client == nil {
		client = &http.Client{}
	}
	u, _ := url.Parse(cfg.Endpoint)
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	return &Pusher{cfg: cfg, client: client, shown: shown}, nil
}

// Endpoint is where the spans go, without user info or query: fit for a
// message, and the key under which a store remembers what was sent.
func (p *Pusher) Endpoint() string { return p.shown }

// Protocol is the encoding the spans are sent in.
func (p *Pusher) Protocol() string { return p.cfg.Protocol }

func defaultBackoff(attempt int) time.Duration {
	d := 500 * time.Millisecond
	for i := 1; i < attempt && d < 30*time.Second; i++ {
		d *= 2
	}
	d = min(d, 30*time.Second)
	return d/2 + rand.N(d/2+1)
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Push sends a session's spans (those opts selects), in as many requests as
// their size needs. It returns what was sent; on an error, the spans of the
// requests before it were sent.
func (p *Pusher) Push(ctx context.Context, src Source, opts Options) (Summary, error) {
	if src == nil {
		return Summary{}, errNoSource
	}
	res := producerOf(src.Head())
	var batch []*tracepb.Span
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := p.send(ctx, p.body(res, batch), len(batch))
		batch, size = batch[:0], 0
		return err
	}
	// Spans come in the order they were complete, so when a span is the
	// first of a request, everything complete before its seq has gone.
	through := opts.After
	sum, err := spans(src, opts, func(s *tracepb.Span, seq int64) error {
		n := proto.Size(s)
		if p.cfg.Protocol == ProtocolJSON {
			n = 2 * n // JSON is larger than protobuf: hex ids, keys, quotes
		}
		if size+n > p.cfg.BatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(batch) == 0 {
			through = max(through, seq-1)
		}
		batch = append(batch, s)
		size += n
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		sum.Through = through
	}
	return sum, err
}

func (p *Pusher) body(res producer, spans []*tracepb.Span) []byte {
	if p.cfg.Protocol == ProtocolJSON {
		return jsonDocument(res, spans)
	}
	b, _ := proto.Marshal(tracesData(res, spans)) // our own well-formed messages
	return b
}

func (p *Pusher) contentType() string {
	if p.cfg.Protocol == ProtocolJSON {
		return "application/json"
	}
	return "application/x-protobuf"
}

// send POSTs one request, retrying what OTLP/HTTP says is retryable:
// 429, 502, 503 and 504 (waiting what Retry-After says, when it says), and
// requests that did not reach the endpoint.
func (p *Pusher) send(ctx context.Context, body []byte, spans int) error {
	for attempt := 0; ; attempt++ {
		retry, after, err := p.try(ctx, body, spans)
		if err == nil {
			return nil
		}
		if !retry || attempt >= p.cfg.MaxRetries || ctx.Err() != nil {
			if retry && attempt >= p.cfg.MaxRetries {
				err = fmt.Errorf("%w (gave up after %d attempts)", err, attempt+1)
			}
			return err
		}
		d := after
		if d < 0 {
			d = p.cfg.Backoff(attempt + 1)
		}
		if err := p.cfg.Wait(ctx, d); err != nil {
			return fmt.Errorf("push spans to %s: %w", p.shown, err)
		}
	}
}

// try makes one attempt: whether a failure may be retried, and after how
// long the endpoint asked (-1: it did not say).
func (p *Pusher) try(ctx context.Context, body []byte, spans int) (retry bool, after time.Duration, err error) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, p.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return false, -1, fmt.Errorf("push spans to %s: %w", p.shown, err)
	}
	req.Header.Set("Content-Type", p.contentType())
	req.Header.Set("User-Agent", ServiceName)
	for k, v := range p.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var ne net.Error
		timeout := errors.As(err, &ne) && ne.Timeout()
		if ctx.Err() != nil {
			return false, -1, fmt.Errorf("push spans to %s: %w", p.shown, ctx.Err())
		}
		if timeout {
			return true, -1, fmt.Errorf("push spans to %s: no answer within %s", p.shown, p.cfg.Timeout)
		}
		return true, -1, fmt.Errorf("push spans to %s: %v", p.shown, redactURL(err, p.cfg.Endpoint, p.shown))
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return false, -1, p.partialSuccess(resp.Header.Get("Content-Type"), reply, spans)
	}
	err = p.refused(resp, reply)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, waitAsked(resp.Header), err
	}
	return false, -1, err
}

// waitAsked is the endpoint's Retry-After, or -1 when it asks for none.
func waitAsked(h http.Header) time.Duration {
	if d, ok := retryafter.Parse(h, time.Now(), maxRetryAfter); ok {
		return d
	}
	return -1
}

// redactURL keeps credentials a URL may carry out of an error.
func redactURL(err error, full, shown string) string {
	return strings.ReplaceAll(err.Error(), full, shown)
}

// refused explains a refusal, with what to check.
func (p *Pusher) refused(resp *http.Response, reply []byte) error {
	msg := fmt.Sprintf("push spans to %s: the endpoint answered %s", p.shown, resp.Status)
	if text := replyText(resp.Header.Get("Content-Type"), reply); text != "" {
		msg += ": " + text
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		msg += "; check the credentials sent in " + EnvHeaders + " (e.g. Authorization=Basic%20…)"
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		msg += "; check the URL: OTLP/HTTP takes traces at <base>/v1/traces, and " + EnvEndpoint + " (or --otlp-endpoint) is that base"
	case http.StatusUnsupportedMediaType:
		other := ProtocolJSON
		if p.cfg.Protocol == ProtocolJSON {
			other = ProtocolProtobuf
		}
		msg += fmt.Sprintf("; it does not take %s: set %s=%s (or --otlp-protocol %s)", p.cfg.Protocol, EnvProtocol, other, other)
	case http.StatusRequestEntityTooLarge:
		msg += "; the endpoint takes smaller requests than this one: raise its limit on request size"
	}
	return errors.New(msg)
}

// replyText is the message in an error reply: OTLP's Status message in
// either encoding, or the start of a text body.
func replyText(contentType string, reply []byte) string {
	if len(reply) == 0 {
		return ""
	}
	if strings.Contains(contentType, "protobuf") {
		// google.rpc.Status: field 2 is the message.
		if s := protoString(reply, 2); s != "" {
			return s
		}
		return ""
	}
	text := strings.TrimSpace(string(reply))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}

// partialSuccess reads an ExportTraceServiceResponse: an endpoint may take
// a request but reject some of its spans, and says so in partial_success
// (rejected_spans = 1, error_message = 2).
func (p *Pusher) partialSuccess(contentType string, reply []byte, spans int) error {
	var rejected int64
	var message string
	if strings.Contains(contentType, "json") {
		var r struct {
			PartialSuccess struct {
				RejectedSpans json.Number `json:"rejectedSpans"`
				ErrorMessage  string      `json:"errorMessage"`
			} `json:"partialSuccess"`
		}
		if json.Unmarshal(reply, &r) == nil {
			rejected, _ = r.PartialSuccess.RejectedSpans.Int64()
			message = r.PartialSuccess.ErrorMessage
		}
	} else if ps := protoBytes(reply, 1); ps != nil {
		rejected = protoInt(ps, 1)
		message = protoString(ps, 2)
	}
	if rejected > 0 {
		return fmt.Errorf("push spans to %s: the endpoint rejected %d of %d spans: %s", p.shown, rejected, spans, message)
	}
	return nil
}

// The responses' few fields are read with protowire: their Go types live in
// the collector service package, which brings gRPC with it.

func protoField(b []byte, num protowire.Number, want protowire.Type) []byte {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil
		}
		if n == num && typ == want {
			return b[:l]
		}
		b = b[l:]
	}
	return nil
}

func protoBytes(b []byte, num protowire.Number) []byte {
	v := protoField(b, num, protowire.BytesType)
	if v == nil {
		return nil
	}
	s, l := protowire.ConsumeBytes(v)
	if l < 0 {
		return nil
	}
	return s
}

func protoString(b []byte, num protowire.Number) string { return string(protoBytes(b, num)) }

func protoInt(b []byte, num protowire.Number) int64 {
	v := protoField(b, num, protowire.VarintType)
	if v == nil {
		return 0
	}
	n, l := protowire.ConsumeVarint(v)
	if l < 0 {
		return 0
	}
	return int64(n)
}

// Store is a studio store as a push reads it: one session through a
// reader, and the marks of what was pushed where. db.DB is one, with
// *db.Reader its reader.
type Store[R Source] interface {
	Read(ctx context.Context, id string, fn func(R) error) error
	PushedSeq(ctx context.Context, sessionID, endpoint string) (int64, error)
	SetPushedSeq(ctx context.Context, sessionID, endpoint string, seq int64) error
}

// PushStored pushes what of a stored session the pusher's endpoint has not
// had yet: its spans finished since the last push there (all of them, the
// first time), and remembers what went, so a running session pushed now and
// again when it ends sends no span twice. serve's automatic pushes use it.
func PushStored[R Source](ctx context.Context, store Store[R], p *Pusher, id string, opts Options) (Summary, error) {
	after, err := store.PushedSeq(ctx, id, p.Endpoint())
	if err != nil {
		return Summary{}, err
	}
	opts.After = max(opts.After, after)
	return pushAndMark(ctx, store, p, id, opts, after)
}

// PushSession is a push someone asked for: it sends every finished span of
// the session (those after opts.After, when given), whatever went to the
// endpoint before, and remembers what went, so that serve's automatic push
// of the session sends only what is newer. It reports the seq through which
// the endpoint had had the session before (0: never).
func PushSession[R Source](ctx context.Context, store Store[R], p *Pusher, id string, opts Options) (Summary, int64, error) {
	before, err := store.PushedSeq(ctx, id, p.Endpoint())
	if err != nil {
		return Summary{}, 0, err
	}
	sum, err := pushAndMark(ctx, store, p, id, opts, before)
	return sum, before, err
}

func pushAndMark[R Source](ctx context.Context, store Store[R], p *Pusher, id string, opts Options, mark int64) (Summary, error) {
	var sum Summary
	err := store.Read(ctx, id, func(r R) error {
		var err error
		sum, err = p.Push(ctx, r, opts)
		return err
	})
	if sum.Through > mark {
		if merr := store.SetPushedSeq(ctx, id, p.Endpoint(), sum.Through); merr != nil && err == nil {
			err = merr
		}
	}
	return sum, err
}
