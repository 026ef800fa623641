package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/delegationstudio/studio/internal/model/openai/openaitest"
	"github.com/delegationstudio/studio/internal/scenario"
)

// scrape reads /metrics as Prometheus would and returns each sample by
// name{labels}.
func (s *studio) scrape() map[string]float64 {
	s.t.Helper()
	res, err := s.c.Get(s.ts.URL + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		s.t.Fatalf("/metrics: %d", res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		s.t.Fatalf("/metrics is not the Prometheus text format: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.Metric {
			key := name
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

func TestMetrics(t *testing.T) {
	// An endpoint that is overloaded once.
	var calls atomic.Int32
	ep := openaitest.NewServer(t, func(openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "hi", Usage: map[string]any{"prompt_tokens": 100, "completion_tokens": 5,
			"prompt_tokens_details": map[string]any{"cached_tokens": 64}}}
	})
	overloaded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":{"message":"overloaded","type":"server_error"}}`, http.StatusServiceUnavailable)
			return
		}
		ep.Config.Handler.ServeHTTP(w, r)
	}))
	defer overloaded.Close()
	s := studioWith(t, Config{Endpoints: []Endpoint{{Name: "flaky", BaseURL: overloaded.URL + "/v1"}}})
	before := s.scrape()
	for _, name := range []string{`studio_sessions{status="done"}`, `studio_model_calls_total{outcome="ok"}`,
		`studio_model_retries_total{cause="rate_limit"}`, `studio_tokens_total{kind="input"}`, "studio_live_viewers",
		"studio_events_total", `studio_store_batch_seconds{outcome="ok"}_count`, "go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := before[name]; !ok {
			t.Errorf("no %s before any session", name)
		}
	}

	// A session against the endpoint.
	sc, err := scenario.Parse([]byte(`{"name": "m", "prompt": "hello", "model": {"endpoint": "flaky", "model": "m", "stream": false}}`))
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.srv.Runner().Start(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	s.waitDone(id)
	// And a scripted one.
	res, body := s.api("POST", "/api/sessions", "application/json", []byte(`{"name":"x","prompt":"y","script":{"main":[{"content":"ok"}]}}`))
	var created struct{ ID string }
	if res.StatusCode != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	s.waitDone(created.ID)

	got := s.scrape()
	for name, want := range map[string]float64{
		`studio_sessions{status="done"}`:                   2,
		`studio_sessions{status="running"}`:                0,
		`studio_model_calls_total{outcome="ok"}`:           2,
		`studio_model_retries_total{cause="server_error"}`: 1,
		`studio_tokens_total{kind="reported_prompt"}`:      100,
		`studio_tokens_total{kind="cached"}`:               64,
		"studio_live_viewers":                              0,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}
	for _, name := range []string{`studio_tokens_total{kind="input"}`, `studio_tokens_total{kind="output"}`, "studio_events_total",
		`studio_store_batch_seconds{outcome="ok"}_count`} {
		if got[name] <= before[name] {
			t.Errorf("%s did not grow: %v", name, got[name])
		}
	}
}

func TestHealthz(t *testing.T) {
	s := newStudio(t, "the-token")
	res, body := s.api("GET", "/healthz", "", nil)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"database":"ok"`) {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	// /metrics wants the token like the rest; a scraper sends it as a bearer.
	if res, _ := s.api("GET", "/metrics", "", nil); res.StatusCode == 200 {
		t.Fatal("/metrics without the token")
	}
	req, _ := http.NewRequest("GET", s.ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer the-token")
	if res, err := s.c.Do(req); err != nil || res.StatusCode != 200 {
		t.Fatalf("/metrics with the token: %v %v", res, err)
	}
	s.db.Close()
	res, body = s.api("GET", "/healthz", "", nil)
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "does not answer") {
		t.Fatalf("with the database closed: %d %s", res.StatusCode, body)
	}
}
