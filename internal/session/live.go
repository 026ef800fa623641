package session

import (
	"context"
	"sync"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// Live is a running session's page state: the one fold of its log
// (internal/view), which its recorder advances after each stored batch and
// from which its pages and live patches are drawn. The store, the live path
// and the pages share it; none keeps an idea of the page of its own.
type Live struct {
	mu sync.RWMutex
	st *view.State
	// moved is closed and replaced whenever the state advances.
	moved chan struct{}
}

// NewLive starts the page state of a session.
func NewLive(meta view.Meta) *Live {
	return &Live{st: view.New(meta), moved: make(chan struct{})}
}

// LiveOf keeps a state folded elsewhere (a session another replica runs,
// followed from the store: Follow).
func LiveOf(st *view.State) *Live { return &Live{st: st, moved: make(chan struct{})} }

// Read calls fn with the state, which must not be kept or changed.
func (l *Live) Read(fn func(*view.State)) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	fn(l.st)
}

// Clone copies the state as it is now.
func (l *Live) Clone() *view.State {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.Clone()
}

// Seq is the last seq folded in.
func (l *Live) Seq() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.st.Seq
}

// Wait waits until the state has folded seq in, or ctx ends.
func (l *Live) Wait(ctx context.Context, seq int64) error {
	for {
		l.mu.RLock()
		at, moved := l.st.Seq, l.moved
		l.mu.RUnlock()
		if at >= seq {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// apply folds events in and says what they changed.
func (l *Live) apply(events []delegation.Event) (view.Changes, error) {
	return l.advance(len(events), func(i int, ch *view.Changes) error { return l.st.ApplyTo(events[i], ch) })
}

// ApplySteps folds in steps read back from the store, as a session another
// replica runs is followed, and says what they changed.
func (l *Live) ApplySteps(steps []trace.Step) (view.Changes, error) {
	return l.advance(len(steps), func(i int, ch *view.Changes) error { return l.st.ApplyStep(steps[i], ch) })
}

// advance folds n things in, one by one, and wakes whoever waits.
func (l *Live) advance(n int, one func(int, *view.Changes) error) (view.Changes, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var all view.Changes
	var firstErr error
	for i := range n {
		if err := one(i, &all); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	close(l.moved)
	l.moved = make(chan struct{})
	return all, firstErr
}

// snapshot encodes the state for the store.
func (l *Live) snapshot() ([]byte, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	b, err := l.st.MarshalJSON()
	return b, l.st.Seq, err
}
