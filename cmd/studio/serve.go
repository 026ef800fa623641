package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/otlp"
	"github.com/delegationstudio/studio/internal/proxy"
	"github.com/delegationstudio/studio/internal/push"
	"github.com/delegationstudio/studio/internal/server"
	"github.com/delegationstudio/studio/internal/tokens"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := defineServe(stdout, stderr)
	if _, code, ok := f.c.parse(args); !ok {
		return code
	}
	plan, code := f.check(stderr)
	if code != exitOK {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The first page that counts tokens must not wait for a tokenizer.
	go tokens.Warm()
	roReason := ""
	if *f.readOnly {
		roReason = db.ReadOnlyAsked
	} else {
		roReason = db.ReadOnlyReason(*f.dbPath)
	}
	d, release, ok := serveStore(ctx, *f.dbPath, roReason, stderr)
	if !ok {
		return exitFailed
	}
	defer release()
	if roReason != "" {
		plan.push, plan.up.upstream = nil, nil // nothing is pushed, nothing recorded
	}
	srv := server.New(f.config(d, log, plan, roReason))
	if roReason == "" && !recoverSessions(ctx, srv, d, log, stderr) {
		return exitFailed
	}
	ln, err := net.Listen("tcp", *f.addr)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	f.announce(stdout, ln.Addr(), plan, roReason)
	if f.c.given("token") == "flag" {
		log.Warn("the access token was given with --token: other users of this machine can read it in the process list; use STUDIO_TOKEN or --token-file")
	}
	httpSrv := server.NewHTTPServer(srv.Handler())
	return serveUntil(ctx, httpSrv, server.LimitListener(ln, *f.maxConns, *f.maxClientConns), srv, log, stderr)
}

// shutdownGrace bounds each step of stopping: the requests in flight
// finishing, then the server's parts (sessions recorded, pushes sent).
const shutdownGrace = 10 * time.Second

// serveUntil serves until the listener fails or ctx ends, then stops: the
// HTTP server first, so that the requests in flight finish (an import, a
// page; the recording endpoint's calls, waiting on their upstream, are cut
// and answered: Drain), then the server's parts, each step bounded by
// shutdownGrace.
func serveUntil(ctx context.Context, httpSrv *http.Server, ln net.Listener, srv shutdowner, log *slog.Logger, stderr io.Writer) int {
	httpSrv.RegisterOnShutdown(srv.Drain)
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
	case <-ctx.Done():
		log.Info("stopping: running sessions end as interrupted")
	}
	hctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	if err := httpSrv.Shutdown(hctx); err != nil {
		log.Warn("requests still in flight when the wait ended are cut", "err", err)
		_ = httpSrv.Close()
	}
	cancel()
	pctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(pctx); err != nil {
		log.Warn("stopping did not finish", "err", err)
	}
	return exitOK
}

// shutdowner is what serveUntil stops: Drain as the HTTP server begins to
// stop, Shutdown (the server's parts) once it has.
type shutdowner interface {
	Drain()
	Shutdown(context.Context) error
}

// serveFlags are serve's flags.
type serveFlags struct {
	c                                                           *command
	addr, dbPath, token, tokenFile, modelURL, modelName         *string
	configPath, taskTool                                        *string
	otlpEndpoint, otlpProtocol, otlpConventions, otlpInputs     *string
	upstream, upstreamURL, upstreamProvider, upstreamKey        *string
	noStream, readOnly                                          *bool
	maxConns, maxClientConns, maxRunning, maxViewers, maxTraces *int
	maxSessionViewers, maxBigCalls                              *int
	quiet, grace, upstreamTimeout, doneAfter, proxyQuiet        *time.Duration
	endpoints                                                   endpointFlags
	allowedHosts                                                listFlags
}

// servePlan is what serve's checked flags give.
type servePlan struct {
	list []server.Endpoint
	push *push.Config
	up   chosenUpstream
}

