// Package live fans a session's events out to the browsers watching it.
//
// A Hub keeps, per session, the viewers subscribed to it, each with a
// bounded queue. Publish never waits for a viewer: one whose queue is full
// is dropped and has to reconnect, so a slow browser never slows the
// session or the other viewers. Serve turns a subscription into a
// websocket: the session's stored events after the viewer's last seq, then
// live ones, with no gap and no duplicate.
//
// The package moves already-encoded messages and knows nothing of events,
// the store or the web server; the caller encodes, and reads the store
// through a Backlog function.
package live

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Message is one encoded event for the wire, or several: Data then holds
// the events of seqs First … Seq, one a line (First 0 means Seq alone).
// Seq > 0 is part of the session's log; Seq == 0 is live-only (streamed
// model text) and is never deduplicated or replayed. Data is shared by
// every viewer and must not be changed once published; a message of Seq >
// 0 without Data only says the store holds the log through Seq (Stored).
type Message struct {
	Seq   int64
	First int64
	Data  []byte
}

// first is the seq of the message's first line.
func (m Message) first() int64 {
	if m.First > 0 {
		return m.First
	}
	return m.Seq
}

// Options configure a Hub.
type Options struct {
	Buffer int          // per-subscriber queue; default 256
	Logger *slog.Logger // nil: slog.Default()
	// MaxViewers caps the subscriptions in all, MaxSessionViewers those of
	// one session (TrySubscribe); 0 means no cap. Each viewer holds a
	// socket, a queue and a replay of the backlog.
	MaxViewers, MaxSessionViewers int
}

// ErrFull is why TrySubscribe refused a viewer; it is wrapped in a
// *FullError that says which cap was reached.
var ErrFull = errors.New("live: too many viewers")

// FullError is a refused subscription: Session says whether the session's
// own cap was reached (rather than the hub's), and Max is that cap.
type FullError struct {
	Session bool
	Max     int
}

func (e *FullError) Error() string {
	if e.Session {
		return fmt.Sprintf("this session already has %d live viewers, the most it may have: close another of its pages, or try again later", e.Max)
	}
	return fmt.Sprintf("the studio already has %d live viewers, the most it serves at once: close some pages, or try again later", e.Max)
}

func (e *FullError) Unwrap() error { return ErrFull }

// DefaultBuffer is the per-subscriber queue length when Options.Buffer is 0.
const DefaultBuffer = 256

// Hub fans each session's messages out to its subscribers. It is safe for
// concurrent use.
type Hub struct {
	buffer          int
	log             *slog.Logger
	maxAll, maxEach int
	// ctx is cancelled by Close, so every Serve can stop without polling.
	ctx    context.Context
	cancel context.CancelFunc

	// mu guards sessions and closed. Publish and Viewers hold it for
	// reading, so sessions publish in parallel; Subscribe, Subscription.Close
	// and Close hold it for writing, which also keeps them from closing a
	// channel while Publish sends on it.
	mu       sync.RWMutex
	sessions map[string]*session
	closed   bool
	// viewers counts the subscriptions of every session; it changes with
	// subs, under the same locks.
	viewers atomic.Int64
}

