package observed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/pricing"
	"github.com/delegationstudio/studio/internal/tokens"
)

// Defaults of how a received trace ends (docs/ingest.md).
const (
	// DefaultQuiet: a trace from which no span arrived for this long ends
	// as interrupted. Spans arrive when they end, so a single model call
	// may be silent for minutes; this is well past any.
	DefaultQuiet = 10 * time.Minute
	// DefaultGrace: once a trace's root span has arrived, spans still
	// missing (children whose parent never came) are waited for this long.
	DefaultGrace = 5 * time.Second
	// DefaultMaxTraces: the most traces received at once. Past it, the
	// trace quiet for longest ends (interrupted) to make room; the
	// engine's runs have a cap of their own.
	DefaultMaxTraces = 256
)

// ReceiverConfig is what a Receiver needs.
type ReceiverConfig struct {
	Store    Store
	TaskTool string // the tool that delegates ("task" when empty)
	// Quiet, Grace and MaxTraces: 0 takes the defaults above.
	Quiet, Grace time.Duration
	MaxTraces    int
	// Closed is why Close ends the traces still open.
	Closed string
	Now    func() time.Time
	Logger *slog.Logger
}

// Receiver turns OTLP traces into sessions as their spans arrive: one
// session per trace id, fed through the store's recorder like any other.
type Receiver struct {
	cfg ReceiverConfig
	set *Set[*liveTrace]
}

// liveTrace is one trace being received; its session's lock guards it.
type liveTrace struct {
	r        *Receiver
	tr       *ingest.Trace
	rootSeen time.Time // when the root span arrived
}

// NewReceiver makes a receiver. Run sweeps its traces; Close ends them.
func NewReceiver(cfg ReceiverConfig) *Receiver {
	if cfg.MaxTraces <= 0 {
		cfg.MaxTraces = DefaultMaxTraces
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = DefaultQuiet
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Receiver{cfg: cfg}
	r.set = NewSet[*liveTrace](Config{Store: cfg.Store, Now: cfg.Now, Logger: cfg.Logger, Max: cfg.MaxTraces, Full: r.full,
		Stopped: Ending{delegation.StatusInterrupted, "stopped in the studio before the trace ended", delegation.StopUser},
		Closed:  Ending{delegation.StatusInterrupted, cfg.Closed, delegation.StopShutdown}})
	return r
}

// full is how the trace quiet longest ends to make room.
func (r *Receiver) full(traceID, id string, open int, quiet time.Duration) Ending {
	r.cfg.Logger.Warn("too many traces open at once; the quietest one is ended to make room",
		"trace", traceID, "session", id, "open", open, "quiet_for", quiet)
	return Ending{Status: delegation.StatusInterrupted, Reason: fmt.Sprintf("the studio was receiving %d traces at once, the most it holds open (serve --otlp-max-traces); "+
		"this one had been quiet longest (no span for %s), so it was ended to make room; its later spans start a session of their own", open, quiet)}
}

// Add feeds a trace's spans to its session, creating it for a trace not
// seen before (or whose session has ended: late spans get a session of
// their own), and ends it once its root span has arrived and nothing is
// missing. It returns how many spans had an id the trace already had, and
// the first; ErrClosed once the receiver is closed.
func (r *Receiver) Add(ctx context.Context, traceID string, spans []ingest.Span) (int, *ingest.Span, error) {
	s, err := r.get(ctx, traceID, spans)
	if err != nil {
		return 0, nil, err
	}
	var dups int
	var first *ingest.Span
	now := r.cfg.Now()
	s.Feed(now, func(lt *liveTrace) *Ending {
		dups, first = lt.tr.Add(spans)
		if lt.tr.Root() != nil && lt.rootSeen.IsZero() {
			lt.rootSeen = now
		}
		if lt.tr.Complete() {
			return &Ending{} // the root span decides
		}
		return nil
	})
	return dups, first, nil
}

func (r *Receiver) get(ctx context.Context, traceID string, spans []ingest.Span) (*Session[*liveTrace], error) {
	var s *Session[*liveTrace]
	err := r.set.Do(ctx, func(l Locked[*liveTrace]) error {
		if s = l.Find(traceID); s != nil {
			return nil
		}
		name := ingest.NameOf(spans)
		var err error
		s, err = l.Open(traceID, name, nil, func(rec Recording) *liveTrace {
			counter, _ := tokens.Get(tokens.Default)
			return &liveTrace{r: r, tr: ingest.NewTrace(ingest.Config{SessionID: rec.ID, Name: name, Tokenizer: tokens.Default,
				Counter: counter, Sink: rec.Sink, TaskTool: r.cfg.TaskTool, Prices: pricing.Lookup})}
		})
		if err == nil {
			r.cfg.Logger.Info("receiving a trace", "trace", traceID, "session", s.ID, "service", name)
		}
		return err
	})
	return s, err
}

// Due: a trace whose root arrived more than the grace ago ends (finished,
// with whatever never came shown as orphans); one silent for the quiet
// period ends interrupted.
func (lt *liveTrace) Due(now time.Time, idle time.Duration) (Ending, bool) {
	switch {
	case !lt.rootSeen.IsZero() && now.Sub(lt.rootSeen) >= lt.r.cfg.Grace:
		return Ending{}, true
	case idle >= lt.r.cfg.Quiet:
		return Ending{Status: delegation.StatusInterrupted,
			Reason: fmt.Sprintf("no span of this trace arrived for %s: the program stopped, or lost its exporter, before its root span ended", lt.r.cfg.Quiet)}, true
	}
	return Ending{}, false
}

// Close ends the trace's session; an ending with a status of its own ends
// it now, one without at its last span's end.
func (lt *liveTrace) Close(e Ending) {
	at := time.Time{}
	if e.Status != "" {
		at = lt.r.cfg.Now()
	}
	if e.StoppedBy != "" {
		lt.tr.Session().StopBy(e.StoppedBy)
	}
	lt.tr.Close(e.Status, e.Reason, at)
}

// Sweep ends the traces whose time is up at now.
func (r *Receiver) Sweep(now time.Time) { r.set.Sweep(now) }

// Run sweeps now and then until ctx ends.
func (r *Receiver) Run(ctx context.Context) {
	r.set.Run(ctx, max(min(r.cfg.Grace, r.cfg.Quiet)/2, 50*time.Millisecond))
}

// Close ends every trace still being received, as interrupted, and takes
// no more.
func (r *Receiver) Close() { r.set.Close() }
