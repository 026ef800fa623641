package otlp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/otlp/otlptest"
	"github.com/delegationstudio/studio/internal/trace"
)

// pusher pushes to c with no real waiting: the waits asked for are kept.
func pusher(t *testing.T, c *otlptest.Receiver, protocol string, waits *[]time.Duration, tune ...func(*otlp.PushConfig)) *otlp.Pusher {
	t.Helper()
	cfg := otlp.PushConfig{Endpoint: c.URL + "/v1/traces", Protocol: protocol,
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * time.Millisecond },
		Wait: func(ctx context.Context, d time.Duration) error {
			if waits != nil {
				*waits = append(*waits, d)
			}
			return nil
		}}
	for _, f := range tune {
		f(&cfg)
	}
	p, err := otlp.NewPusher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPush(t *testing.T) {
	tr := run(t, []byte(fanOut), "s2")
	want := export(t, tr, otlp.Options{})
	for _, protocol := range []string{otlp.ProtocolProtobuf, otlp.ProtocolJSON} {
		t.Run(protocol, func(t *testing.T) {
			c := otlptest.New(t)
			p := pusher(t, c, protocol, nil)
			sum, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Requests()) != 1 || sum.Spans != len(want.spans) || len(c.Spans()) != len(want.spans) {
				t.Fatalf("%d requests, %d spans received, %d exported", len(c.Requests()), len(c.Spans()), len(want.spans))
			}
			for i, s := range c.Spans() {
				if spanJSON(t, s) != spanJSON(t, want.spans[i]) {
					t.Fatalf("span %d as received differs from the export's", i)
				}
			}
			if ua := c.Requests()[0].Header.Get("User-Agent"); ua != "delegation-studio" {
				t.Fatalf("User-Agent %q", ua)
			}
		})
	}
}

func TestPushRetries(t *testing.T) {
	tr := example(t)
	t.Run("429 and 503 are retried, as long as Retry-After says or else with backoff", func(t *testing.T) {
		c := otlptest.New(t)
		c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
			switch n {
			case 0:
				w.Header().Set("Retry-After", "7")
				http.Error(w, "slow down", http.StatusTooManyRequests)
			case 1:
				http.Error(w, "starting", http.StatusServiceUnavailable)
			default:
				return false
			}
			return true
		}
		var waits []time.Duration
		p := pusher(t, c, otlp.ProtocolProtobuf, &waits)
		if _, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{}); err != nil {
			t.Fatal(err)
		}
		if len(c.Requests()) != 3 || len(c.Spans()) == 0 {
			t.Fatalf("%d requests, %d spans", len(c.Requests()), len(c.Spans()))
		}
		if len(waits) != 2 || waits[0] != 7*time.Second || waits[1] != 2*time.Millisecond {
			t.Fatalf("waits %v: want Retry-After's 7s, then the second backoff", waits)
		}
	})
	t.Run("an endpoint busy past the retries is an error that says so", func(t *testing.T) {
		c := otlptest.New(t)
		c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return true
		}
		p := pusher(t, c, otlp.ProtocolProtobuf, nil, func(cfg *otlp.PushConfig) { cfg.MaxRetries = 2 })
		_, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{})
		if err == nil || len(c.Requests()) != 3 || !strings.Contains(err.Error(), "503 Service Unavailable: overloaded (gave up after 3 attempts)") {
			t.Fatalf("%d requests: %v", len(c.Requests()), err)
		}
	})
	t.Run("an answer that never comes is retried", func(t *testing.T) {
		c := otlptest.New(t)
		release := make(chan struct{})
		t.Cleanup(func() { close(release) }) // before the server closes
		c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 0 {
				io.Copy(io.Discard, r.Body) // so the server sees the client go
				select {
				case <-r.Context().Done(): // the pusher gave up on this attempt
				case <-release:
				}
				return true
			}
			return false
		}
		p := pusher(t, c, otlp.ProtocolJSON, nil, func(cfg *otlp.PushConfig) { cfg.Timeout = 50 * time.Millisecond })
		if _, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{}); err != nil || len(c.Spans()) == 0 {
			t.Fatalf("%v, %d spans", err, len(c.Spans()))
		}
	})
	for _, tc := range []struct {
		status int
		hint   string
	}{
		{http.StatusUnauthorized, "OTEL_EXPORTER_OTLP_HEADERS"},
		{http.StatusNotFound, "<base>/v1/traces"},
		{http.StatusUnsupportedMediaType, "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		{http.StatusBadRequest, "bad span"},
	} {
		t.Run(http.StatusText(tc.status)+" is not retried, and the error says what to check", func(t *testing.T) {
			c := otlptest.New(t)
			c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
				http.Error(w, "bad span", tc.status)
				return true
			}
			p := pusher(t, c, otlp.ProtocolProtobuf, nil)
			_, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{})
			if err == nil || len(c.Requests()) != 1 || !strings.Contains(err.Error(), tc.hint) || !strings.Contains(err.Error(), c.URL) {
				t.Fatalf("%d requests: %v", len(c.Requests()), err)
			}
		})
	}
	for _, protocol := range []string{otlp.ProtocolProtobuf, otlp.ProtocolJSON} {
		t.Run("spans rejected in a partial success are an error ("+protocol+")", func(t *testing.T) {
			c := otlptest.New(t)
			c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
				resp := ptraceotlp.NewExportResponse()
				resp.PartialSuccess().SetRejectedSpans(2)
				resp.PartialSuccess().SetErrorMessage("span names too long")
				otlptest.Respond(w, r, resp)
				return true
			}
			p := pusher(t, c, protocol, nil)
			_, err := p.Push(context.Background(), trace.SourceOf(tr), otlp.Options{})
			if err == nil || !strings.Contains(err.Error(), "rejected 2 of") || !strings.Contains(err.Error(), "span names too long") {
				t.Fatalf("%v", err)
			}
		})
	}
}

