// Package server is the studio's web face: an Echo v4 server with the pages
// of design.md, the HTTP API of formats.md §5, and the live websocket.
// Handlers are thin: parse, call the session runner or the store, render a
// templ component or JSON.
package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/delegationstudio/studio/internal/live"
	"github.com/delegationstudio/studio/internal/observed"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/push"
	"github.com/delegationstudio/studio/internal/replica"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/web/static"
)

// Config is what the server is built from.
type Config struct {
	// DB is the store: SQLite (db.DB) or any other Store.
	DB     Store
	Logger *slog.Logger
	// Token, when set, is required on every request: a cookie after the
	// sign-in page, or an Authorization: Bearer header for the API.
	Token string
	// Addr is the address the studio listens on, and AllowedHosts other
	// names it answers to (behind a proxy, say): requests for any other
	// Host are refused (DNS rebinding).
	Addr         string
	AllowedHosts []string
	Limits       Limits
	// Endpoints are the model endpoints sessions may call, the first the
	// default; scenarios name them, and may give no URL or key variable of
	// their own (session.Endpoints.Only).
	Endpoints []Endpoint
	Now       func() time.Time
	// TaskTool is the tool name that delegates in received traces ("task"
	// when empty); OTLPQuiet and OTLPGrace say when a received trace ends
	// (0: DefaultQuiet, DefaultGrace; docs/ingest.md); OTLPMaxTraces caps
	// the traces received at once (0: DefaultMaxTraces).
	TaskTool             string
	OTLPQuiet, OTLPGrace time.Duration
	OTLPMaxTraces        int
	// OTLP, when set, is where each session's spans are pushed as it ends.
	OTLP *push.Config
	// Upstream answers the recording endpoint's requests (nil: they are
	// refused, saying how to set one); UpstreamTimeout bounds its silence,
	// ProxyDoneAfter and ProxyQuiet say when a recorded session ends (0:
	// the defaults of internal/proxy; docs/proxy.md).
	Upstream                   proxy.Upstream
	UpstreamTimeout            time.Duration
	ProxyDoneAfter, ProxyQuiet time.Duration
	// ReadOnly, when set, is why the store is served read-only (one of
	// db's ReadOnly… codes): pages say so, every change is refused
	// (read_only), and nothing sweeps or pushes.
	ReadOnly string
}

// Endpoint is a configured OpenAI-compatible endpoint.
type Endpoint = session.Endpoint

// Server is the studio's HTTP server and what it runs.
type Server struct {
	cfg     Config
	echo    *echo.Echo
	runner  *session.Runner
	hub     *live.Hub
	views   *liveViews
	metrics *metrics
	pushes  *push.Queue // nil without OTLP
	log     *slog.Logger
	now     func() time.Time

	hosts   hostPolicy
	auth    *auth // nil without a token
	csrfKey []byte
	limits  Limits
	checks  chan struct{} // one per document check running (admit)
	// bigCalls holds one per big model call being taken (admitBigCall);
	// bigRefused counts those refused, mem gives their memory back.
	bigCalls   chan struct{}
	bigRefused atomic.Int64
	mem        *memReturn
	bodies     *bodyGuard // request bodies being read, per client (guardBodies)
	// receiver turns OTLP traces into sessions; stopReceiver ends its sweeps.
	receiver     *observed.Receiver
	stopReceiver context.CancelFunc
	// proxy is the recording endpoint; its sweeps end with stopReceiver.
	proxy *proxy.Proxy
	// replicas follows the sessions other studios sharing the store run;
	// nil for a store of one studio (SQLite).
	replicas *replica.Follower
}

