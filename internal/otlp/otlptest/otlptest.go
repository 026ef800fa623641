// Package otlptest is an OTLP/HTTP traces receiver for tests: it decodes
// each request as the OpenTelemetry Collector does (ptraceotlp), in either
// encoding, keeps the spans, and can be told to refuse requests first.
package otlptest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Receiver is a running receiver; its URL is the base (POST URL+"/v1/traces").
type Receiver struct {
	*httptest.Server
	mu       sync.Mutex
	spans    []ptrace.Span
	sessions map[string]int
	requests []*http.Request
	fail     []int
	// Answer, when set, answers request n (from 0) instead of the receiver
	// when it returns true.
	Answer func(n int, w http.ResponseWriter, r *http.Request) bool
}

// New starts a receiver, closed when the test ends.
func New(t testing.TB) *Receiver {
	rc := &Receiver{sessions: map[string]int{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

// Fail makes the next requests answer these statuses, with Retry-After: 0.
func (rc *Receiver) Fail(statuses ...int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.fail = append(rc.fail, statuses...)
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	n := len(rc.requests)
	rc.requests = append(rc.requests, r)
	answer := rc.Answer
	var status int
	if len(rc.fail) > 0 {
		status, rc.fail = rc.fail[0], rc.fail[1:]
	}
	rc.mu.Unlock()
	if answer != nil && answer(n, w, r) {
		return
	}
	if r.URL.Path != "/v1/traces" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	if status != 0 {
		w.Header().Set("Retry-After", "0")
		http.Error(w, http.StatusText(status), status)
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := ptraceotlp.NewExportRequest()
	var err error
	switch r.Header.Get("Content-Type") {
	case "application/json":
		err = req.UnmarshalJSON(body)
	case "application/x-protobuf":
		err = req.UnmarshalProto(body)
	default:
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rss := req.Traces().ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		id, _ := rss.At(i).Resource().Attributes().Get("session.id")
		for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
			spans := rss.At(i).ScopeSpans().At(j).Spans()
			rc.sessions[id.Str()] += spans.Len()
			for k := 0; k < spans.Len(); k++ {
				rc.spans = append(rc.spans, spans.At(k))
			}
		}
	}
	rc.mu.Unlock()
	Respond(w, r, ptraceotlp.NewExportResponse())
}

// Respond writes an ExportTraceServiceResponse in the request's encoding.
func Respond(w http.ResponseWriter, r *http.Request, resp ptraceotlp.ExportResponse) {
	var b []byte
	if r.Header.Get("Content-Type") == "application/json" {
		w.Header().Set("Content-Type", "application/json")
		b, _ = resp.MarshalJSON()
	} else {
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ = resp.MarshalProto()
	}
	w.Write(b)
}

// Spans are the spans received, in order.
func (rc *Receiver) Spans() []ptrace.Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]ptrace.Span(nil), rc.spans...)
}

// SessionSpans counts the spans received of a session (by the resource's
// session.id).
func (rc *Receiver) SessionSpans(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.sessions[id]
}

// Requests are the requests made, refused ones included.
func (rc *Receiver) Requests() []*http.Request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*http.Request(nil), rc.requests...)
}