func defineServe(stdout, stderr io.Writer) *serveFlags {
	c := newCommand("serve", "studio [serve] [--addr HOST:PORT] [--db FILE] [--endpoint NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]]... [flags]",
		`Serves the web studio: sessions, lessons, the team editor, compare, exports.
It listens on 127.0.0.1 unless told otherwise; any other address needs an access
token ($STUDIO_TOKEN or --token-file; --token shows in the process list).
It answers only to the address, the loopback names and --allowed-host names.

Model calls go only to the endpoints given here (--endpoint, --model-url with
--model, or --config); a scenario names one ("model": {"endpoint": "NAME"})
and can give no URL or key variable of its own. Keys come from *_API_KEY
variables; OPENAI_API_KEY goes to OpenAI (or $OPENAI_BASE_URL) only.

GET /healthz says whether the database is reachable and its disk has room;
GET /metrics gives the studio's figures in the Prometheus text format. It
receives OpenTelemetry traces (OTLP/HTTP, protobuf or JSON) at POST
/v1/traces: each trace becomes a session as its spans arrive (docs/ingest.md).
With an OTLP endpoint to push to (--otlp-endpoint, or the
OTEL_EXPORTER_OTLP_* variables) it sends each session's spans there as the
session ends (docs/otlp.md).

It is also an OpenAI-compatible endpoint that records what every agent sent:
point a program's base URL at http://HOST:PORT/v1 and each call to
/v1/chat/completions is forwarded to the upstream (--upstream-url, with the
caller's Authorization, or else the key of --upstream-key-env), its answer
relayed as it streams, and both recorded, the agents and their delegations
inferred from content (docs/proxy.md). With --upstream-provider anthropic it
records Anthropic's Messages API (POST /v1/messages, an Anthropic SDK's base
URL http://HOST:PORT) the same way. --upstream script:SCENARIO.json answers
either from a scenario's script instead: offline, deterministic, no key.`, stdout, stderr)
	f := &serveFlags{c: c}
	f.addr = c.String("addr", "127.0.0.1:7788", "127.0.0.1:7788", "listen on this `host:port`; beyond loopback it needs an access token", nil)
	f.dbPath = dbFlag(c)
	f.token = c.String("token", "", "", "access `token` every request must carry (at least 16 characters, hard to guess); prefer $STUDIO_TOKEN or --token-file, which ps does not show", nil)
	f.tokenFile = c.String("token-file", "", "", "read the access token from the first line of this `file`", nil)
	f.modelURL = c.String("model-url", "", "", "an OpenAI-compatible endpoint (`URL`), named \"default\"; empty: $OPENAI_BASE_URL, then OpenAI's, with $OPENAI_API_KEY", nil)
	f.modelName = c.String("model", "", "", "the model `name` to call there", nil)
	f.noStream = c.Bool("no-stream", "sessions on that endpoint wait for each whole answer instead of streaming it", nil)
	c.fs.Var(&f.endpoints, "endpoint", "a model endpoint scenarios may name: `NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]` (PROVIDER openai, the default, or anthropic), its key read from KEY_ENV (a *_API_KEY variable); repeatable")
	c.add("endpoint", "", []string{})
	f.configPath = c.String("config", "", "", "a JSON `file` of endpoints and allowed hosts (see docs/models.md)", nil)
	c.fs.Var(&f.allowedHosts, "allowed-host", "another `name` the studio answers to (a proxy's, a LAN name); repeatable")
	c.add("allowed-host", "", []string{})
	f.defineLimits()
	f.defineReceiving()
	return f
}

