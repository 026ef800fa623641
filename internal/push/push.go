// Package push sends each session's spans, as it ends, to an OTLP/HTTP
// collector. Like an OpenTelemetry Collector component it is built from a
// Config, started, and shut down within a deadline.
package push

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/otlp"
)

// Config is where each session's spans are pushed as it ends.
type Config struct {
	Pusher  *otlp.Pusher
	Options otlp.Options
}

// Store is what a push reads a session from, and where it remembers what
// went.
type Store = otlp.Store[db.Reader]

// Queue pushes ended sessions to an OTLP endpoint, one at a time, off the
// sessions' own goroutines: a slow or absent collector delays nothing but
// its own pushes. A push that fails is logged with the command that
// retries it; the store remembers what went, so a retry sends the rest.
type Queue struct {
	db      Store
	cfg     Config
	log     *slog.Logger
	ids     chan string
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	started bool
	closed  bool
}

// QueueSize bounds the sessions waiting for their push; past it, a
// session's push is dropped with a warning rather than blocking its end.
const QueueSize = 1024

// New builds a queue; Start starts pushing.
func New(d Store, cfg Config, log *slog.Logger) *Queue {
	if log == nil {
		log = slog.Default()
	}
	q := &Queue{db: d, cfg: cfg, log: log, ids: make(chan string, QueueSize)}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	return q
}

// Start starts pushing the queued sessions. A queue starts once.
func (q *Queue) Start(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.closed {
		return errors.New("push: the queue was started already")
	}
	q.started = true
	q.wg.Go(q.run)
	return nil
}

// Add queues a session for its push (a session runner's Ended).
func (q *Queue) Add(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	select {
	case q.ids <- id:
	default:
		q.log.Warn("too many sessions wait for their OTLP push; this one is not pushed",
			"session", id, "retry", q.retry(id))
	}
}

func (q *Queue) retry(id string) string {
	return "studio export " + id + " --otlp-endpoint " + q.cfg.Pusher.Endpoint()
}

func (q *Queue) run() {
	for id := range q.ids {
		sum, err := otlp.PushStored(q.ctx, q.db, q.cfg.Pusher, id, q.cfg.Options)
		if err != nil {
			q.log.Error("could not push a session's spans", "session", id, "endpoint", q.cfg.Pusher.Endpoint(), "err", err,
				"retry", q.retry(id))
			continue
		}
		q.log.Info("pushed a session's spans", "session", id, "spans", sum.Spans, "endpoint", q.cfg.Pusher.Endpoint())
	}
}

// Shutdown stops taking sessions and gives the queued pushes until ctx
// ends, then abandons them (each says so in the log); it returns ctx's
// error when it had to.
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ids)
	}
	q.mu.Unlock()
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		q.cancel()
		<-done
	}
	q.cancel()
	return err
}
