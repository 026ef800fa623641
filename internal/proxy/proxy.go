// Package proxy is the recording endpoint: an OpenAI-compatible chat-
// completions endpoint that sits between someone else's agent and its
// model. Each request is forwarded to an upstream (an OpenAI-compatible
// server, or a scenario's script) and its answer relayed as it arrives;
// both are recorded as a model call of a session, the agent behind the
// call inferred from the request's content by internal/ingest, as the tree
// is built live. No instrumentation is needed, in any language: what is
// recorded is exactly what each agent sent its model.
//
// docs/proxy.md says how to point a program at it, how requests are
// grouped into sessions and when a session ends.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/observed"
	"github.com/delegationstudio/studio/internal/scenario"
)

// Defaults (docs/proxy.md).
const (
	// DefaultTimeout is how long an upstream may be silent — before its
	// answer starts, or between two pieces of a streamed answer — before
	// the call is cut (504, or an error event in a stream).
	DefaultTimeout = 5 * time.Minute
	// DefaultDoneAfter: a session whose main agent has answered without
	// asking for a tool, with no call in flight and every child finished,
	// ends as done when no request came for this long.
	DefaultDoneAfter = 30 * time.Second
	// DefaultQuiet: any other session ends, interrupted (or failed, when
	// its main agent's last call failed), when no request came for this
	// long: the program stopped in the middle of its run.
	DefaultQuiet = 10 * time.Minute
	// SessionHeader groups requests into a session by its value.
	SessionHeader = "X-Studio-Session"
	// maxKey bounds a SessionHeader value.
	maxKey = 200
)

// Store creates the sessions the endpoint records: the observed
// sessions' (internal/observed), which open, sweep and end them.
type Store = observed.Store

// Recording is a session being recorded.
type Recording = observed.Recording

// Config is what the endpoint needs.
type Config struct {
	Upstream  Upstream // nil: every request is refused, saying how to set one
	Store     Store
	Counter   delegation.Counter
	Tokenizer string
	TaskTool  string // the tool that delegates ("task" when empty)
	// Prices prices each call by the model it names, as for any session;
	// nil prices nothing.
	Prices delegation.PriceTable
	// Timeout, DoneAfter and Quiet: 0 takes the defaults above.
	Timeout, DoneAfter, Quiet time.Duration
	Now                       func() time.Time
	Logger                    *slog.Logger
}

// Proxy is the recording endpoint.
type Proxy struct {
	cfg Config
	// counts counts for the recorded sessions (counts.go).
	counts *counts

	// stopping ends when Close is called: the calls in flight give up.
	stopping context.Context
	stop     context.CancelFunc

	// sessions are the open sessions, oldest first, each under its
	// SessionHeader value ("" when grouped by content); its lock is the
	// endpoint's, where a request chooses its session and starts there.
	sessions *observed.Set[*liveSession]
	wg       sync.WaitGroup // requests in flight
}

// liveSession is what a session being recorded records into.
type liveSession struct {
	p      *Proxy
	id     string
	s      *ingest.Session
	began  time.Time    // when a request last came: which session is the latest (under the set's lock)
	flight atomic.Int32 // requests in flight
}

// session is an open session of the endpoint.
type session = observed.Session[*liveSession]

