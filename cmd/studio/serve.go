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
	addr := c.String("addr", "127.0.0.1:7788", "127.0.0.1:7788", "listen on this `host:port`; beyond loopback it needs an access token", nil)
	dbPath := dbFlag(c)
	token := c.String("token", "", "", "access `token` every request must carry (at least 16 characters, hard to guess); prefer $STUDIO_TOKEN or --token-file, which ps does not show", nil)
	tokenFile := c.String("token-file", "", "", "read the access token from the first line of this `file`", nil)
	modelURL := c.String("model-url", "", "", "an OpenAI-compatible endpoint (`URL`), named \"default\"; empty: $OPENAI_BASE_URL, then OpenAI's, with $OPENAI_API_KEY", nil)
	modelName := c.String("model", "", "", "the model `name` to call there", nil)
	noStream := c.Bool("no-stream", "sessions on that endpoint wait for each whole answer instead of streaming it", nil)
	var endpoints endpointFlags
	c.fs.Var(&endpoints, "endpoint", "a model endpoint scenarios may name: `NAME=[PROVIDER:]URL[,KEY_ENV[,MODEL]]` (PROVIDER openai, the default, or anthropic), its key read from KEY_ENV (a *_API_KEY variable); repeatable")
	c.add("endpoint", "", []string{})
	configPath := c.String("config", "", "", "a JSON `file` of endpoints and allowed hosts (see docs/models.md)", nil)
	var allowedHosts listFlags
	c.fs.Var(&allowedHosts, "allowed-host", "another `name` the studio answers to (a proxy's, a LAN name); repeatable")
	c.add("allowed-host", "", []string{})
	maxConns := intFlag(c, "max-connections", server.DefaultMaxConnections, "connections open at once; past it, 503")
	maxClientConns := intFlag(c, "max-client-connections", server.DefaultMaxClientConnections,
		"connections one client address holds at once; past it, 429 (behind a reverse proxy every client is its address: raise it to --max-connections)")
	maxRunning := intFlag(c, "max-sessions", server.DefaultMaxRunning, "sessions running at once; past it, 503")
	maxViewers := intFlag(c, "max-viewers", server.DefaultMaxViewers, "live viewers in all; past it, 503")
	maxSessionViewers := intFlag(c, "max-session-viewers", server.DefaultMaxSessionViewers, "live viewers of one session; past it, 429")
	maxBigCalls := intFlag(c, "max-big-calls", server.DefaultMaxBigCalls, "recorded model calls over 1 MiB read and counted at once; past it, 503")
	taskTool := c.String("task-tool", "task", "task", "the `name` of the tool that delegates, in received OTLP traces and recorded calls", nil)
	quiet := c.Duration("otlp-quiet", server.DefaultQuiet, "a received trace from which no span arrives for this `long` ends as interrupted", nil)
	grace := c.Duration("otlp-grace", server.DefaultGrace, "once a received trace's root span is in, spans still missing are waited for this `long`", nil)
	maxTraces := intFlag(c, "otlp-max-traces", server.DefaultMaxTraces,
		"received OTLP traces open at once, apart from --max-sessions; past it, the quietest one ends as interrupted")
	otlpEndpoint := c.String("otlp-endpoint", "", "", "push each session's spans, as it ends, to this OTLP/HTTP `URL` (base, e.g. http://localhost:4318); "+
		"empty: $"+otlp.EnvTracesEndpoint+", then $"+otlp.EnvEndpoint, []string{})
	otlpProtocol := c.String("otlp-protocol", "", "http/protobuf", "how to push: `http/protobuf` or http/json", []string{otlp.EnvTracesProtocol, otlp.EnvProtocol})
	otlpConventions := c.String("otlp-conventions", "genai", "genai", "the pushed spans' attribute `conventions`: genai, or genai,openinference (for Arize Phoenix)", nil)
	otlpInputs := c.String("otlp-inputs", "new", "new", "what the pushed chat spans' inputs hold: `new` (the messages each call added) or full (capped)", nil)
	upstream := c.String("upstream", "", "", "where /v1/chat/completions calls go: `script:SCENARIO.json` (or script:lesson:NAME) answers from its script; an endpoint's NAME (--endpoint, --config) forwards to it", nil)
	upstreamURL := c.String("upstream-url", "", "", "forward /v1/chat/completions calls to this OpenAI-compatible server (`URL`, e.g. https://api.openai.com/v1), with the caller's Authorization", nil)
	upstreamProvider := c.String("upstream-provider", "openai", "openai", "what --upstream-url speaks: `openai` (chat completions) or anthropic (Anthropic's Messages API, POST /v1/messages; its key from $ANTHROPIC_API_KEY at api.anthropic.com)", nil)
	upstreamKey := c.String("upstream-key-env", "", "", "for a call that brings no Authorization, send the key in this `variable` (a *_API_KEY one) to --upstream-url; OPENAI_API_KEY goes to OpenAI (or $OPENAI_BASE_URL) without it", nil)
	upstreamTimeout := c.Duration("upstream-timeout", proxy.DefaultTimeout, "cut a call whose upstream sends nothing for this `long` (before its answer, or between two pieces of a stream)", nil)
	doneAfter := c.Duration("proxy-done-after", proxy.DefaultDoneAfter, "a recorded session whose main agent has answered ends, done, when no call comes for this `long`", nil)
	readOnly := c.Bool("read-only", "serve the database read-only: browse, compare, export; no runs, imports, recording or team saves "+
		"(a file or folder the studio may not write, a read-only mount, is served so without it)", nil)
	proxyQuiet := c.Duration("proxy-quiet", proxy.DefaultQuiet, "any other recorded session ends, interrupted (failed when its main agent's last call failed), when no call comes for this `long`", nil)
	if _, code, ok := c.parse(args); !ok {
		return code
	}
	if *tokenFile != "" && c.given("token") != "flag" {
		t, err := readToken(*tokenFile)
		if err != nil {
			return c.fail("--token-file: %v", err)
		}
		*token = t
	}
	if err := server.CheckAddr(*addr, *token); err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitUsage
	}
	for _, l := range []struct {
		name string
		v    int
	}{{"max-connections", *maxConns}, {"max-client-connections", *maxClientConns}, {"max-sessions", *maxRunning}, {"max-viewers", *maxViewers}, {"max-session-viewers", *maxSessionViewers}, {"max-big-calls", *maxBigCalls}} {
		if l.v < 1 {
			return c.fail("--%s is %d: give a number of 1 or more", l.name, l.v)
		}
	}
	if *maxSessionViewers > *maxViewers {
		return c.fail("--max-session-viewers (%d) is more than --max-viewers (%d): a session's viewers count toward both; raise --max-viewers too", *maxSessionViewers, *maxViewers)
	}
	push, problems := serveOTLP(*otlpEndpoint, *otlpProtocol, *otlpConventions, *otlpInputs)
	if len(problems) > 0 {
		for _, p := range problems[:len(problems)-1] {
			fmt.Fprintf(stderr, "studio serve: %s\n", p)
		}
		return c.fail("%s", problems[len(problems)-1])
	}
	var list []server.Endpoint
	if *configPath != "" {
		fromFile, hosts, err := readServeConfig(*configPath)
		if err != nil {
			return c.fail("%v", err)
		}
		list = append(list, fromFile...)
		allowedHosts = append(allowedHosts, hosts...)
	}
	list = append(list, endpoints...)
	if *modelName != "" {
		list = append(list, server.Endpoint{Name: "default", BaseURL: *modelURL, Model: *modelName, NoStream: *noStream})
	} else if c.given("model-url") == "flag" {
		return c.fail("--model-url needs --model NAME too (or $STUDIO_MODEL)")
	}
	if err := checkEndpoints(list); err != nil {
		return c.fail("%v", err)
	}
	up, code := upstreamFrom(c, *upstream, *upstreamURL, *upstreamProvider, *upstreamKey, list, stderr)
	if code != exitOK {
		return code
	}
	// A missing key or a bad URL stops the studio now, not at the first
	// session.
	for _, e := range list {
		if err := e.Verify(); err != nil {
			return c.fail("%v", err)
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The first page that counts tokens must not wait for a tokenizer.
	go tokens.Warm()
	roReason := ""
	if *readOnly {
		roReason = db.ReadOnlyAsked
	} else {
		roReason = db.ReadOnlyReason(*dbPath)
	}
	d, release, ok := serveStore(ctx, *dbPath, roReason, stderr)
	if !ok {
		return exitFailed
	}
	defer release()
	if roReason != "" {
		push, up.upstream = nil, nil // nothing is pushed, nothing recorded
	}

	srv := server.New(server.Config{DB: d, Logger: log, Token: *token, Endpoints: list, Addr: *addr, AllowedHosts: allowedHosts,
		Limits:   server.Limits{MaxRunning: *maxRunning, MaxViewers: *maxViewers, MaxSessionViewers: *maxSessionViewers, MaxBigCalls: *maxBigCalls},
		TaskTool: *taskTool, OTLPQuiet: *quiet, OTLPGrace: *grace, OTLPMaxTraces: *maxTraces, OTLP: push,
		Upstream: up.upstream, UpstreamTimeout: *upstreamTimeout, ProxyDoneAfter: *doneAfter, ProxyQuiet: *proxyQuiet, ReadOnly: roReason})
	if roReason == "" && !recoverSessions(ctx, srv, d, log, stderr) {
		return exitFailed
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "studio: %v\n", err)
		return exitFailed
	}
	httpSrv := server.NewHTTPServer(srv.Handler())
	fmt.Fprintf(stdout, "Delegation Studio on http://%s (sessions in %s)\n", ln.Addr(), db.Redacted(*dbPath))
	if roReason != "" {
		fmt.Fprintf(stdout, "Read-only (%s): browse, compare and export; runs, imports, OTLP traces, recording and team saves are refused\n", readOnlyWhy(roReason))
	}
	for _, e := range list {
		fmt.Fprintf(stdout, "Model endpoint %s (%s)\n", e.Label(), keyNote(e))
	}
	if push != nil {
		fmt.Fprintf(stdout, "Pushing each session's spans, as it ends, to %s (%s)\n", push.Pusher.Endpoint(), push.Pusher.Protocol())
	}
	if up.upstream != nil {
		fmt.Fprintf(stdout, "Recording endpoint http://%s/v1 → %s (%s)\n", ln.Addr(), up.upstream, up.note)
		if _, ok := up.upstream.(proxy.MessagesUpstream); ok {
			fmt.Fprintf(stdout, "Anthropic's Messages API at http://%s/v1/messages (an Anthropic SDK's base URL: http://%s)\n", ln.Addr(), ln.Addr())
		}
	}
	if c.given("token") == "flag" {
		log.Warn("the access token was given with --token: other users of this machine can read it in the process list; use STUDIO_TOKEN or --token-file")
	}

	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(server.LimitListener(ln, *maxConns, *maxClientConns)) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "studio: %v\n", err)
			return exitFailed
		}
	case <-ctx.Done():
		log.Info("stopping: running sessions end as interrupted")
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown()
	_ = httpSrv.Shutdown(shutdown)
	return exitOK
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
