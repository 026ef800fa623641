package live

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Backlog reads a session's stored messages with seq > after, in order, at
// most limit.
type Backlog func(ctx context.Context, after int64, limit int) ([]Message, error)

// ServeOptions configure one viewer's stream. Zero values take the defaults.
type ServeOptions struct {
	PageSize       int           // backlog page size; default 500
	PingInterval   time.Duration // default 20s; keeps proxies from closing idle sockets, and detects dead peers; negative: no pings
	WriteTimeout   time.Duration // default 10s per write; a peer that cannot take a write in time is dropped; negative: no limit
	OriginPatterns []string      // passed to websocket.AcceptOptions (same-host only by default)
}

// Defaults for ServeOptions.
const (
	DefaultPageSize     = 500
	DefaultPingInterval = 20 * time.Second
	DefaultWriteTimeout = 10 * time.Second
)

// ErrDropped is returned (wrapped) by Serve when the viewer was too slow:
// its queue overflowed, or a write took longer than WriteTimeout. The
// browser is told to reconnect from its last seq, so it is no server fault.
var ErrDropped = errors.New("live: viewer dropped for being slow")

var (
	// errPeerGone: the client closed the socket, vanished, or stopped
	// answering pings. An ordinary end, so Serve returns nil.
	errPeerGone = errors.New("live: viewer went away")
	// errServerGone: the request context ended or the hub closed.
	errServerGone = errors.New("live: server going away")
)

// Serve upgrades the request to a websocket and streams the session: every
// stored message after `after` (from backlog, page by page), then live
// messages as they are published, with no gap and no duplicate. Messages
// that are waiting together (a backlog page, a burst of live ones) go out
// as one websocket message, one frame and one write: their data joined by
// newlines, so each line is one message (NDJSON). Message data must hold
// no raw newline; compact JSON never does. It
// subscribes before reading the backlog and then forwards live messages with
// Seq greater than the last seq sent, and every Seq 0 message. A nil backlog
// means the session has no stored log: only live messages are sent.
//
// A viewer past the hub's caps gets 429 (the session's cap) or 503 (the
// hub's) with Retry-After, no websocket, and an error wrapping ErrFull.
//
// Serve returns when the client goes away, the request context ends or the
// hub closes (status 1001 "going away"), all with a nil error; when the
// subscriber is dropped for being slow (status 1013 "try again later"), with
// an error wrapping ErrDropped; or when the backlog fails (status 1011), with
// its error. Every close reason names the ?after= to reconnect with. If the
// upgrade fails, Serve returns its error and the HTTP error response has
// been written.
//
// Messages from the client are read and ignored: reading is what answers its
// pings and its close.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, sessionID string, after int64, backlog Backlog, opts ServeOptions) error {
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	// Subscribing before the first backlog read is what leaves no gap: a
	// message is either stored before the read (and in the backlog) or
	// published after the subscription (and in its queue), or both, which
	// the seq comparison deduplicates. Subscribing before the upgrade lets
	// a viewer past the caps get a plain HTTP answer it can act on.
	sub, err := h.TrySubscribe(sessionID)
	if err != nil {
		status := http.StatusServiceUnavailable
		var full *FullError
		if errors.As(err, &full) && full.Session {
			status = http.StatusTooManyRequests
		}
		w.Header().Set("Retry-After", "10")
		http.Error(w, err.Error(), status)
		return fmt.Errorf("live: session %s: %w", sessionID, err)
	}
	// A websocket outlives the server's read and write timeouts, whose
	// deadlines stay on the connection once it is taken over: it runs while
	// the session is watched, with pings and a deadline per write.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(bufferedHijack{w}, r, &websocket.AcceptOptions{OriginPatterns: opts.OriginPatterns})
	if err != nil {
		sub.Close()
		return fmt.Errorf("live: accept websocket for session %s: %w", sessionID, err)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	stopOnHubClose := context.AfterFunc(h.ctx, func() { cancel(errServerGone) })
	var wg sync.WaitGroup
	defer func() {
		stopOnHubClose()
		sub.Close()
		_ = conn.CloseNow() // unblocks the reader; a no-op after a close handshake
		cancel(nil)         // stops the pinger
		wg.Wait()
	}()

	wg.Go(func() {
		for {
			// Background, not ctx: cancelling a read's context makes the
			// library drop the connection, which would lose our close frame.
			if _, _, err := conn.Read(context.Background()); err != nil {
				cancel(fmt.Errorf("%w: %w", errPeerGone, err))
				return
			}
		}
	})
	if opts.PingInterval > 0 {
		wg.Go(func() { pingUntilDone(ctx, cancel, conn, opts) })
	}

	s := &stream{conn: conn, sub: sub, backlog: backlog, opts: opts, last: max(after, 0),
		log: h.log.With("session", sessionID)}
	if opts.WriteTimeout > 0 {
		// Created stopped; each write arms it.
		s.writeTimer = time.AfterFunc(time.Hour, func() { _ = conn.CloseNow() })
		s.writeTimer.Stop()
		defer s.writeTimer.Stop()
	}
	return s.end(ctx, s.run(ctx))
}

