// Package observed is the lifecycle of the sessions the studio observes
// rather than runs: the OTLP traces it receives (Receiver) and the model
// calls its recording endpoint records (internal/proxy). Either way a
// session is opened through a Store (the runner's recorder), fed as what it
// observes arrives, and ended once: when what it observed says so (a root
// span, a main agent's answer), when its time is up (swept: nothing came
// for a while), when someone stops it in the studio, to make room, or when
// the studio stops. A Set holds the open ones and does all of it but
// deciding when a session's time is up and recording how it ended, which
// the session's Observed does.
package observed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
)

// Recording is a session being recorded.
type Recording struct {
	ID   string
	Sink delegation.Sink
	// Done is called once the session has ended, after its last event.
	Done func() error
}

// Store opens the sessions a set records.
type Store interface {
	// Open creates a session, recorded as it goes; stop is called when
	// someone stops it in the studio.
	Open(ctx context.Context, name string, origin *delegation.Origin, stop func()) (Recording, error)
}

// Ending is how a session ends: a status ("" lets what was observed
// decide, as a trace's root span does) and why: a reason, and when it was
// stopped from outside, a delegation.Stop* code the edge words (the reason
// stays, for what reads the text).
type Ending struct{ Status, Reason, StoppedBy string }

// Observed is what a session records into, kept by the set's user.
type Observed interface {
	// Due reports, at now, whether the session's time is up and how it
	// ends; idle is how long nothing came. It is called with the session's
	// lock held, as Feed's function is.
	Due(now time.Time, idle time.Duration) (Ending, bool)
	// Close records how the session ended: its last events. It is called
	// once, with the session's lock held.
	Close(Ending)
}

// ErrClosed is what a closed set answers.
var ErrClosed = errors.New("the studio is stopping")

// Config is what a set needs.
type Config struct {
	Store  Store
	Now    func() time.Time
	Logger *slog.Logger
	// Max caps the sessions open at once (0: no cap): past it, the one
	// from which nothing came for longest ends to make room, as Full says
	// (given its key and session id, the cap and how long it was quiet).
	Max  int
	Full func(key, id string, open int, quiet time.Duration) Ending
	// Stopped is how a session someone stops in the studio ends; Closed,
	// how Close ends those still open.
	Stopped, Closed Ending
}

// Set holds the open sessions. Its lock is taken after a session's, never
// before (Do's function takes none).
type Set[T Observed] struct {
	cfg Config

	mu     sync.Mutex
	open   []*Session[T]          // oldest first
	byKey  map[string]*Session[T] // the open ones with a key
	closed bool
	wg     sync.WaitGroup // the sessions ended to make room
}

// Session is one observed session.
type Session[T Observed] struct {
	ID  string
	Key string // what it is found by (Locked.Find); "" for none
	// Obs is what it records into, set once by Locked.Open.
	Obs T

	set  *Set[T]
	done func() error
	mu   sync.Mutex // held while it is fed and while it ends
	// last (unix nanoseconds: when something last came) and ended are
	// atomic so that the set reads them under its own lock only.
	last  atomic.Int64
	ended atomic.Bool
}

// NewSet makes a set.
func NewSet[T Observed](cfg Config) *Set[T] {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Set[T]{cfg: cfg, byKey: map[string]*Session[T]{}}
}

// Locked is the set while Do holds its lock.
type Locked[T Observed] struct {
	set *Set[T]
	ctx context.Context
}

// Do calls f with the set's lock held (ctx is what Locked.Open opens
// with): what chooses among the open
// sessions and starts something on one runs there, so that none opens or
// leaves the set in between. A closed set answers ErrClosed.
func (t *Set[T]) Do(ctx context.Context, f func(Locked[T]) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	return f(Locked[T]{t, ctx})
}

// All is the open sessions, oldest first; an ended one may still be
// among them for a moment (Ended says so).
func (l Locked[T]) All() []*Session[T] { return l.set.open }

// Find is the open session of a key, or nil.
func (l Locked[T]) Find(key string) *Session[T] {
	if s := l.set.byKey[key]; s != nil && !s.ended.Load() {
		return s
	}
	return nil
}