// New makes the endpoint. Run sweeps its sessions; Close ends them.
func New(cfg Config) *Proxy {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.DoneAfter <= 0 {
		cfg.DoneAfter = DefaultDoneAfter
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.TaskTool == "" {
		cfg.TaskTool = delegation.TaskToolName
	}
	p := &Proxy{cfg: cfg, counts: newCounts(cfg.Counter)}
	// Stopping one in the studio ends it, interrupted; the request in
	// flight is answered, and recorded no more.
	p.sessions = observed.NewSet[*liveSession](observed.Config{Store: cfg.Store, Now: cfg.Now, Logger: cfg.Logger,
		Stopped: observed.Ending{Status: delegation.StatusInterrupted, Reason: "stopped in the studio", StoppedBy: delegation.StopUser},
		Closed:  observed.Ending{Status: delegation.StatusInterrupted, Reason: "the studio stopped", StoppedBy: delegation.StopShutdown}})
	p.stopping, p.stop = context.WithCancel(context.Background())
	return p
}

// errNoUpstream answers every request of a studio started without one.
var errNoUpstream = &Error{Status: http.StatusServiceUnavailable, Code: "no_upstream",
	Message: "This studio records model calls but has no upstream to send them to: start it with --upstream-url URL " +
		"(an OpenAI-compatible server) or --upstream script:SCENARIO.json (docs/proxy.md)."}

// errClosing answers a request the stopping studio takes no more, and one
// in flight it cut before anything of the answer was sent: a 503 the
// client retries.
var errClosing = &Error{Status: http.StatusServiceUnavailable, Code: "closing", RetryAfter: closingRetry,
	Message: "The studio is stopping: send the request again to the next one."}

// closingRetry is the Retry-After of errClosing, in seconds: time for a
// studio to start again in the stopped one's place.
const closingRetry = 5

// ServeChat is POST /v1/chat/completions. The body is expected to be
// limited by the caller (a MaxBytesReader): past it, 413.
func (p *Proxy) ServeChat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			(&Error{Status: http.StatusRequestEntityTooLarge, Message: "The request is too large for this studio: at most " +
				byteSize(tooLarge.Limit) + "."}).Write(w)
			return
		}
		(&Error{Status: http.StatusBadRequest, Message: "The request body could not be read: " + err.Error()}).Write(w)
		return
	}
	req, perr := Parse(body)
	if perr != nil {
		perr.Write(w)
		return
	}
	if p.cfg.Upstream == nil {
		errNoUpstream.Write(w)
		return
	}
	key, kerr := sessionKey(r.Header.Get(SessionHeader))
	if kerr != nil {
		kerr.Write(w)
		return
	}
	ls, turn, serr := p.start(r.Context(), key, req, r.Header.Get("User-Agent"), scenario.ProviderOpenAI)
	if serr != nil {
		serr.Write(w)
		return
	}
	defer p.end(ls)
	taken(r.Context())
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	defer context.AfterFunc(p.stopping, func() { cancel(errStopped) })()
	out := newReply(w, turn, p.cfg.Now, req.Stream)
	x := &Exchange{Request: req, Body: body, Header: r.Header, Agent: turn.Agent(), SessionID: ls.ID, Turn: turn, Timeout: p.cfg.Timeout}
	p.cfg.Upstream.Chat(ctx, x, out)
	out.close(ctx)
}

// takenKey holds, in a request's context, what to call once the request
// is taken (WithTaken).
type takenKey struct{}

// WithTaken has the endpoint call taken once the request is taken: its
// body read and checked and its call's start recorded, the work that grows
// with the body done; what is left is waiting on the upstream. (The server
// reads large bodies a few at a time: a slot is given back then, not when
// the model has answered, minutes later.)
func WithTaken(ctx context.Context, taken func()) context.Context {
	return context.WithValue(ctx, takenKey{}, taken)
}

func taken(ctx context.Context) {
	if f, ok := ctx.Value(takenKey{}).(func()); ok {
		f()
	}
}