// New builds the server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, hosts: newHostPolicy(cfg.Addr, cfg.AllowedHosts),
		csrfKey: newKey(), limits: cfg.Limits.withDefaults()}
	if cfg.Token != "" {
		s.auth = newAuth(cfg.Token, cfg.Now)
	}
	s.checks = make(chan struct{}, s.limits.MaxChecks)
	s.bigCalls = make(chan struct{}, s.limits.MaxBigCalls)
	s.mem = newMemReturn()
	s.bodies = newBodyGuard(s.limits)
	// A viewer's queue holds more than the recorder's largest batch, which
	// it publishes at once.
	s.hub = live.NewHub(live.Options{Buffer: 1024, Logger: cfg.Logger,
		MaxViewers: s.limits.MaxViewers, MaxSessionViewers: s.limits.MaxSessionViewers})
	s.views = &liveViews{hub: s.hub, db: cfg.DB, log: cfg.Logger}
	s.metrics = newMetrics(cfg.DB, s.hub)
	s.metrics.watchBodies(s.bodies)
	s.metrics.watchBigCalls(func() int { return len(s.bigCalls) }, &s.bigRefused)
	s.runner = &session.Runner{DB: cfg.DB, Pub: publishers{s.views, s.metrics}, Logger: cfg.Logger, MaxRunning: s.limits.MaxRunning,
		Endpoints: session.Endpoints{List: cfg.Endpoints, Only: true}}
	if cfg.OTLP != nil && cfg.ReadOnly == "" {
		s.pushes = push.New(cfg.DB, *cfg.OTLP, cfg.Logger)
		s.runner.Ended = s.pushes.Add
		_ = s.pushes.Start(context.Background())
	}
	s.receiver = newReceiver(s)
	s.proxy = s.newProxy()
	ctx, cancel := context.WithCancel(context.Background())
	s.stopReceiver = cancel
	if cfg.ReadOnly == "" {
		go s.receiver.Run(ctx)
		go s.proxy.Run(ctx)
	}
	if n, ok := cfg.DB.(notifier); ok && n.Postgres() {
		s.replicas = replica.New(replica.Config{Store: n, Runner: s.runner, Viewers: replicaViewers{s}, Logger: cfg.Logger})
		_ = s.replicas.Start(ctx)
		// A form one replica drew is posted to whichever the load
		// balancer picks: they sign them with one key.
		kctx, done := context.WithTimeout(ctx, 30*time.Second)
		if k, err := n.SharedKey(kctx, "csrf"); err == nil {
			s.csrfKey = k
		} else {
			s.log.Error("forms drawn by another replica will be refused here", "err", err)
		}
		done()
	}
	s.echo = s.routes()
	return s
}

// Runner is the server's session runner.
func (s *Server) Runner() *session.Runner { return s.runner }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Recover ends as interrupted the sessions a stopped process left running.
func (s *Server) Recover(ctx context.Context) (int64, error) { return s.runner.Recover(ctx) }

// KeepRecovering runs Recover every third of a lease until ctx ends, so a
// session whose process died is ended soon after its lease runs out.
func (s *Server) KeepRecovering(ctx context.Context) {
	t := time.NewTicker(session.DefaultLease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.runner.Recover(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("recover sessions", "err", err)
			} else if n > 0 {
				s.log.Info("sessions whose process stopped are now interrupted", "count", n)
			}
		}
	}
}

// Drain cuts the requests that would hold an HTTP server's Shutdown past
// any deadline: the recording endpoint's calls in flight, waiting on their
// upstream, are answered 503 in the provider's shape, recorded as stopped,
// and no more are taken. serve runs it as its HTTP server begins to stop
// (http.Server.RegisterOnShutdown); Shutdown runs it too.
func (s *Server) Drain() { s.proxy.Close() }

// Shutdown stops the running sessions, waits for them to be recorded,
// closes the live connections, and gives the sessions' OTLP pushes a few
// seconds to finish, none of it past ctx's end. Call it once the HTTP
// server has stopped taking requests and finished those in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopReceiver() // and the listening to other replicas
	s.receiver.Close()
	s.proxy.Close()
	var errs []error
	if s.replicas != nil {
		errs = append(errs, s.replicas.Shutdown(ctx))
	}
	errs = append(errs, s.runner.Shutdown(ctx))
	s.hub.Close()
	if s.pushes != nil {
		pctx, cancel := context.WithTimeout(ctx, pushGrace)
		errs = append(errs, s.pushes.Shutdown(pctx))
		cancel()
	}
	return errors.Join(errs...)
}