// session holds one session's subscribers; it exists only while it has some.
type session struct {
	// mu lets two Publish calls for the same session (stored events from the
	// recorder, live-only ones from the engine) and Viewers share the hub's
	// read lock without racing on subs.
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// NewHub returns a hub with no subscribers.
func NewHub(opts Options) *Hub {
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{buffer: opts.Buffer, log: opts.Logger, ctx: ctx, cancel: cancel,
		sessions: make(map[string]*session), maxAll: opts.MaxViewers, maxEach: opts.MaxSessionViewers}
}

// Stored tells the session's subscribers that the store holds its log
// through seq: each stream that has not sent it reads it from its backlog.
// For a log that grew where no Publish saw it (another replica wrote it).
func (h *Hub) Stored(sessionID string, seq int64) {
	if seq > 0 {
		h.Publish(sessionID, Message{Seq: seq})
	}
}

// Publish hands msg to every current subscriber of the session. It never
// blocks: a subscriber whose queue is full is dropped (its Dropped channel
// closes), so one slow viewer never slows the others or the session.
// Messages of one session must be published in seq order (the caller
// guarantees it) and are delivered in that order. Concurrent calls are safe,
// for the same session too.
func (h *Hub) Publish(sessionID string, msg Message) {
	h.mu.RLock()
	s := h.sessions[sessionID]
	if s == nil {
		h.mu.RUnlock()
		return
	}
	s.mu.Lock()
	dropped := 0
	for sub := range s.subs {
		select {
		case sub.c <- msg:
		default:
			// Waiting here would let one viewer stall the session and every
			// other viewer; the dropped one reconnects from its last seq.
			delete(s.subs, sub)
			h.viewers.Add(-1)
			sub.end(true)
			dropped++
		}
	}
	empty := len(s.subs) == 0
	s.mu.Unlock()
	h.mu.RUnlock()

	if dropped > 0 {
		h.log.Info("live: dropped slow viewers", "session", sessionID, "viewers", dropped, "queue", h.buffer)
		if empty {
			h.removeIfEmpty(sessionID, s)
		}
	}
}

// removeIfEmpty forgets a session whose last subscriber Publish dropped.
// Publish cannot do it itself: it holds only the read lock.
func (h *Hub) removeIfEmpty(sessionID string, s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sessions[sessionID] == s && len(s.subs) == 0 {
		delete(h.sessions, sessionID)
	}
}

// Subscribe starts receiving a session's messages, whatever the caps. The
// caller must Close the subscription when done with it. After Close,
// subscriptions come back already ended.
func (h *Hub) Subscribe(sessionID string) *Subscription {
	sub, _ := h.subscribe(sessionID, false)
	return sub
}

// TrySubscribe is Subscribe within the hub's caps: past one it returns a
// *FullError (wrapping ErrFull) and no subscription.
func (h *Hub) TrySubscribe(sessionID string) (*Subscription, error) {
	return h.subscribe(sessionID, true)
}

func (h *Hub) subscribe(sessionID string, capped bool) (*Subscription, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[sessionID]
	if capped && !h.closed {
		if h.maxEach > 0 && s != nil && len(s.subs) >= h.maxEach {
			return nil, &FullError{Session: true, Max: h.maxEach}
		}
		if h.maxAll > 0 && h.viewers.Load() >= int64(h.maxAll) {
			return nil, &FullError{Max: h.maxAll}
		}
	}
	sub := &Subscription{hub: h, sessionID: sessionID,
		c: make(chan Message, h.buffer), dropped: make(chan struct{})}
	if h.closed {
		sub.end(false)
		return sub, nil
	}
	if s == nil {
		s = &session{subs: make(map[*Subscription]struct{})}
		h.sessions[sessionID] = s
	}
	s.subs[sub] = struct{}{}
	h.viewers.Add(1)
	return sub, nil
}

// Viewers is the number of current subscribers of a session.
func (h *Hub) Viewers(sessionID string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s := h.sessions[sessionID]
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

// Close ends every subscription (server shutdown): their channels close and
// every Serve returns. Publish and Subscribe still work afterwards but reach
// no one. Close is idempotent.
func (h *Hub) Close() {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for _, s := range h.sessions {
			for sub := range s.subs {
				sub.end(false)
			}
		}
		h.sessions = make(map[string]*session)
		h.viewers.Store(0)
	}
	h.mu.Unlock()
	h.cancel()
}

// Subscription is one subscriber's queue of a session's messages.
type Subscription struct {
	hub       *Hub
	sessionID string
	c         chan Message
	dropped   chan struct{}
	// ended is set once the subscription has left its session; it is
	// guarded like the session's subs (the hub's write lock, or its read
	// lock with the session's lock).
	ended bool
}

// C delivers the session's messages in order. It is closed when the
// subscription ends: by Close, by the hub dropping it, or by Hub.Close.
func (s *Subscription) C() <-chan Message { return s.c }

// Dropped is closed when the hub dropped this subscriber for being slow
// (its queue was full when a message came).
func (s *Subscription) Dropped() <-chan struct{} { return s.dropped }

// Close stops the subscription and closes C. It is idempotent.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.ended {
		return
	}
	sess := h.sessions[s.sessionID]
	delete(sess.subs, s)
	h.viewers.Add(-1)
	if len(sess.subs) == 0 {
		delete(h.sessions, s.sessionID)
	}
	s.end(false)
}

// end marks the subscription over and closes its channels. Dropped closes
// before C so that a reader who sees C closed can tell why.
func (s *Subscription) end(dropped bool) {
	s.ended = true
	if dropped {
		close(s.dropped)
	}
	close(s.c)
}