// readBody reads a request's body into one buffer of its declared length
// (at most maxPresize): io.ReadAll's growing buffers held about twice a
// 30 MB body at the peak.
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	b := make([]byte, 0, min(r.ContentLength, maxPresize)+1) // +1: room for the read that finds the end
	for {
		if len(b) == cap(b) { // longer than declared: as io.ReadAll does
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// maxPresize bounds the buffer a declared length sets aside before a byte
// has come: the server's own limit on the body is 32 MiB.
const maxPresize = 64 << 20

// errStopped is why a call in flight ends when the studio stops.
var errStopped = errors.New("the studio stopped")

// ServeModels is GET /v1/models and /v1/models/{id}.
func (p *Proxy) ServeModels(w http.ResponseWriter, r *http.Request, id string) {
	if p.cfg.Upstream == nil {
		errNoUpstream.Write(w)
		return
	}
	p.cfg.Upstream.Models(r.Context(), r.Header, id, w)
}

// sessionKey checks a SessionHeader value.
func sessionKey(v string) (string, *Error) {
	v = strings.TrimSpace(v)
	if len(v) > maxKey || !utf8.ValidString(v) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return "", &Error{Status: http.StatusBadRequest, Param: SessionHeader, Code: "invalid_value",
			Message: SessionHeader + " must be printable text of at most 200 bytes: it names the session the request belongs to."}
	}
	return v, nil
}

// start finds the request's session — or opens one — and records the
// call's start there. Choosing and starting happen under one lock, so two
// requests never both take the place one task call leaves for its child;
// the request's big texts are counted before it is taken (counts.go), so
// that a huge request holds it no longer than a small one.
// A request that opens a session names its provider by its route
// (provider): the API the client spoke.
func (p *Proxy) start(ctx context.Context, key string, req *Request, agent, provider string) (*session, *ingest.Turn, *Error) {
	now := p.cfg.Now()
	in := req.Call(now)
	defer p.counts.warm(in)()
	var ls *session
	var turn *ingest.Turn
	var serr *Error
	err := p.sessions.Do(context.WithoutCancel(ctx), func(l observed.Locked[*liveSession]) error {
		ls = p.choose(l, key, req, in)
		if ls == nil {
			var err error
			if ls, err = p.open(l, key, req, agent, provider); err != nil {
				p.cfg.Logger.Error("open a recorded session", "err", err)
				serr = &Error{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
					Message: "The studio could not store this session: " + err.Error()}
				return nil
			}
		}
		turn = ls.Obs.s.StartCall(in)
		ls.Obs.flight.Add(1)
		ls.Obs.began = now
		ls.Touch(now)
		p.wg.Add(1)
		return nil
	})
	if err != nil {
		return nil, nil, errClosing
	}
	if serr != nil {
		return nil, nil, serr
	}
	return ls, turn, nil
}

// end is called when a request is answered: the session is touched before
// the request leaves the flight, so a sweep never sees neither.
func (p *Proxy) end(ls *session) {
	ls.Touch(p.cfg.Now())
	ls.Obs.flight.Add(-1)
	p.wg.Done()
}

// choose finds the open session a request belongs to (docs/proxy.md,
// "Sessions"), or nil when it starts one:
//
//  1. with a SessionHeader, the open session of that key;
//  2. else the session whose agents explain the request best: it extends
//     an agent's history, or is the first request of a child a waiting
//     task call describes — the one that already holds most of its input;
//  3. a request that opens a conversation (nothing but system and user
//     messages) and that no session explains starts a new one;
//  4. anything else belongs to the session with the same first prompt,
//     else to the one most recently active, where it is shown on an agent
//     of its own, flagged (unattached), when nothing there explains it.
func (p *Proxy) choose(l observed.Locked[*liveSession], key string, req *Request, in ingest.CallInput) *session {
	if key != "" {
		return l.Find(key)
	}
	open := l.All()
	var best *session
	bestShared := -1
	for _, ls := range open {
		if ls.Key != "" || ls.Ended() {
			continue
		}
		pl := ls.Obs.s.Place(in)
		if pl.Weak() || pl.Unattached || pl.Main {
			continue
		}
		if pl.Shared > bestShared || (pl.Shared == bestShared && ls.Obs.began.After(best.Obs.began)) {
			best, bestShared = ls, pl.Shared
		}
	}
	if best != nil || req.Starts() {
		return best
	}
	prompt := req.Prompt()
	for i := len(open) - 1; i >= 0; i-- {
		if ls := open[i]; ls.Key == "" && !ls.Ended() && prompt != "" && ls.Obs.s.Prompt() == prompt {
			return ls
		}
	}
	for _, ls := range open {
		if ls.Key == "" && !ls.Ended() && (best == nil || ls.Obs.began.After(best.Obs.began)) {
			best = ls
		}
	}
	return best
}

// open starts recording a new session, under the set's lock.
func (p *Proxy) open(l observed.Locked[*liveSession], key string, req *Request, agent, provider string) (*session, error) {
	name := key
	if name == "" {
		name = sessionName(req.Prompt())
	}
	origin := &delegation.Origin{Kind: delegation.OriginProxy, Service: clientName(agent), Upstream: p.cfg.Upstream.String(),
		Provider: provider}
	ls, err := l.Open(key, name, origin, func(rec Recording) *liveSession {
		return &liveSession{p: p, id: rec.ID, s: ingest.New(ingest.Config{SessionID: rec.ID, Name: name, Tokenizer: p.cfg.Tokenizer,
			Counter: p.counter(), Sink: rec.Sink, TaskTool: p.cfg.TaskTool, Origin: origin, Modes: modesOf(p.cfg.Upstream), Prices: p.cfg.Prices})}
	})
	if err != nil {
		return nil, err
	}
	// The name is the program's prompt: it stays out of the logs.
	p.cfg.Logger.Info("recording a session", "session", ls.ID, "client", origin.Service)
	return ls, nil
}

// counter is what the recorded sessions count with: nil when nothing is
// counted.
func (p *Proxy) counter() delegation.Counter {
	if p.cfg.Counter == nil {
		return nil
	}
	return p.counts
}

// sessionName names a session after its first prompt.
func sessionName(prompt string) string {
	prompt = strings.Join(strings.Fields(prompt), " ")
	if prompt == "" {
		return "recorded"
	}
	if utf8.RuneCountInString(prompt) > 60 {
		r := []rune(prompt)
		prompt = strings.TrimSpace(string(r[:59])) + "…"
	}
	return prompt
}

// clientName is the client's User-Agent, made fit to show: printable, at
// most 100 characters.
func clientName(ua string) string {
	ua = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, ua)
	if utf8.RuneCountInString(ua) > 100 {
		ua = string([]rune(ua)[:100])
	}
	return strings.TrimSpace(ua)
}

