package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/delegationstudio/studio/internal/otlp"
)

// OTLPPush is where the server pushes each session's spans as it ends.
type OTLPPush struct {
	Pusher  *otlp.Pusher
	Options otlp.Options
}

// pushQueue pushes ended sessions to an OTLP endpoint, one at a time, off
// the sessions' own goroutines: a slow or absent collector delays nothing
// but its own pushes. A push that fails is logged with the command that
// retries it; the store remembers what went, so a retry sends the rest.
type pushQueue struct {
	db     Store
	cfg    OTLPPush
	log    *slog.Logger
	ids    chan string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

// pushQueueSize bounds the sessions waiting for their push; past it, a
// session's push is dropped with a warning rather than blocking its end.
const pushQueueSize = 1024

func newPushQueue(d Store, cfg OTLPPush, log *slog.Logger) *pushQueue {
	q := &pushQueue{db: d, cfg: cfg, log: log, ids: make(chan string, pushQueueSize)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.wg.Add(1)
	go q.run()
	return q
}

// add queues a session for its push.
func (q *pushQueue) add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	select {
	case q.ids <- id:
	default:
		q.log.Warn("too many sessions wait for their OTLP push; this one is not pushed",
			"session", id, "retry", "studio export "+id+" --otlp-endpoint "+q.cfg.Pusher.Endpoint())
	}
}

func (q *pushQueue) run() {
	defer q.wg.Done()
	for id := range q.ids {
		sum, err := otlp.PushStored(q.ctx, q.db, q.cfg.Pusher, id, q.cfg.Options)
		if err != nil {
			q.log.Error("could not push a session's spans", "session", id, "endpoint", q.cfg.Pusher.Endpoint(), "err", err,
				"retry", "studio export "+id+" --otlp-endpoint "+q.cfg.Pusher.Endpoint())
			continue
		}
		q.log.Info("pushed a session's spans", "session", id, "spans", sum.Spans, "endpoint", q.cfg.Pusher.Endpoint())
	}
}

// close stops taking sessions and gives the queued pushes until timeout,
// then abandons them (each says so in the log).
func (q *pushQueue) close(timeout time.Duration) {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ids)
	}
	q.mu.Unlock()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		q.cancel()
		<-done
	}
	q.cancel()
}