// writeBuffer is a websocket's write buffer. net/http hands a hijacked
// connection a 4 KB one, through which a frame's header and a message of a
// few KB take three write syscalls; in this one they take one. At 500
// viewers the syscalls of the fan-out are most of the server's work.
const writeBuffer = 32 << 10

// bufferedHijack gives the websocket a connection with a writeBuffer.
type bufferedHijack struct{ http.ResponseWriter }

func (b bufferedHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(b.ResponseWriter).Hijack()
	if err == nil && brw.Writer.Buffered() == 0 {
		brw.Writer = bufio.NewWriterSize(c, writeBuffer)
	}
	return c, brw, err
}

func (b bufferedHijack) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// pingUntilDone pings the peer every PingInterval, on its own goroutine so
// that waiting for a pong never delays the messages. A peer that does not
// answer in time is taken as gone.
func pingUntilDone(ctx context.Context, cancel context.CancelCauseFunc, conn *websocket.Conn, opts ServeOptions) {
	timeout := opts.WriteTimeout
	if timeout < 0 {
		timeout = opts.PingInterval
	}
	t := time.NewTicker(opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, done := context.WithTimeout(ctx, timeout)
		err := conn.Ping(pctx)
		done()
		if err != nil {
			cancel(fmt.Errorf("%w: no pong: %w", errPeerGone, err))
			return
		}
	}
}

// stream is one viewer's websocket, driven by Serve's goroutine alone.
type stream struct {
	conn    *websocket.Conn
	sub     *Subscription
	backlog Backlog
	opts    ServeOptions
	log     *slog.Logger
	last    int64 // the last seq sent; every later message with Seq <= last is a duplicate
	// pending are the messages of the next write; joined in buf.
	pending [][]byte
	size    int
	buf     []byte
	// writeTimer, armed during each write, drops the connection if the
	// write outlasts WriteTimeout; nil when writes have no limit.
	writeTimer *time.Timer
}

// run sends the backlog, then live messages, until something ends the
// stream; it returns why.
func (s *stream) run(ctx context.Context) error {
	if err := s.sendBacklog(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.sub.Dropped():
			return ErrDropped
		case msg, ok := <-s.sub.C():
			if !ok {
				select {
				case <-s.sub.Dropped():
					return ErrDropped
				default:
					return errServerGone // only Hub.Close ends it otherwise
				}
			}
			if err := s.forward(ctx, msg); err != nil {
				return err
			}
			// What else is waiting goes in the same write.
			if err := s.drain(ctx); err != nil {
				return err
			}
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
}

// maxBurst caps the bytes one write joins.
const maxBurst = 1 << 20

// drain forwards the messages already queued, without waiting for more.
func (s *stream) drain(ctx context.Context) error {
	for s.size < maxBurst {
		select {
		case msg, ok := <-s.sub.C():
			if !ok {
				return nil // run sees the closed channel next
			}
			if err := s.forward(ctx, msg); err != nil {
				return err
			}
		default:
			return nil
		}
	}
	return nil
}

// queue adds a message to the next write.
func (s *stream) queue(data []byte) {
	s.pending = append(s.pending, data)
	s.size += len(data) + 1
}

// flush writes the queued messages as one websocket message.
func (s *stream) flush() error {
	switch len(s.pending) {
	case 0:
		return nil
	case 1:
		err := s.write(s.pending[0])
		s.pending, s.size = s.pending[:0], 0
		return err
	}
	s.buf = s.buf[:0]
	for i, d := range s.pending {
		if i > 0 {
			s.buf = append(s.buf, '\n')
		}
		s.buf = append(s.buf, d...)
	}
	clear(s.pending)
	s.pending, s.size = s.pending[:0], 0
	return s.write(s.buf)
}

// sendBacklog sends the stored messages after s.last, page by page (a
// write each), until a page comes back short.
func (s *stream) sendBacklog(ctx context.Context) error {
	if s.backlog == nil {
		return nil
	}
	if err := s.flush(); err != nil { // what was queued comes first
		return err
	}
	for {
		page, err := s.backlog(ctx, s.last, s.opts.PageSize)
		if err != nil {
			return fmt.Errorf("live: read backlog after seq %d: %w", s.last, err)
		}
		before := s.last
		for _, m := range page {
			if m.Seq <= s.last {
				continue // a backlog that returns too much must not make duplicates
			}
			s.queue(s.after(m))
			s.last = m.Seq
			if s.size >= maxBurst {
				if err := s.flush(); err != nil {
					return err
				}
			}
		}
		if err := s.flush(); err != nil {
			return err
		}
		// The no-progress check keeps a backlog that ignores `after` from
		// looping forever.
		if len(page) < s.opts.PageSize || s.last == before {
			return nil
		}
		// Stop between pages too, not only once the whole backlog is out.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.sub.Dropped():
			return ErrDropped
		default:
		}
	}
}

