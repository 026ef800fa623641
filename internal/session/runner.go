package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/trace"
)

// Runner runs sessions and keeps them in the store: one goroutine per
// session, each cancellable.
type Runner struct {
	DB     *db.DB
	Pub    Publisher // may be nil
	Logger *slog.Logger
	// ModelFor chooses a scenario's model; nil means the package's ModelFor.
	ModelFor func(*scenario.Scenario) (delegation.Model, error)
	// NewID makes session ids; nil means NewID. Tests set it to know an
	// id before the session starts.
	NewID func() string

	mu      sync.Mutex
	running map[string]context.CancelFunc
	wg      sync.WaitGroup
}

// NewID returns a new random session id.
func NewID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Recover marks the sessions a crash left running as interrupted; call it
// once at start-up, before starting sessions.
func (r *Runner) Recover(ctx context.Context) (int64, error) {
	return r.DB.MarkInterrupted(ctx)
}

// Start stores a new session and runs it in the background; it returns the
// session's id at once.
func (r *Runner) Start(ctx context.Context, sc *scenario.Scenario) (string, error) {
	id, run, err := r.prepare(ctx, sc)
	if err != nil {
		return "", err
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_, _ = run()
	}()
	return id, nil
}

// Run stores a new session and runs it to its end.
func (r *Runner) Run(ctx context.Context, sc *scenario.Scenario) (string, *delegation.Result, error) {
	id, run, err := r.prepare(ctx, sc)
	if err != nil {
		return "", nil, err
	}
	res, err := run()
	return id, res, err
}

func (r *Runner) prepare(ctx context.Context, sc *scenario.Scenario) (string, func() (*delegation.Result, error), error) {
	modelFor := r.ModelFor
	if modelFor == nil {
		modelFor = ModelFor
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
		Prompt: sc.File.Prompt, Tokenizer: sc.Tokenizer(), Scenario: sc.Raw}); err != nil {
		return "", nil, err
	}
	log := r.logger()
	// The session outlives the request that started it; Cancel and
	// Shutdown stop it.
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]context.CancelFunc{}
	}
	r.running[id] = func() { cancel(errCancelled) }
	r.mu.Unlock()

	run := func() (*delegation.Result, error) {
		defer func() {
			r.mu.Lock()
			delete(r.running, id)
			r.mu.Unlock()
			cancel(nil)
		}()
		rec := NewRecorder(r.DB, id, r.Pub, log, func(err error) { cancel(fmt.Errorf("the store failed: %w", err)) })
		res, err := Run(runCtx, sc, RunOptions{SessionID: id, Sink: rec, Model: model, Now: r.DB.Now, Logger: log})
		if cerr := rec.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("session %s was not fully recorded: %w", id, cerr)
		}
		return res, err
	}
	return id, run, nil
}

var errCancelled = errors.New("the session was stopped")

// Cancel stops a running session; it reports whether it was running.
func (r *Runner) Cancel(id string) bool {
	r.mu.Lock()
	cancel, ok := r.running[id]
	r.mu.Unlock()
	if ok {
		cancel()
	}
	return ok
}

// Running reports whether a session runs in this process.
func (r *Runner) Running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[id]
	return ok
}

// Shutdown stops every running session and waits for them to be recorded.
func (r *Runner) Shutdown() {
	r.mu.Lock()
	for _, cancel := range r.running {
		cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// Wait waits for the sessions started with Start to end.
func (r *Runner) Wait() { r.wg.Wait() }

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

// Import checks a trace document whole and stores it as a new session; it
// returns the new id. Nothing is written when anything is wrong.
func (r *Runner) Import(ctx context.Context, raw []byte) (string, error) {
	t, pos, err := trace.Parse(raw)
	if err != nil {
		return "", err
	}
	id := NewID()
	if err := r.DB.Import(ctx, id, t, pos); err != nil {
		return "", err
	}
	return id, nil
}
