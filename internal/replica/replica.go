// Package replica follows, for one studio's viewers, the sessions other
// studios sharing its PostgreSQL store run (docs/postgres.md).
//
// Each studio runs its own sessions, and each of its viewers may watch a
// session any of them runs. A session's viewers on the replica that runs it
// get its batches from its recorder; on another replica, from here: told by
// the store that the session's log grew (its notification, db.DB.Listen),
// the replica reads what followed from the store, folds it into the
// session's page state, which it keeps while the session has viewers here,
// and publishes it as the recorder would. A viewer's stream deduplicates by
// seq and reads its backlog over any gap, so it misses nothing whichever
// replica it is connected to.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// Store is a store that other replicas write to: it says when a session's
// log grew, passes on a stop to the replica running the session, and reads
// a session's log a page at a time.
type Store interface {
	Listen(ctx context.Context, l db.Listener) error
	RequestStop(ctx context.Context, id string) error
	EventsPage(ctx context.Context, sessionID string, after int64, limit int) ([]db.LoggedEvent, error)
}

// Runner is this replica's session runner: the sessions it runs are its
// recorder's to publish, and a stop asked elsewhere for one of them
// reaches it here.
type Runner interface {
	Cancel(id string) bool
	Running(id string) bool
	View(ctx context.Context, id string) (*view.State, db.PageReader, error)
}

// Viewers are this replica's live viewers of a session: how many there
// are, and how a followed session's stored events reach them.
type Viewers interface {
	// Watching counts a session's viewers here.
	Watching(id string) int
	// Stored tells the viewers of a session the store holds it through
	// seq: one that subscribed before its state was read reads what it
	// lacks.
	Stored(id string, seq int64)
	// PublishStored publishes a batch read back from the store.
	PublishStored(id string, events []db.LoggedEvent, ch view.Changes, v *session.Live)
}

// Config is what a Follower is built from.
type Config struct {
	Store   Store
	Runner  Runner
	Viewers Viewers
	Logger  *slog.Logger
}

// Follower follows, for this replica's viewers, the sessions other
// replicas run.
type Follower struct {
	cfg    Config
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup // the listener and the catch-ups under way
	mu     sync.Mutex
	// followed holds the sessions with viewers here that run elsewhere.
	followed map[string]*followed
}

// followed is one session run elsewhere: its page state here, and whether
// a catch-up is under way (busy) or wanted after it (again).
type followed struct {
	live        *session.Live
	busy, again bool
}

// New builds a follower; Start starts following.
func New(cfg Config) *Follower {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Follower{cfg: cfg, log: log, followed: map[string]*followed{}}
}

// Start listens for other replicas' sessions until Shutdown. A follower
// starts once.
func (r *Follower) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("replica: the follower was started already")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Go(func() { r.listen(ctx) })
	return nil
}

// Shutdown stops listening and waits, until ctx ends, for the catch-ups
// under way; it returns ctx's error when it stopped waiting.
func (r *Follower) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RequestStop asks the replica that runs a session to stop it.
func (r *Follower) RequestStop(ctx context.Context, id string) error {
	return r.cfg.Store.RequestStop(ctx, id)
}

// Followed counts the sessions whose state this replica keeps.
func (r *Follower) Followed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.followed)
}

// listen follows other replicas' sessions until ctx ends.
func (r *Follower) listen(ctx context.Context) {
	err := r.cfg.Store.Listen(ctx, db.Listener{Grown: r.grown, Reconnected: r.reconnected,
		Stop: func(id string) { r.cfg.Runner.Cancel(id) }})
	if err != nil && ctx.Err() == nil {
		r.log.Error("listen for other replicas' sessions", "err", err)
	}
}

// grown: a session's log grew to seq, here or on another replica.
func (r *Follower) grown(id string, _ int64) {
	if r.cfg.Viewers.Watching(id) == 0 || r.cfg.Runner.Running(id) {
		// Nobody watches it here (any more), or its recorder publishes it:
		// its state here, if any, goes (a catch-up under way sees that
		// too, and ends).
		r.mu.Lock()
		if f := r.followed[id]; f != nil && !f.busy {
			delete(r.followed, id)
		}
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	f := r.followed[id]
	if f == nil {
		f = &followed{}
		r.followed[id] = f
	}
	if f.busy {
		f.again = true
		r.mu.Unlock()
		return
	}
	f.busy = true
	r.mu.Unlock()
	r.wg.Go(func() { r.catchUp(id, f) })
}

// reconnected: notifications may have been missed; every followed session
// reads what it has not.
func (r *Follower) reconnected() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.followed))
	for id := range r.followed {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		r.grown(id, 0)
	}
}

// catchUpPage is how many events a catch-up reads and publishes at once.
const catchUpPage = 512

// catchUp reads a followed session's new events from the store, folds
// them and publishes them, until it has read all there is and no newer
// notification came meanwhile.
func (r *Follower) catchUp(id string, f *followed) {
	ctx := context.Background()
	for {
		done := r.read(ctx, id, f)
		r.mu.Lock()
		if done || r.cfg.Viewers.Watching(id) == 0 {
			delete(r.followed, id)
			r.mu.Unlock()
			return
		}
		if !f.again {
			f.busy = false
			r.mu.Unlock()
			return
		}
		f.again = false
		r.mu.Unlock()
	}
}

// read publishes what the store holds of a session after its state here;
// it reports whether the session is over (or unreadable), so that its
// state need not be kept.
func (r *Follower) read(ctx context.Context, id string, f *followed) bool {
	if f.live == nil {
		st, rd, err := r.cfg.Runner.View(ctx, id)
		if err != nil {
			r.log.Error("follow a session another replica runs", "session", id, "err", err)
			return true
		}
		rd.Close()
		f.live = session.LiveOf(st)
		r.cfg.Viewers.Stored(id, st.Seq)
	}
	for {
		events, err := r.cfg.Store.EventsPage(ctx, id, f.live.Seq(), catchUpPage)
		if err != nil {
			r.log.Error("follow a session another replica runs", "session", id, "err", err)
			return true
		}
		if len(events) > 0 {
			steps := make([]trace.Step, len(events))
			for i := range events {
				steps[i] = events[i].Step
			}
			ch, err := f.live.ApplySteps(steps)
			if err != nil {
				r.log.Error("page state", "session", id, "err", err)
			}
			r.cfg.Viewers.PublishStored(id, events, ch, f.live)
		}
		if len(events) < catchUpPage {
			break
		}
	}
	ended := false
	f.live.Read(func(st *view.State) { ended = st.Session.Status != delegation.StatusRunning })
	return ended
}
