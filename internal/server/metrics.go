package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/live"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/view"
)

// metrics are the studio's figures for GET /metrics, in the Prometheus text
// format. What sessions do is counted from the events the runner publishes,
// the same log every view folds; the rest is read when scraped: sessions by
// status from the store, viewers from the hub. Each Server has a registry of
// its own, so several servers in one process (tests) do not collide.
type metrics struct {
	reg        *prometheus.Registry
	modelCalls *prometheus.CounterVec
	retries    *prometheus.CounterVec
	tokens     *prometheus.CounterVec
	events     prometheus.Counter
	batches    *prometheus.HistogramVec
}

func newMetrics(store Store, hub *live.Hub) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "studio_model_calls_total",
			Help: "Model calls finished, by outcome (ok or error)."}, []string{"outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "studio_model_retries_total",
			Help: "Model call attempts that failed and were made again, by cause (rate_limit, server_error, timeout, connection, stream)."},
			[]string{"cause"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "studio_tokens_total",
			Help: "Tokens, by kind: input and output as the studio counts them; reported_prompt, reported_completion, cached and reasoning as endpoints report them."},
			[]string{"kind"}),
		events: prometheus.NewCounter(prometheus.CounterOpts{Name: "studio_events_total",
			Help: "Events stored in session logs; rate() of it is events per second."}),
		batches: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "studio_store_batch_seconds",
			Help:    "How long storing one batch of events took (one transaction), by outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"outcome"}),
	}
	m.reg.MustRegister(m.modelCalls, m.retries, m.tokens, m.events, m.batches,
		sessionsCollector{store: store},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_live_viewers", Help: "Websocket viewers connected now."},
			func() float64 { return float64(hub.ViewerCount()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every series is there from the first scrape, at 0.
	for _, o := range []string{"ok", "error"} {
		m.modelCalls.WithLabelValues(o)
		m.batches.WithLabelValues(o)
	}
	for _, c := range []string{"rate_limit", "server_error", "timeout", "connection", "stream"} {
		m.retries.WithLabelValues(c)
	}
	for _, k := range []string{"input", "output", "reported_prompt", "reported_completion", "cached", "reasoning"} {
		m.tokens.WithLabelValues(k)
	}
	return m
}

var (
	_ session.Publisher     = (*metrics)(nil)
	_ session.BatchObserver = (*metrics)(nil)
)

// Publish counts the events of a running session's batch.
func (m *metrics) Publish(_ string, events []delegation.Event, _ view.Changes, _ *session.Live) {
	for _, ev := range events {
		m.count(ev)
	}
}

func (m *metrics) count(ev delegation.Event) {
	if ev.Seq > 0 {
		m.events.Inc()
	}
	switch ev.Type {
	case delegation.EventModelStarted:
		if d, err := delegation.DataAs[delegation.ModelStarted](ev); err == nil {
			m.tokens.WithLabelValues("input").Add(float64(d.Call.InputTokens))
		}
	case delegation.EventModelFinished:
		d, err := delegation.DataAs[delegation.ModelFinished](ev)
		if err != nil {
			return
		}
		outcome := "ok"
		if d.Error != "" {
			outcome = "error"
		}
		m.modelCalls.WithLabelValues(outcome).Inc()
		m.tokens.WithLabelValues("output").Add(float64(d.OutputTokens))
		if u := d.Usage; u != nil {
			m.tokens.WithLabelValues("reported_prompt").Add(float64(u.PromptTokens))
			m.tokens.WithLabelValues("reported_completion").Add(float64(u.CompletionTokens))
			m.tokens.WithLabelValues("cached").Add(float64(u.CachedTokens))
			m.tokens.WithLabelValues("reasoning").Add(float64(u.ReasoningTokens))
		}
	case delegation.EventModelRetry:
		if d, err := delegation.DataAs[delegation.ModelRetry](ev); err == nil {
			m.retries.WithLabelValues(d.Cause).Inc()
		}
	}
}

// watchBodies shows the request bodies being read, and those refused or
// cut (bodies.go).
func (m *metrics) watchBodies(g *bodyGuard) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_request_bodies_reading",
			Help: "Request bodies being read now."}, func() float64 { return float64(g.readingNow()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_request_bodies_refused_total",
			Help: "Requests refused because their client was sending as many bodies at once as the studio reads from one."},
			func() float64 { return float64(g.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_request_bodies_cut_total",
			Help: "Request bodies the studio stopped reading because they came too slowly."},
			func() float64 { return float64(g.cut.Load()) }))
}

// watchBigCalls shows the big model calls being taken, and those refused
// (admitBigCall).
func (m *metrics) watchBigCalls(taking func() int, refused *atomic.Int64) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "studio_big_calls_taking",
			Help: "Model calls with a body over 1 MiB being read, checked and recorded now."}, func() float64 { return float64(taking()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "studio_big_calls_refused_total",
			Help: "Model calls with a body over 1 MiB refused because as many were being taken as the studio takes at once."},
			func() float64 { return float64(refused.Load()) }))
}

// ObserveBatch records how long the store took for a batch.
func (m *metrics) ObserveBatch(_ int, took time.Duration, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.batches.WithLabelValues(outcome).Observe(took.Seconds())
}

// sessionsCollector reads the sessions by status from the store when
// scraped: the store is the truth, sessions run by another process
// included.
type sessionsCollector struct{ store Store }

var sessionsDesc = prometheus.NewDesc("studio_sessions", "Stored sessions, by status.", []string{"status"}, nil)

func (c sessionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sessionsDesc }

func (c sessionsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.SessionCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(sessionsDesc, err)
		return
	}
	for _, st := range []string{delegation.StatusRunning, delegation.StatusDone, delegation.StatusFailed, delegation.StatusInterrupted} {
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(counts[st]), st)
	}
}

// publishers hands each event to several publishers, in order; a batch's
// timing goes to those that observe batches.
type publishers []session.Publisher

func (ps publishers) Publish(sessionID string, events []delegation.Event, ch view.Changes, v *session.Live) {
	for _, p := range ps {
		p.Publish(sessionID, events, ch, v)
	}
}

func (ps publishers) ObserveBatch(events int, took time.Duration, err error) {
	for _, p := range ps {
		if o, ok := p.(session.BatchObserver); ok {
			o.ObserveBatch(events, took, err)
		}
	}
}

// opsRoutes are for the machines that run the studio: GET /healthz (is the
// database reachable) and GET /metrics (Prometheus).
func (s *Server) opsRoutes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
}

// healthz answers 200 when the database answers and its disk has room,
// else 503 saying why; a full disk has its code as "reason" and its words
// in the request's language. "read_only" says whether the store is served
// read-only, and "read_only_reason" why (db's ReadOnly… codes).
func (s *Server) healthz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	c.Response().Header().Set("Cache-Control", "no-store")
	body := map[string]any{"status": "ok", "database": "ok", "read_only": s.cfg.ReadOnly != ""}
	if s.cfg.ReadOnly != "" {
		body["read_only_reason"] = s.cfg.ReadOnly
	}
	status := http.StatusOK
	if err := s.cfg.DB.Ping(ctx); err != nil {
		s.log.Error("health check", "err", err)
		status, body["status"], body["database"] = http.StatusServiceUnavailable, "unavailable", err.Error()
		if delegation.ErrorCode(err) == delegation.EFULL {
			body["reason"], body["database"] = delegation.EFULL, tr(c).T("error.disk_full")
		}
	}
	return c.JSON(status, body)
}