// memoryStore is a store of traces in memory, for PushStored.
type memoryStore struct {
	traces map[string]*trace.Trace
	marks  map[string]int64
}

func (m *memoryStore) Read(_ context.Context, id string, fn func(*trace.Memory) error) error {
	return fn(trace.SourceOf(m.traces[id]))
}

func (m *memoryStore) PushedSeq(_ context.Context, id, endpoint string) (int64, error) {
	return m.marks[id+" "+endpoint], nil
}

func (m *memoryStore) SetPushedSeq(_ context.Context, id, endpoint string, seq int64) error {
	m.marks[id+" "+endpoint] = max(m.marks[id+" "+endpoint], seq)
	return nil
}

var _ otlp.Store[*trace.Memory] = (*memoryStore)(nil)

func TestPushStored(t *testing.T) {
	tr := run(t, longScenario(60), "s8")
	all := export(t, tr, otlp.Options{})
	t.Run("a push that fails part-way is finished by the next, nothing twice", func(t *testing.T) {
		c := otlptest.New(t)
		c.Answer = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 2 {
				http.Error(w, "disk full", http.StatusInternalServerError)
				return true
			}
			return false
		}
		store := &memoryStore{traces: map[string]*trace.Trace{"s8": tr}, marks: map[string]int64{}}
		p := pusher(t, c, otlp.ProtocolProtobuf, nil, func(cfg *otlp.PushConfig) { cfg.BatchBytes = 8 << 10 })
		if _, err := otlp.PushStored(context.Background(), store, p, "s8", otlp.Options{}); err == nil {
			t.Fatal("the third request failed, and so should the push")
		}
		first := len(c.Spans())
		if first == 0 || store.marks["s8 "+p.Endpoint()] == 0 {
			t.Fatalf("%d spans went, mark %d", first, store.marks["s8 "+p.Endpoint()])
		}
		sum, err := otlp.PushStored(context.Background(), store, p, "s8", otlp.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Requests()) < 5 || sum.Sent != first || len(c.Spans()) != len(all.spans) {
			t.Fatalf("%d requests; %d spans before, %d in all, %d exported", len(c.Requests()), first, len(c.Spans()), len(all.spans))
		}
		seen := map[pcommon.SpanID]bool{}
		for _, s := range c.Spans() {
			if seen[s.SpanID()] {
				t.Fatalf("span %q sent twice", s.Name())
			}
			seen[s.SpanID()] = true
		}
		if sum, err := otlp.PushStored(context.Background(), store, p, "s8", otlp.Options{}); err != nil || sum.Spans != 0 {
			t.Fatalf("a third push sent %d spans: %v", sum.Spans, err)
		}
	})
}

func TestConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name     string
		flag     string
		env      func(string) string
		endpoint string
		protocol string
		headers  map[string]string
	}{
		{"the base endpoint gets the traces path", "", env(otlp.EnvEndpoint, "http://localhost:4318"),
			"http://localhost:4318/v1/traces", otlp.ProtocolProtobuf, map[string]string{}},
		{"a base with a path keeps it (Langfuse)", "", env(otlp.EnvEndpoint, "https://cloud.langfuse.com/api/public/otel/",
			otlp.EnvHeaders, "Authorization=Basic%20cGs6c2s="),
			"https://cloud.langfuse.com/api/public/otel/v1/traces", otlp.ProtocolProtobuf, map[string]string{"Authorization": "Basic cGs6c2s="}},
		{"the traces endpoint is taken as it is, before the base", "", env(otlp.EnvEndpoint, "http://a:4318",
			otlp.EnvTracesEndpoint, "http://b:6006/v1/traces", otlp.EnvProtocol, "http/json"),
			"http://b:6006/v1/traces", otlp.ProtocolJSON, map[string]string{}},
		{"the flag comes first, and signal headers over the generic ones", "http://c:4318/v1/traces", env(otlp.EnvTracesEndpoint, "http://b:6006/v1/traces",
			otlp.EnvHeaders, "a=1,b=2", otlp.EnvTracesHeaders, "b=3"),
			"http://c:4318/v1/traces", otlp.ProtocolProtobuf, map[string]string{"a": "1", "b": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok, err := otlp.ConfigFromEnv(tc.flag, "", tc.env)
			if err != nil || !ok {
				t.Fatalf("%v %v", ok, err)
			}
			if cfg.Endpoint != tc.endpoint || cfg.Protocol != tc.protocol || len(cfg.Headers) != len(tc.headers) {
				t.Fatalf("config %+v", cfg)
			}
			for k, v := range tc.headers {
				if cfg.Headers[k] != v {
					t.Fatalf("header %s = %q, want %q", k, cfg.Headers[k], v)
				}
			}
		})
	}
	t.Run("nothing set is no push", func(t *testing.T) {
		if _, ok, err := otlp.ConfigFromEnv("", "", env()); ok || err != nil {
			t.Fatalf("%v %v", ok, err)
		}
	})
	for _, bad := range []struct{ flag, protocol, headers, want string }{
		{"http://x:4317", "grpc", "", "grpc is not supported"},
		{"localhost:4318", "", "", "absolute http(s) URL"},
		{"http://x:4318", "http/xml", "", `"http/xml"`},
		{"http://x:4318", "", "Authorization", "is not key=value"},
	} {
		t.Run("a bad setting says what is wrong: "+bad.want, func(t *testing.T) {
			_, _, err := otlp.ConfigFromEnv(bad.flag, bad.protocol, env(otlp.EnvHeaders, bad.headers))
			if err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
