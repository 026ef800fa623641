package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// Runner runs sessions and keeps them in the store: one goroutine per
// session, each cancellable.
type Runner struct {
	// DB is the store (db.DB, or any Store).
	DB     Store
	Pub    Publisher // may be nil
	Logger *slog.Logger
	// Endpoints are where openai scenarios' calls may go (ModelFor).
	Endpoints Endpoints
	// ModelFor chooses a scenario's model; nil means the package's ModelFor
	// with Endpoints.
	ModelFor func(*scenario.Scenario) (delegation.Model, error)
	// NewID makes session ids; nil means NewID. Tests set it to know an
	// id before the session starts.
	NewID func() string
	// Lease is how long this runner's hold on a running session lasts
	// without renewal (0: DefaultLease); it renews the holds at a third of
	// it. Another process ends the session as interrupted only once its
	// lease has run out (db.Recover).
	Lease time.Duration
	// MaxBatch caps the events one store transaction appends (0: 512).
	MaxBatch int
	// StoreRetry bounds how long the runner keeps trying to record the end
	// of a session whose store failed under it (0: a minute). Past it, the
	// session is left to recovery, once its lease runs out.
	StoreRetry time.Duration
	// MaxRunning caps the sessions running at once; 0 means no cap. Start
	// and Run past it fail with EUNAVAILABLE, saying so. Sessions Receive
	// holds are not counted: their producers have caps of their own.
	MaxRunning int
	// Ended, when set, is called with each session that has ended and been
	// recorded: one this runner ran or received (Receive), or one Recover
	// ended. It must not block for long.
	Ended func(id string)

	mu       sync.Mutex
	owner    string
	running  map[string]context.CancelCauseFunc // stops a session, saying why (a delegation.Stopped)
	views    map[string]*Live
	starting int // sessions past the cap check, not yet in running
	received int // sessions in running that Receive holds: not under MaxRunning
	// held counts the sessions not yet recorded to their end; idle are
	// closed when it falls to zero (Wait, Shutdown).
	held     int
	idle     []chan struct{}
	stopping bool          // Shutdown began: no session starts any more
	renewer  chan struct{} // closed to stop renewing; nil when not renewing
}

// ErrStopping is why Start, Run and Receive refuse a session once Shutdown
// has begun: the studio is stopping (code ESTOPPING: for now, not for good).
var ErrStopping error = &delegation.Error{Code: delegation.ESTOPPING,
	Message: "the studio is stopping: start this again once it is back"}

// DefaultLease is how long a runner's hold on a running session lasts
// without renewal: long enough that a busy machine never lets a live
// session's lease lapse, short enough that a crashed session is ended soon.
const DefaultLease = 30 * time.Second

// NewID returns a new random session id.
func NewID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Recover ends as interrupted the sessions left running by a process that
// is gone (their lease ran out); sessions another live process runs are
// left alone. Call it at start-up, and now and then while serving.
func (r *Runner) Recover(ctx context.Context) (int64, error) {
	ids, err := r.DB.Recover(ctx)
	if r.Ended != nil {
		for _, id := range ids {
			r.Ended(id)
		}
	}
	return int64(len(ids)), err
}

// Owner is this runner's name in the store's leases: a random id, made once.
func (r *Runner) Owner() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ownerLocked()
}

func (r *Runner) ownerLocked() string {
	if r.owner == "" {
		r.owner = NewID()
	}
	return r.owner
}

func (r *Runner) lease() time.Duration {
	if r.Lease > 0 {
		return r.Lease
	}
	return DefaultLease
}

// Start stores a new session and runs it in the background; it returns the
// session's id at once.
func (r *Runner) Start(ctx context.Context, sc *scenario.Scenario) (string, error) {
	id, run, err := r.prepare(ctx, sc)
	if err != nil {
		return "", err
	}
	go func() {
		if _, err := run(); err != nil {
			// The session ended; what went wrong is in the store only when
			// the store took it: say it here too.
			r.logger().Error("a session ended with an error", "session", id, "err", err)
		}
	}()
	return id, nil
}

// Run stores a new session and runs it to its end.
// Cancelling ctx stops the session, which ends as interrupted (the CLI's
// Ctrl-C); what the session stores is still written in full.
func (r *Runner) Run(ctx context.Context, sc *scenario.Scenario) (string, *delegation.Result, error) {
	id, run, err := r.prepare(ctx, sc)
	if err != nil {
		return "", nil, err
	}
	stop := context.AfterFunc(ctx, func() { r.stop(id, context.Cause(ctx)) })
	defer stop()
	res, err := run()
	return id, res, err
}