// defineLimits defines serve's caps.
func (f *serveFlags) defineLimits() {
	c := f.c
	f.maxConns = intFlag(c, "max-connections", server.DefaultMaxConnections, "connections open at once; past it, 503")
	f.maxClientConns = intFlag(c, "max-client-connections", server.DefaultMaxClientConnections,
		"connections one client address holds at once; past it, 429 (behind a reverse proxy every client is its address: raise it to --max-connections)")
	f.maxRunning = intFlag(c, "max-sessions", server.DefaultMaxRunning, "sessions running at once; past it, 503")
	f.maxViewers = intFlag(c, "max-viewers", server.DefaultMaxViewers, "live viewers in all; past it, 503")
	f.maxSessionViewers = intFlag(c, "max-session-viewers", server.DefaultMaxSessionViewers, "live viewers of one session; past it, 429")
	f.maxBigCalls = intFlag(c, "max-big-calls", server.DefaultMaxBigCalls, "recorded model calls over 1 MiB read and counted at once; past it, 503")
}

// defineReceiving defines how serve receives OTLP traces, pushes them, and
// records calls.
func (f *serveFlags) defineReceiving() {
	c := f.c
	f.taskTool = c.String("task-tool", "task", "task", "the `name` of the tool that delegates, in received OTLP traces and recorded calls", nil)
	f.quiet = c.Duration("otlp-quiet", server.DefaultQuiet, "a received trace from which no span arrives for this `long` ends as interrupted", nil)
	f.grace = c.Duration("otlp-grace", server.DefaultGrace, "once a received trace's root span is in, spans still missing are waited for this `long`", nil)
	f.maxTraces = intFlag(c, "otlp-max-traces", server.DefaultMaxTraces,
		"received OTLP traces open at once, apart from --max-sessions; past it, the quietest one ends as interrupted")
	f.otlpEndpoint = c.String("otlp-endpoint", "", "", "push each session's spans, as it ends, to this OTLP/HTTP `URL` (base, e.g. http://localhost:4318); "+
		"empty: $"+otlp.EnvTracesEndpoint+", then $"+otlp.EnvEndpoint, []string{})
	f.otlpProtocol = c.String("otlp-protocol", "", "http/protobuf", "how to push: `http/protobuf` or http/json", []string{otlp.EnvTracesProtocol, otlp.EnvProtocol})
	f.otlpConventions = c.String("otlp-conventions", "genai", "genai", "the pushed spans' attribute `conventions`: genai, or genai,openinference (for Arize Phoenix)", nil)
	f.otlpInputs = c.String("otlp-inputs", "new", "new", "what the pushed chat spans' inputs hold: `new` (the messages each call added) or full (capped)", nil)
	f.upstream = c.String("upstream", "", "", "where /v1/chat/completions calls go: `script:SCENARIO.json` (or script:lesson:NAME) answers from its script; an endpoint's NAME (--endpoint, --config) forwards to it", nil)
	f.upstreamURL = c.String("upstream-url", "", "", "forward /v1/chat/completions calls to this OpenAI-compatible server (`URL`, e.g. https://api.openai.com/v1), with the caller's Authorization", nil)
	f.upstreamProvider = c.String("upstream-provider", "openai", "openai", "what --upstream-url speaks: `openai` (chat completions) or anthropic (Anthropic's Messages API, POST /v1/messages; its key from $ANTHROPIC_API_KEY at api.anthropic.com)", nil)
	f.upstreamKey = c.String("upstream-key-env", "", "", "for a call that brings no Authorization, send the key in this `variable` (a *_API_KEY one) to --upstream-url; OPENAI_API_KEY goes to OpenAI (or $OPENAI_BASE_URL) without it", nil)
	f.upstreamTimeout = c.Duration("upstream-timeout", proxy.DefaultTimeout, "cut a call whose upstream sends nothing for this `long` (before its answer, or between two pieces of a stream)", nil)
	f.doneAfter = c.Duration("proxy-done-after", proxy.DefaultDoneAfter, "a recorded session whose main agent has answered ends, done, when no call comes for this `long`", nil)
	f.readOnly = c.Bool("read-only", "serve the database read-only: browse, compare, export; no runs, imports, recording or team saves "+
		"(a file or folder the studio may not write, a read-only mount, is served so without it)", nil)
	f.proxyQuiet = c.Duration("proxy-quiet", proxy.DefaultQuiet, "any other recorded session ends, interrupted (failed when its main agent's last call failed), when no call comes for this `long`", nil)
}

