package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
)

// Publisher receives a session's events once they are stored and folded
// into its page state (live-only events at once, one by one), with what
// they changed of it, to fan them out to viewers. The server implements it.
type Publisher interface {
	Publish(sessionID string, events []delegation.Event, changes view.Changes, v *Live)
}

// BatchObserver is told how long each batch took to store; a Publisher
// that implements it gets told (the server's metrics).
type BatchObserver interface {
	ObserveBatch(events int, took time.Duration, err error)
}

// defaultMaxBatch caps the events one transaction appends.
const defaultMaxBatch = 512

// Recorder is the Sink of a running session: it appends events to the store
// in batches, one transaction each, folds each batch into the session's page
// state once it is committed, and publishes it (batches committed within
// publishEvery of the last publish together), so a viewer that reconnects
// and reads the store misses nothing. When the session ends it stores the
// page state beside the log. Emit never waits for the database, only for
// room in the queue.
type Recorder struct {
	db        Store
	sessionID string
	pub       Publisher
	view      *Live
	log       *slog.Logger
	onFailure func(error)
	maxBatch  int           // events a batch holds at most
	every     time.Duration // the least time between two publishes (publishEvery)

	queue chan delegation.Event
	done  chan struct{}

	mu  sync.Mutex
	err error
}

// NewRecorder starts recording a session into its page state v (nil: a
// state of its own). onFailure, when set, is called once if the store fails,
// so the run can stop rather than go on unrecorded.
func NewRecorder(store Store, sessionID string, v *Live, pub Publisher, log *slog.Logger, onFailure func(error)) *Recorder {
	return newRecorder(store, sessionID, v, pub, log, onFailure, 0)
}

// newRecorder is NewRecorder with a cap on batches (0: defaultMaxBatch).
func newRecorder(store Store, sessionID string, v *Live, pub Publisher, log *slog.Logger, onFailure func(error), maxBatch int) *Recorder {
	return newRecorderEvery(store, sessionID, v, pub, log, onFailure, maxBatch, publishEvery)
}

// newRecorderEvery is newRecorder publishing at most once an interval.
func newRecorderEvery(store Store, sessionID string, v *Live, pub Publisher, log *slog.Logger, onFailure func(error), maxBatch int,
	every time.Duration) *Recorder {
	if maxBatch <= 0 {
		maxBatch = defaultMaxBatch
	}
	if v == nil {
		v = NewLive(view.Meta{ID: sessionID})
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{db: store, sessionID: sessionID, view: v, pub: pub, log: log, onFailure: onFailure, maxBatch: maxBatch, every: every,
		queue: make(chan delegation.Event, 4*defaultMaxBatch), done: make(chan struct{})}
	go r.loop()
	return r
}

// SessionID is the session the recorder records.
func (r *Recorder) SessionID() string { return r.sessionID }

// Emit queues an event. Live-only events (seq 0) are published at once and
// never stored.
func (r *Recorder) Emit(ev delegation.Event) {
	if ev.Seq == 0 {
		// Streamed text: the running call shows it, on a reload too.
		ch, _ := r.view.apply([]delegation.Event{ev})
		if r.pub != nil {
			r.pub.Publish(r.sessionID, []delegation.Event{ev}, ch, r.view)
		}
		return
	}
	r.queue <- ev
}

// Close waits until every queued event is stored; it returns the store's
// first error, if any.
func (r *Recorder) Close() error {
	close(r.queue)
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) loop() {
	defer close(r.done)
	maxBatch := r.maxBatch
	batch := make([]delegation.Event, 0, maxBatch)
	var held heldBatches
	tick := time.NewTimer(time.Hour)
	tick.Stop()
	defer tick.Stop()
	for {
		var ev delegation.Event
		var ok bool
		if len(held.events) > 0 {
			select {
			case ev, ok = <-r.queue:
			case <-tick.C:
				r.publish(&held)
				continue
			}
		} else {
			ev, ok = <-r.queue
		}
		if !ok {
			r.publish(&held)
			return
		}
		batch = append(batch[:0], ev)
		// Take whatever else is waiting: under load batches grow, and an
		// idle session still writes each event at once.
	drain:
		for len(batch) < maxBatch {
			select {
			case ev, ok := <-r.queue:
				if !ok {
					break drain
				}
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		if r.failed() {
			continue // drain the queue so the engine is never blocked
		}
		start := time.Now()
		err := r.db.AppendEvents(context.Background(), r.sessionID, batch)
		if o, ok := r.pub.(BatchObserver); ok {
			o.ObserveBatch(len(batch), time.Since(start), err)
		}
		if err != nil {
			r.fail(err)
			continue
		}
		ch, err := r.view.apply(batch)
		if err != nil {
			r.log.Error("page state", "session", r.sessionID, "err", err)
		}
		held.events = append(held.events, batch...)
		held.changes.Merge(ch)
		ended := batch[len(batch)-1].Type == delegation.EventSessionFinished
		if wait := r.every - time.Since(held.last); ended || wait <= 0 {
			r.publish(&held)
		} else if len(held.events) == len(batch) {
			tick.Reset(wait) // the first batch held: published when the interval is over, if nothing comes first
		}
		if ended {
			r.saveView()
		}
	}
}

// publishEvery is the least time between two publishes of a session's
// stored batches. Batches committed within it are published together,
// their changes merged, as one message with one set of patches: a session
// that commits a batch a millisecond draws its page's patches a fifth as
// often, and a page applies them a fifth as often, for at most that much
// more latency. A session that commits less often is published at once.
const publishEvery = 5 * time.Millisecond

// heldBatches are stored and folded batches not yet published.
type heldBatches struct {
	events  []delegation.Event
	changes view.Changes
	last    time.Time // the last publish
}

// publish hands the held batches to the publisher as one, and starts the
// next interval.
func (r *Recorder) publish(h *heldBatches) {
	if len(h.events) == 0 {
		return
	}
	if r.pub != nil {
		r.pub.Publish(r.sessionID, h.events, h.changes, r.view)
	}
	h.events, h.changes, h.last = h.events[:0], view.Changes{}, time.Now()
}

// saveView stores the page state of a session that ended, so its pages read
// it rather than fold the log again.
func (r *Recorder) saveView() {
	state, seq, err := r.view.snapshot()
	if err == nil {
		err = r.db.SaveView(context.Background(), r.sessionID, seq, view.SnapshotVersion, state)
	}
	if err != nil {
		r.log.Error("store the page state", "session", r.sessionID, "err", err)
	}
}

func (r *Recorder) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil
}

func (r *Recorder) fail(err error) {
	r.mu.Lock()
	first := r.err == nil
	if first {
		r.err = err
	}
	r.mu.Unlock()
	if first {
		r.log.Error("recording stopped", "session", r.sessionID, "err", err)
		if r.onFailure != nil {
			r.onFailure(err)
		}
	}
}