// Close records how the session ended.
func (ls *liveSession) Close(e observed.Ending) {
	if e.StoppedBy != "" {
		ls.s.StopBy(e.StoppedBy)
	}
	ls.s.Finish(e.Status, e.Reason, nil, time.Time{})
	if f, ok := ls.p.cfg.Upstream.(interface{ Forget(sessionID string) }); ok {
		f.Forget(ls.id)
	}
}

// Due: a session ends done when the main agent has answered and nothing
// came for DoneAfter; interrupted, or failed when the main agent's last
// call failed, when nothing came for Quiet. One with a request in flight
// or a call open goes on.
func (ls *liveSession) Due(_ time.Time, idle time.Duration) (observed.Ending, bool) {
	if ls.flight.Load() > 0 {
		return observed.Ending{}, false
	}
	cfg := ls.p.cfg
	act := ls.s.Activity()
	switch {
	case act.Open > 0:
	case act.MainAnswered && idle >= cfg.DoneAfter:
		return observed.Ending{Status: delegation.StatusDone}, true
	case idle >= cfg.Quiet && act.MainFailed != "":
		return observed.Ending{Status: delegation.StatusFailed, Reason: "the main agent's last model call failed: " + act.MainFailed}, true
	case idle >= cfg.Quiet:
		return observed.Ending{Status: delegation.StatusInterrupted,
			Reason: "no request came for " + cfg.Quiet.String() + ": the program stopped before its main agent gave its answer"}, true
	}
	return observed.Ending{}, false
}

// Sweep ends the sessions whose time is up at now (liveSession.Due).
func (p *Proxy) Sweep(now time.Time) { p.sessions.Sweep(now) }

// Run sweeps now and then until ctx ends.
func (p *Proxy) Run(ctx context.Context) {
	p.sessions.Run(ctx, max(min(p.cfg.DoneAfter, p.cfg.Quiet)/4, 20*time.Millisecond))
}

// Close takes no more requests, waits for those in flight (their context
// ends when the server's does), and ends every open session, interrupted.
func (p *Proxy) Close() {
	p.sessions.Refuse()
	p.stop()
	p.wg.Wait()
	p.sessions.Close()
}

func byteSize(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