func (r *Runner) prepare(ctx context.Context, sc *scenario.Scenario) (string, func() (*delegation.Result, error), error) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return "", nil, ErrStopping
	}
	if r.MaxRunning > 0 && len(r.running)-r.received+r.starting >= r.MaxRunning {
		r.mu.Unlock()
		return "", nil, delegation.Errorf(delegation.EUNAVAILABLE,
			"%d sessions are running, the most this studio runs at once: wait for one to end, or stop one, then start this again", r.MaxRunning)
	}
	r.starting++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.starting--
		r.mu.Unlock()
	}()
	modelFor := r.ModelFor
	if modelFor == nil {
		modelFor = func(sc *scenario.Scenario) (delegation.Model, error) { return ModelWith(sc, r.Endpoints, r.logger()) }
	}
	model, err := modelFor(sc)
	if err != nil {
		return "", nil, err
	}
	newID := r.NewID
	if newID == nil {
		newID = NewID
	}
	id := newID()
	if err := r.DB.CreateSession(ctx, &db.Session{ID: id, Name: sc.File.Name, Title: sc.File.Title,
		Prompt: sc.File.Prompt, Tokenizer: sc.Tokenizer(), Scenario: sc.Raw,
		Owner: r.Owner(), LeaseUntil: r.DB.Now().Add(r.lease())}); err != nil {
		return "", nil, err
	}
	log := r.logger()
	// The session outlives the request that started it; Cancel and
	// Shutdown stop it.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	live := NewLive(view.Meta{ID: id, Name: sc.File.Name, Title: sc.File.Title, Prompt: sc.File.Prompt,
		Tokenizer: sc.Tokenizer(), Budget: sc.Team.Main.Summarization.MaxTokens})
	r.mu.Lock()
	if r.running == nil {
		r.running, r.views = map[string]context.CancelCauseFunc{}, map[string]*Live{}
	}
	r.running[id] = cancel
	r.views[id] = live
	r.holdLocked()
	if r.stopping {
		// Shutdown began while the session was being stored: it ends at
		// once, interrupted, and is recorded so.
		cancel(delegation.Stopped{By: delegation.StopShutdown})
	}
	r.startRenewingLocked()
	r.mu.Unlock()

	run := func() (*delegation.Result, error) {
		defer r.release()
		defer func() {
			// The recorder stored the page state as the session ended:
			// pages read it from the store from now on.
			r.mu.Lock()
			delete(r.running, id)
			delete(r.views, id)
			if len(r.running) == 0 {
				r.stopRenewingLocked()
			}
			r.mu.Unlock()
			cancel(nil)
		}()
		rec := newRecorder(r.DB, id, live, r.Pub, log, func(err error) {
			if errors.Is(err, db.ErrSessionEnded) {
				cancel(ErrLeaseLost)
				return
			}
			cancel(fmt.Errorf("the store failed: %w", err))
		}, r.MaxBatch)
		res, err := Run(runCtx, sc, RunOptions{SessionID: id, Sink: rec, Model: model, Now: r.DB.Now, Logger: log})
		if cerr := rec.Close(); errors.Is(cerr, db.ErrSessionEnded) {
			// Another process ended it: there is no end of ours to record.
			if err == nil {
				err = ErrLeaseLost
			}
		} else if cerr != nil {
			if err == nil {
				err = fmt.Errorf("session %s was not fully recorded: %w", id, cerr)
			}
			r.recordFailure(id, cerr, log)
		}
		if r.Ended != nil {
			r.Ended(id)
		}
		return res, err
	}
	return id, run, nil
}

// recordFailure ends, as failed, a session whose store failed under it. A
// full disk takes it at once (the store keeps room for it); when the end
// cannot be recorded (the lock is held) it is tried again, with growing
// pauses, until the store takes it or StoreRetry has passed; then recovery
// ends it once its lease runs out.
func (r *Runner) recordFailure(id string, cause error, log *slog.Logger) {
	limit := r.StoreRetry
	if limit <= 0 {
		limit = time.Minute
	}
	reason := "the store failed, so the session could not go on: " + cause.Error()
	code := delegation.ErrorCode(cause)
	if code != delegation.EFULL {
		code = "" // only a full disk has words of its own on the pages
	}
	deadline := time.Now().Add(limit)
	pause := 50 * time.Millisecond
	for {
		_, err := r.DB.FinishOpen(context.Background(), id, delegation.StatusFailed, code, reason)
		if err == nil {
			return
		}
		if time.Now().Add(pause).After(deadline) {
			log.Error("could not record the end of a session whose store failed; recovery will end it once its lease runs out",
				"session", id, "err", err)
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 2*time.Second)
	}
}

// startRenewingLocked starts renewing the leases of this runner's sessions,
// unless it already does.
func (r *Runner) startRenewingLocked() {
	if r.renewer != nil {
		return
	}
	stop := make(chan struct{})
	r.renewer = stop
	owner, lease, log := r.ownerLocked(), r.lease(), r.logger()
	go func() {
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if err := r.DB.RenewLeases(context.Background(), owner, r.DB.Now().Add(lease)); err != nil {
					log.Warn("could not renew the leases of running sessions; will try again", "err", err)
				}
			}
		}
	}()
}

func (r *Runner) stopRenewingLocked() {
	if r.renewer != nil {
		close(r.renewer)
		r.renewer = nil
	}
}