// check reads the flags' files and endpoints and checks them all, so that a
// mistake stops serve before it opens anything.
func (f *serveFlags) check(stderr io.Writer) (servePlan, int) {
	if *f.tokenFile != "" && f.c.given("token") != "flag" {
		t, err := readToken(*f.tokenFile)
		if err != nil {
			return servePlan{}, f.c.fail("--token-file: %v", err)
		}
		*f.token = t
	}
	if err := server.CheckAddr(*f.addr, *f.token); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return servePlan{}, exitUsage
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"max-connections", *f.maxConns}, {"max-client-connections", *f.maxClientConns}, {"max-sessions", *f.maxRunning}, {"max-viewers", *f.maxViewers}, {"max-session-viewers", *f.maxSessionViewers}, {"max-big-calls", *f.maxBigCalls}} {
		if l.v < 1 {
			return servePlan{}, f.c.fail("--%s is %d: give a number of 1 or more", l.name, l.v)
		}
	}
	if *f.maxSessionViewers > *f.maxViewers {
		return servePlan{}, f.c.fail("--max-session-viewers (%d) is more than --max-viewers (%d): a session's viewers count toward both; raise --max-viewers too", *f.maxSessionViewers, *f.maxViewers)
	}
	pushTo, problems := serveOTLP(*f.otlpEndpoint, *f.otlpProtocol, *f.otlpConventions, *f.otlpInputs)
	if len(problems) > 0 {
		for _, p := range problems[:len(problems)-1] {
			fmt.Fprintf(stderr, "studio serve: %s\n", p)
		}
		return servePlan{}, f.c.fail("%s", problems[len(problems)-1])
	}
	var list []server.Endpoint
	if *f.configPath != "" {
		fromFile, hosts, err := readServeConfig(*f.configPath)
		if err != nil {
			return servePlan{}, f.c.fail("%v", err)
		}
		list = append(list, fromFile...)
		f.allowedHosts = append(f.allowedHosts, hosts...)
	}
	list = append(list, f.endpoints...)
	if *f.modelName != "" {
		list = append(list, server.Endpoint{Name: "default", BaseURL: *f.modelURL, Model: *f.modelName, NoStream: *f.noStream})
	} else if f.c.given("model-url") == "flag" {
		return servePlan{}, f.c.fail("--model-url needs --model NAME too (or $STUDIO_MODEL)")
	}
	if err := checkEndpoints(list); err != nil {
		return servePlan{}, f.c.fail("%v", err)
	}
	up, code := upstreamFrom(f.c, *f.upstream, *f.upstreamURL, *f.upstreamProvider, *f.upstreamKey, list, stderr)
	if code != exitOK {
		return servePlan{}, code
	}
	// A missing key or a bad URL stops the studio now, not at the first
	// session.
	for _, e := range list {
		if err := e.Verify(); err != nil {
			return servePlan{}, f.c.fail("%v", err)
		}
	}
	return servePlan{list: list, push: pushTo, up: up}, exitOK
}

// config is the server's configuration from the flags.
func (f *serveFlags) config(d store, log *slog.Logger, plan servePlan, roReason string) server.Config {
	return server.Config{DB: d, Logger: log, Token: *f.token, Endpoints: plan.list, Addr: *f.addr, AllowedHosts: f.allowedHosts,
		Limits:   server.Limits{MaxRunning: *f.maxRunning, MaxViewers: *f.maxViewers, MaxSessionViewers: *f.maxSessionViewers, MaxBigCalls: *f.maxBigCalls},
		TaskTool: *f.taskTool, OTLPQuiet: *f.quiet, OTLPGrace: *f.grace, OTLPMaxTraces: *f.maxTraces, OTLP: plan.push,
		Upstream: plan.up.upstream, UpstreamTimeout: *f.upstreamTimeout, ProxyDoneAfter: *f.doneAfter, ProxyQuiet: *f.proxyQuiet, ReadOnly: roReason}
}