// pushGrace is how long a stopping server waits for its OTLP pushes.
const pushGrace = 5 * time.Second

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
		s.log.Error("handler panicked", "path", c.Path(), "err", err, "stack", string(stack))
		return err
	}}))
	e.Use(securityHeaders)
	e.Use(s.language)     // each page in the reader's language: the switch's cookie, else Accept-Language
	e.Use(s.checkHost)    // the Host names this studio; changes and websockets come from its own pages
	e.Use(s.guardBodies)  // bodies come at a pace, a few per client at once
	e.Use(limitBody)      // bodies sized to their route
	e.Use(s.requireToken) // the access token, when there is one
	e.Use(s.csrf)         // forms carry their token
	e.Use(s.admit)        // documents are checked a few at a time
	e.Use(s.readOnly)     // a read-only store: pages say so, changes are refused

	// Pages.
	e.GET("/", s.sessionsPage)                            // the sessions, the lessons, the start and import forms
	e.POST("/sessions", s.startSession)                   // start from a lesson or a scenario
	e.POST("/traces", s.importTrace)                      // import a trace
	e.GET("/sessions/:id", s.sessionPage)                 // tree, timeline, context panes, scrubber
	e.GET("/sessions/:id/scrub", s.scrubFragment)         // the scrubber at ?step=N
	e.GET("/sessions/:id/panels", s.panels)               // every panel for ?agent, ?step, ?timeline, as patches (JSON)
	e.GET("/sessions/:id/inherited", s.inheritedFragment) // a pane's inherited messages (?pane=, ?step=), loaded when opened
	e.GET("/sessions/:id/file", s.filePage)               // one of main's files whole (?path=)
	e.GET("/sessions/:id/messages/:mid", s.messagePage)   // one whole message (?fragment=1: just its body)
	e.GET("/sessions/:id/calls/:cid", s.callPage)         // one model call's whole context
	e.GET("/sessions/:id/files", s.filesPage)             // main's files, a page at a time (?after=PATH)
	e.POST("/sessions/:id/stop", s.stopSession)           // stop a running session
	e.GET("/lessons", s.lessonsPage)                      // every lesson
	e.GET("/lessons/:name", s.lessonPage)                 // a lesson, its latest run (or ?run=ID) and its table; &fragment=1 the run alone
	e.POST("/lessons/:name/run", s.runLesson)             // run every variant of a lesson
	e.GET("/compare", s.comparePage)                      // the picker; two sessions side by side (?a=ID&b=ID, &fragment=1 the comparison alone)
	e.POST("/compare", s.bothModes)                       // run a lesson or session in both modes, then compare
	e.GET("/sign-in", s.signInPage)                       // asks for the access token
	e.POST("/sign-in", s.signIn)                          // checks it, sets the cookie
	e.GET("/schema/:name", s.schemaFile)                  // the published JSON Schemas
	e.StaticFS("/static", echo.MustSubFS(fs.FS(static.Files), "."))
	e.GET("/favicon.ico", favicon)  // the studio's icon, as SVG
	e.GET("/fonts/:name", fontFile) // the tree's fonts, the ones its labels are measured in
	s.teamRoutes(e)                 // the team editor: /teams…, /clone-team
	s.opsRoutes(e)                  // /healthz, /metrics

	// API (formats.md §5).
	e.GET("/api/sessions", s.apiSessions)
	e.POST("/api/sessions", s.apiStartSession)
	e.GET("/api/sessions/:id/trace", s.apiTrace)
	e.GET("/api/sessions/:id/otlp", s.apiOTLP)
	e.POST("/api/traces", s.apiImport)
	e.GET("/api/sessions/:id/live", s.apiLive)

	// OTLP/HTTP (docs/ingest.md): traces from other frameworks become sessions.
	e.POST("/v1/traces", s.apiReceiveTraces)

	// The recording endpoint (docs/proxy.md): an OpenAI-compatible base URL
	// that forwards every call to the upstream and records it.
	e.POST("/v1/chat/completions", s.apiChat) // forwarded, relayed as it streams, recorded
	e.POST("/v1/messages", s.apiMessages)     // Anthropic's Messages API, the same way
	e.GET("/v1/models", s.apiModels)          // the upstream's models
	e.GET("/v1/models/:id", s.apiModels)      // one of them
	e.Any("/v1/*", s.apiNotServed)            // the Responses API, embeddings…: said so, in OpenAI's shape
	return e
}

func favicon(c echo.Context) error {
	b, err := fs.ReadFile(static.Files, "favicon.svg")
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "max-age=86400")
	return c.Blob(http.StatusOK, "image/svg+xml", b)
}

// isAPI reports whether a path is for programs rather than people: the
// JSON API and the OTLP receiver take bearer tokens, not forms.
func isAPI(p string) bool { return strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/v1/") }

// securityHeaders keeps the pages to their own scripts and styles, so a
// payload that ever escaped escaping still could not run.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		return next(c)
	}
}

// CheckAddr refuses to listen beyond this machine without a token.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w (use host:port, e.g. 127.0.0.1:7788)", addr, err)
	}
	if token != "" {
		return CheckToken(token)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New("listening on " + addr + " would let other machines reach the studio: set an access token with STUDIO_TOKEN or --token-file, or listen on 127.0.0.1")
}