// forward queues one live message unless the backlog already sent it.
func (s *stream) forward(ctx context.Context, msg Message) error {
	if msg.Seq == 0 {
		s.queue(msg.Data)
		return nil
	}
	if msg.Seq <= s.last {
		return nil
	}
	if msg.Data == nil {
		// Stored: the store holds the log through msg.Seq, which this
		// stream has not sent; it reads it there.
		if s.backlog == nil {
			return nil
		}
		return s.sendBacklog(ctx)
	}
	if msg.first() > s.last+1 && s.backlog != nil {
		// Messages are missing before this one: published before we
		// subscribed but stored only after we read the backlog. The store has
		// them by now if it writes before publishing.
		if err := s.sendBacklog(ctx); err != nil {
			return err
		}
		if msg.Seq <= s.last {
			return nil
		}
		if msg.first() > s.last+1 {
			s.log.Debug("live: seqs missing from the backlog", "from", s.last+1, "to", msg.first()-1)
		}
	}
	s.queue(s.after(msg))
	s.last = msg.Seq
	return nil
}

// after is a message's data without its lines of seqs already sent: a
// batch the backlog sent part of.
func (s *stream) after(msg Message) []byte {
	data := msg.Data
	for seq := msg.first(); seq <= s.last && seq < msg.Seq; seq++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		data = data[i+1:]
	}
	return data
}

// write sends one text message within WriteTimeout.
func (s *stream) write(data []byte) error {
	if s.writeTimer != nil {
		s.writeTimer.Reset(s.opts.WriteTimeout)
	}
	// Background: a context with a deadline would cost a timer and a
	// callback registration per message per viewer, and its garbage shows
	// in the fan-out's tail latency; the stream's one timer does the job.
	err := s.conn.Write(context.Background(), websocket.MessageText, data)
	if s.writeTimer != nil && !s.writeTimer.Stop() {
		// The timer fired, closing the connection under the write.
		return fmt.Errorf("%w: a write took over %v", ErrDropped, s.opts.WriteTimeout)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errPeerGone, err)
	}
	return nil
}

// end closes the socket as err calls for and returns what Serve reports.
func (s *stream) end(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ErrDropped) {
		// The stream was ending anyway; whatever failed since is a symptom.
		err = context.Cause(ctx)
		if !errors.Is(err, errPeerGone) {
			err = errServerGone
		}
	}
	// Unsubscribe first, so Viewers stops counting this one during the
	// close handshake.
	s.sub.Close()
	switch {
	case errors.Is(err, errPeerGone):
		s.log.Debug("live: viewer left", "last_seq", s.last, "why", err)
		return nil
	case errors.Is(err, errServerGone):
		s.close(websocket.StatusGoingAway, "server going away")
		return nil
	case errors.Is(err, ErrDropped):
		s.close(websocket.StatusTryAgainLater, "too slow")
		return fmt.Errorf("%w (last seq sent %d)", err, s.last)
	default:
		s.close(websocket.StatusInternalError, "could not read the session")
		return err
	}
}

// close performs the close handshake with a reason that tells the browser
// where to resume.
func (s *stream) close(code websocket.StatusCode, why string) {
	reason := fmt.Sprintf("%s; reconnect with ?after=%d", why, s.last)
	if err := s.conn.Close(code, reason); err != nil {
		s.log.Debug("live: close websocket", "code", code, "err", err)
	}
}
