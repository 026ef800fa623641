package server

import (
	"context"
	"sync"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// Several studios may share one PostgreSQL store (docs/postgres.md): each
// runs its own sessions, and each of its viewers may watch a session any of
// them runs. A session's viewers on the replica that runs it get its
// batches from its recorder; on another replica, from here: told by the
// store that the session's log grew (its notification, db.DB.Listen), the
// replica reads what followed from the store, folds it into the session's
// page state, which it keeps while the session has viewers here, and
// publishes it as the recorder would. A viewer's stream deduplicates by
// seq and reads its backlog over any gap, so it misses nothing whichever
// replica it is connected to.

// notifier is a store that other replicas write to: it says when a
// session's log grew, passes on a stop to the replica running the session,
// and keeps the key the replicas' forms are signed with.
type notifier interface {
	Postgres() bool
	Listen(ctx context.Context, l db.Listener) error
	RequestStop(ctx context.Context, id string) error
	SharedKey(ctx context.Context, name string) ([]byte, error)
}

// replicas follows, for this replica's viewers, the sessions other replicas
// run.
type replicas struct {
	s  *Server
	n  notifier
	wg sync.WaitGroup // the listener and the catch-ups under way
	mu sync.Mutex
	// followed holds the sessions with viewers here that run elsewhere.
	followed map[string]*followed
}

// followed is one session run elsewhere: its page state here, and whether
// a catch-up is under way (busy) or wanted after it (again).
type followed struct {
	live        *session.Live
	busy, again bool
}

// listen follows other replicas' sessions until ctx ends.
func (r *replicas) listen(ctx context.Context) {
	err := r.n.Listen(ctx, db.Listener{Grown: r.grown, Reconnected: r.reconnected,
		Stop: func(id string) { r.s.runner.Cancel(id) }})
	if err != nil && ctx.Err() == nil {
		r.s.log.Error("listen for other replicas' sessions", "err", err)
	}
}

// grown: a session's log grew to seq, here or on another replica.
func (r *replicas) grown(id string, _ int64) {
	if liveViewers(r.s.hub, id) == 0 || r.s.runner.Running(id) {
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
func (r *replicas) reconnected() {
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
func (r *replicas) catchUp(id string, f *followed) {
	ctx := context.Background()
	for {
		done := r.read(ctx, id, f)
		r.mu.Lock()
		if done || liveViewers(r.s.hub, id) == 0 {
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
func (r *replicas) read(ctx context.Context, id string, f *followed) bool {
	if f.live == nil {
		st, rd, err := r.s.runner.View(ctx, id)
		if err != nil {
			r.s.log.Error("follow a session another replica runs", "session", id, "err", err)
			return true
		}
		rd.Close()
		f.live = session.LiveOf(st)
		// A viewer that subscribed before this state was read is told
		// the store has it through here: it reads what it lacks.
		for _, t := range liveTopics(id) {
			r.s.hub.Stored(t, st.Seq)
		}
	}
	for {
		events, err := r.s.cfg.DB.EventsPage(ctx, id, f.live.Seq(), catchUpPage)
		if err != nil {
			r.s.log.Error("follow a session another replica runs", "session", id, "err", err)
			return true
		}
		if len(events) > 0 {
			steps := make([]trace.Step, len(events))
			for i := range events {
				steps[i] = events[i].Step
			}
			ch, err := f.live.ApplySteps(steps)
			if err != nil {
				r.s.log.Error("page state", "session", id, "err", err)
			}
			r.s.views.PublishStored(id, events, ch, f.live)
		}
		if len(events) < catchUpPage {
			break
		}
	}
	ended := false
	f.live.Read(func(st *view.State) { ended = st.Session.Status != delegation.StatusRunning })
	return ended
}

// running reports whether a session whose state says status runs: here,
// or, sharing the store with other replicas, on one whose lease on it
// holds. Its page is live then, and may be stopped.
func (s *Server) running(ctx context.Context, id, status string) bool {
	if status != delegation.StatusRunning {
		return false
	}
	if s.runner.Running(id) {
		return true
	}
	if s.replicas == nil {
		return false // left running by a process that stopped
	}
	row, err := s.cfg.DB.Session(ctx, id)
	return err == nil && row.Status == delegation.StatusRunning && !row.Lapsed(s.cfg.DB.Now())
}