// Open opens a session under a key ("": none), making room first when the
// set is full; obs makes what it records into from its recording.
func (l Locked[T]) Open(key, name string, origin *delegation.Origin, obs func(Recording) T) (*Session[T], error) {
	t := l.set
	t.makeRoomLocked()
	s := &Session[T]{Key: key, set: t}
	s.Touch(t.cfg.Now())
	stop := func() { go s.End(t.cfg.Stopped) }
	rec, err := t.cfg.Store.Open(l.ctx, name, origin, stop)
	if err != nil {
		return nil, err
	}
	s.ID, s.done = rec.ID, rec.Done
	s.Obs = obs(rec)
	t.open = append(t.open, s)
	if key != "" {
		t.byKey[key] = s
	}
	return s, nil
}

// makeRoomLocked keeps a new session within the cap: when Max are open,
// the one from which nothing came for longest leaves the set at once and
// ends on a goroutine of its own (ending takes its lock, which is never
// taken under the set's).
func (t *Set[T]) makeRoomLocked() {
	for t.cfg.Max > 0 && len(t.open) >= t.cfg.Max {
		oldest := t.open[0]
		for _, s := range t.open {
			if s.last.Load() < oldest.last.Load() {
				oldest = s
			}
		}
		t.removeLocked(oldest)
		e := t.cfg.Full(oldest.Key, oldest.ID, t.cfg.Max, t.cfg.Now().Sub(oldest.Last()).Round(time.Second))
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			oldest.End(e)
		}()
	}
}

func (t *Set[T]) removeLocked(s *Session[T]) {
	for i, x := range t.open {
		if x == s {
			t.open = append(t.open[:i], t.open[i+1:]...)
			break
		}
	}
	if s.Key != "" && t.byKey[s.Key] == s {
		delete(t.byKey, s.Key)
	}
}

// Touch says something came at now.
func (s *Session[T]) Touch(now time.Time) { s.last.Store(now.UnixNano()) }

// Last is when something last came.
func (s *Session[T]) Last() time.Time { return time.Unix(0, s.last.Load()) }

// Ended reports whether the session has ended.
func (s *Session[T]) Ended() bool { return s.ended.Load() }

// Feed calls f with the session's lock held, unless it has ended (false),
// and says something came at now. When f gives an ending, the session ends
// so, under the same lock.
func (s *Session[T]) Feed(now time.Time, f func(T) *Ending) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended.Load() {
		return false
	}
	s.Touch(now)
	if e := f(s.Obs); e != nil {
		s.endLocked(*e)
	}
	return true
}

// End ends the session, unless it has ended already.
func (s *Session[T]) End(e Ending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked(e)
}

func (s *Session[T]) endLocked(e Ending) {
	if s.ended.Load() {
		return
	}
	s.ended.Store(true)
	t := s.set
	t.mu.Lock()
	t.removeLocked(s)
	t.mu.Unlock()
	s.Obs.Close(e)
	if err := s.done(); err != nil {
		t.cfg.Logger.Error("recording an observed session", "key", s.Key, "session", s.ID, "err", err)
	}
}

// snapshot is the open sessions now.
func (t *Set[T]) snapshot() []*Session[T] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Session[T](nil), t.open...)
}

// Sweep ends the sessions whose time is up at now, as their Due says.
func (t *Set[T]) Sweep(now time.Time) {
	for _, s := range t.snapshot() {
		s.mu.Lock()
		if !s.ended.Load() {
			if e, due := s.Obs.Due(now, now.Sub(s.Last())); due {
				s.endLocked(e)
			}
		}
		s.mu.Unlock()
	}
}

// Run sweeps every so often until ctx ends.
func (t *Set[T]) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Sweep(t.cfg.Now())
		}
	}
}

// Refuse has the set open no more: Do answers ErrClosed.
func (t *Set[T]) Refuse() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// Close opens no more and ends every open session as Config.Closed says,
// then waits for those ended to make room.
func (t *Set[T]) Close() {
	t.Refuse()
	for _, s := range t.snapshot() {
		s.End(t.cfg.Closed)
	}
	t.wg.Wait()
}