// announce says where the studio listens and what it serves.
func (f *serveFlags) announce(stdout io.Writer, addr net.Addr, plan servePlan, roReason string) {
	fmt.Fprintf(stdout, "Delegation Studio on http://%s (sessions in %s)\n", addr, db.Redacted(*f.dbPath))
	if roReason != "" {
		fmt.Fprintf(stdout, "Read-only (%s): browse, compare and export; runs, imports, OTLP traces, recording and team saves are refused\n", readOnlyWhy(roReason))
	}
	for _, e := range plan.list {
		fmt.Fprintf(stdout, "Model endpoint %s (%s)\n", e.Label(), keyNote(e))
	}
	if plan.push != nil {
		fmt.Fprintf(stdout, "Pushing each session's spans, as it ends, to %s (%s)\n", plan.push.Pusher.Endpoint(), plan.push.Pusher.Protocol())
	}
	if up := plan.up.upstream; up != nil {
		fmt.Fprintf(stdout, "Recording endpoint http://%s/v1 → %s (%s)\n", addr, up, plan.up.note)
		if _, ok := up.(proxy.MessagesUpstream); ok {
			fmt.Fprintf(stdout, "Anthropic's Messages API at http://%s/v1/messages (an Anthropic SDK's base URL: http://%s)\n", addr, addr)
		}
	}
}

// serveStore opens the store serve serves: writable, holding the server
// lock (one server per file), or, when roReason says why, read-only, with
// no lock (nothing is written, so any number may read).
func serveStore(ctx context.Context, dbPath, roReason string, stderr io.Writer) (store, func(), bool) {
	if roReason != "" {
		d, ok := openReadOnly(ctx, dbPath, stderr)
		if !ok {
			return nil, nil, false
		}
		return d, func() { d.Close() }, true
	}
	// One server per file: a second one stops here, having touched nothing.
	lock, err := db.LockServe(dbPath)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return nil, nil, false
	}
	d, ok := openStore(ctx, dbPath, stderr)
	if !ok {
		lock.Release()
		return nil, nil, false
	}
	return d, func() { d.Close(); lock.Release() }, true
}

// recoverSessions ends the sessions a stopped studio left running, and keeps
// ending those whose lease lapses (a killed `studio run --db`) while the
// server runs.
func recoverSessions(ctx context.Context, srv *server.Server, d store, log *slog.Logger, stderr io.Writer) bool {
	if n, err := srv.Recover(ctx); err != nil {
		if dd, ok := d.(interface{ Describe(error) error }); ok {
			err = dd.Describe(err)
		}
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return false
	} else if n > 0 {
		log.Info("sessions left running by a stopped studio are now interrupted", "count", n)
	}
	go srv.KeepRecovering(ctx)
	return true
}

// readOnlyWhy says a read-only reason for the terminal.
func readOnlyWhy(reason string) string {
	switch reason {
	case db.ReadOnlyAsked:
		return "--read-only"
	case db.ReadOnlyMount:
		return "the database is on a read-only file system"
	}
	return "this user may not write the database or its folder"
}

// intFlag defines an int flag, its default said in the help and no
// variable of its own.
func intFlag(c *command, name string, def int, usage string) *int {
	p := c.fs.Int(name, def, usage)
	c.add(name, fmt.Sprint(def), []string{})
	return p
}

// serveOTLP reads where serve pushes sessions' spans: nowhere unless an
// endpoint is given or set in the environment.
func serveOTLP(endpoint, protocol, conventions, inputs string) (*push.Config, []string) {
	opts, problems := exportOptions(inputs, strconv.Itoa(otlp.DefaultInputCap), conventions, "0")
	cfg, found, err := otlp.ConfigFromEnv(endpoint, protocol, os.Getenv)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if !found || len(problems) > 0 {
		return nil, problems
	}
	p, err := otlp.NewPusher(cfg)
	if err != nil {
		return nil, []string{err.Error()}
	}
	return &push.Config{Pusher: p, Options: opts}, nil
}