// ErrLeaseLost is why a session stopped whose lease lapsed while it ran
// (its process was suspended or starved past it), so that another process
// took it over and ended it as interrupted: the session's result says so
// (errors.Is), and nothing it did after that end was recorded.
var ErrLeaseLost = errors.New("this process's lease on the session lapsed and another process ended it")

// Cancel stops a running session, as someone's Stop in the studio; it
// reports whether it was running.
func (r *Runner) Cancel(id string) bool {
	return r.stop(id, delegation.Stopped{By: delegation.StopUser})
}

// stop stops a running session with a cause that says why.
func (r *Runner) stop(id string, cause error) bool {
	r.mu.Lock()
	cancel, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		cancel(cause)
	}
	return ok
}

// Receive stores a new session whose events another producer makes (a
// received OTLP trace; the recording endpoint) and holds it as this
// runner's own, as Start does for the engine's: its lease is renewed,
// Running reports it, and Shutdown calls stop and waits for it. Events go to
// the returned recorder; done stores the last of them and ends the hold.
// stop must not block: it is called with the runner's lock held.
func (r *Runner) Receive(ctx context.Context, s *db.Session, stop func()) (rec *Recorder, done func() error, err error) {
	if s.ID == "" {
		newID := r.NewID
		if newID == nil {
			newID = NewID
		}
		s.ID = newID()
	}
	if r.isStopping() {
		return nil, nil, ErrStopping
	}
	s.Owner, s.LeaseUntil = r.Owner(), r.DB.Now().Add(r.lease())
	if err := r.DB.CreateSession(ctx, s); err != nil {
		return nil, nil, err
	}
	log := r.logger()
	live := NewLive(view.Meta{ID: s.ID, Name: s.Name, Title: s.Title, Prompt: s.Prompt, Tokenizer: s.Tokenizer})
	r.mu.Lock()
	if r.running == nil {
		r.running, r.views = map[string]context.CancelCauseFunc{}, map[string]*Live{}
	}
	r.running[s.ID] = func(error) { stop() }
	r.views[s.ID] = live
	r.received++
	r.holdLocked()
	if r.stopping {
		stop() // Shutdown began while the session was being stored
	}
	r.startRenewingLocked()
	r.mu.Unlock()
	rec = newRecorder(r.DB, s.ID, live, r.Pub, log, func(error) { stop() }, r.MaxBatch)
	var once sync.Once
	done = func() error {
		var cerr error
		once.Do(func() {
			defer r.release()
			cerr = rec.Close()
			r.mu.Lock()
			delete(r.running, s.ID)
			delete(r.views, s.ID)
			r.received--
			if len(r.running) == 0 {
				r.stopRenewingLocked()
			}
			r.mu.Unlock()
			if cerr != nil {
				r.recordFailure(s.ID, cerr, log)
			}
			if r.Ended != nil {
				r.Ended(s.ID)
			}
		})
		return cerr
	}
	return rec, done, nil
}

// Live is the page state of a session running in this process, or nil.
func (r *Runner) Live(id string) *Live {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.views[id]
}

// Running reports whether a session runs in this process.
func (r *Runner) Running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[id]
	return ok
}

// Shutdown stops every running session, as the studio is stopping, and
// waits for them to be recorded, until ctx ends: then it returns an error
// saying how many were not yet. From its start, Start, Run and Receive
// refuse new sessions with ErrStopping.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	r.stopping = true
	for _, cancel := range r.running {
		cancel(delegation.Stopped{By: delegation.StopShutdown})
	}
	r.mu.Unlock()
	select {
	case <-r.idleCh():
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		n := r.held
		r.mu.Unlock()
		return fmt.Errorf("%d sessions were still being recorded when the wait ended (recovery ends them once their lease runs out): %w", n, context.Cause(ctx))
	}
}

// Wait waits for the sessions this runner holds (Start, Run, Receive) to
// be recorded to their end.
func (r *Runner) Wait() { <-r.idleCh() }

func (r *Runner) isStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// holdLocked counts a session until release: Wait and Shutdown wait for it.
func (r *Runner) holdLocked() { r.held++ }

func (r *Runner) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held--
	if r.held == 0 {
		for _, ch := range r.idle {
			close(ch)
		}
		r.idle = nil
	}
}

// idleCh is closed once no session is held.
func (r *Runner) idleCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	if r.held == 0 {
		close(ch)
	} else {
		r.idle = append(r.idle, ch)
	}
	return ch
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Import checks a trace document whole and stores it as a new session; it
// returns the new id. Nothing is written when anything is wrong.
func (r *Runner) Import(ctx context.Context, raw []byte) (string, error) {
	t, _, err := trace.ParseContext(ctx, raw)
	if err != nil {
		return "", err
	}
	id := NewID()
	if err := r.DB.Import(ctx, id, t); err != nil {
		return "", err
	}
	// Its page state, folded once now rather than at each page.
	st, rd, err := r.View(ctx, id)
	if err != nil {
		return "", err
	}
	_ = st
	rd.Close()
	return id, nil
}
