package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

const sid = "s1"

// wait is how long a test waits for something that should take
// milliseconds; generous so a loaded CI machine under -race does not flake.
const wait = 10 * time.Second

// event is what the test messages carry.
type event struct {
	Seq  int64  `json:"seq"`
	Text string `json:"text,omitempty"`
}

func encode(seq int64) Message {
	return Message{Seq: seq, Data: fmt.Appendf(nil, `{"seq":%d}`, seq)}
}

func liveOnly(text string) Message {
	return Message{Data: fmt.Appendf(nil, `{"seq":0,"text":%q}`, text)}
}

// store is a fake session log: append stores then publishes, as the
// recorder does, under one lock so publishes stay in seq order whichever
// goroutine appends.
type store struct {
	hub *Hub

	mu    sync.Mutex
	log   []Message // log[i].Seq == i+1
	calls int
	// onRead runs at the start of each backlog read (call counts from 1),
	// without the lock, to publish while the viewer is paging.
	onRead func(call int)
	delay  time.Duration
}

func newStore(h *Hub, n int64) *store {
	s := &store{hub: h}
	for seq := int64(1); seq <= n; seq++ {
		s.log = append(s.log, encode(seq))
	}
	return s
}

// appendNext stores and publishes the next event, unless the log already
// reaches limit; it reports the seq appended, or 0.
func (s *store) appendNext(limit int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := int64(len(s.log)) + 1
	if seq > limit {
		return 0
	}
	m := encode(seq)
	s.log = append(s.log, m)
	s.hub.Publish(sid, m)
	return seq
}

func (s *store) backlog(ctx context.Context, after int64, limit int) ([]Message, error) {
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	if s.onRead != nil {
		s.onRead(call)
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if after >= int64(len(s.log)) {
		return nil, nil
	}
	return slices.Clone(s.log[after:min(int(after)+limit, len(s.log))]), nil
}

func (s *store) backlogCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// liveServer serves GET /live?after=N for session sid on 127.0.0.1.
type liveServer struct {
	*httptest.Server
	hub    *Hub
	served chan error // what each Serve returned
}

type serverConfig struct {
	backlog Backlog
	opts    ServeOptions
	// request, if set, may replace the request Serve gets.
	request func(*http.Request) *http.Request
	// server, if set, adjusts the server before it starts.
	server func(*httptest.Server)
}

func newLiveServer(t testing.TB, h *Hub, cfg serverConfig) *liveServer {
	t.Helper()
	ls := &liveServer{hub: h, served: make(chan error, 100)}
	ls.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		if cfg.request != nil {
			r = cfg.request(r)
		}
		ls.served <- h.Serve(w, r, sid, after, cfg.backlog, cfg.opts)
	}))
	if cfg.server != nil {
		cfg.server(ls.Server)
	}
	ls.Start()
	// Hub.Close ends every Serve, so no handler outlives the test.
	t.Cleanup(func() { h.Close(); ls.Close() })
	return ls
}

func (ls *liveServer) dial(t testing.TB, after int64, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	u := "ws" + strings.TrimPrefix(ls.URL, "http") + "/live?after=" + strconv.FormatInt(after, 10)
	c, _, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// nextServed waits for one Serve to return.
func (ls *liveServer) nextServed(t *testing.T) error {
	t.Helper()
	select {
	case err := <-ls.served:
		return err
	case <-time.After(wait):
		t.Fatal("Serve did not return")
		return nil
	}
}

// waitViewers waits until the session has n viewers: a Dial returns before
// the server has subscribed.
func waitViewers(t testing.TB, h *Hub, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for h.Viewers(sid) != n {
		if time.Now().After(deadline) {
			t.Fatalf("Viewers = %d, want %d", h.Viewers(sid), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// unread holds, per connection, the messages of a websocket message that a
// read did not ask for yet: a burst holds several, one a line.
var unread sync.Map // *websocket.Conn → []event

// read reads n messages.
func read(t *testing.T, c *websocket.Conn, n int) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []event
	if v, ok := unread.LoadAndDelete(c); ok {
		got = v.([]event)
	}
	for len(got) < n {
		typ, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %d of %d messages (last %v): %v", len(got), n, got[max(len(got)-1, 0):], err)
		}
		if typ != websocket.MessageText {
			t.Fatalf("message type %v, want text", typ)
		}
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("message %q: %v", data, err)
			}
			got = append(got, ev)
		}
	}
	if len(got) > n {
		unread.Store(c, got[n:])
	}
	return got[:n]
}

// expectNoMore fails if anything but silence follows: a duplicate would
// arrive after the messages the test expected.
func expectNoMore(t *testing.T, c *websocket.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if _, data, err := c.Read(ctx); err == nil {
		t.Fatalf("unexpected extra message %s", data)
	}
}

// readClose reads until the socket closes and returns the close error.
func readClose(t *testing.T, c *websocket.Conn) (int, websocket.CloseError) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	for n := 0; ; n++ {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("after %d messages: read error %v, want a close frame", n, err)
		}
		return n, ce
	}
}

func seqs(evs []event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestBacklogThenLive(t *testing.T) {
	t.Run("every seq once and in order while events arrive during paging", func(t *testing.T) {
		h := NewHub(Options{})
		st := newStore(h, 50)
		st.delay = 2 * time.Millisecond
		// Two new events per page read: published while the viewer is
		// subscribed but has not reached them in the backlog.
		st.onRead = func(int) { st.appendNext(100); st.appendNext(100) }
		ls := newLiveServer(t, h, serverConfig{backlog: st.backlog, opts: ServeOptions{PageSize: 7}})

		// The rest are published from here, during and after the paging.
		done := make(chan struct{})
		go func() {
			defer close(done)
			for st.appendNext(100) != 0 {
				time.Sleep(300 * time.Microsecond)
			}
		}()
		c := ls.dial(t, 0, nil)
		got := seqs(read(t, c, 100))
		<-done
		if want := seqRange(1, 100); !slices.Equal(got, want) {
			t.Fatalf("got seqs %v, want 1..100", got)
		}
		expectNoMore(t, c)
		if calls := st.backlogCalls(); calls < 8 {
			t.Errorf("backlog read %d times, want paging by 7 (at least 8 reads)", calls)
		}
	})

	t.Run("a live message ahead of the backlog is filled in from the store", func(t *testing.T) {
		h := NewHub(Options{})
		st := newStore(h, 10)
		// Seq 11 is published before the viewer subscribes and stored only
		// after it has read the backlog: neither path alone has it.
		h.Publish(sid, encode(11))
		backlogDone := make(chan struct{})
		var once sync.Once
		ls := newLiveServer(t, h, serverConfig{backlog: func(ctx context.Context, after int64, limit int) ([]Message, error) {
			page, err := st.backlog(ctx, after, limit)
			if len(page) < limit {
				once.Do(func() { close(backlogDone) }) // the viewer is now live
			}
			return page, err
		}})
		c := ls.dial(t, 0, nil)
		if got := seqs(read(t, c, 10)); !slices.Equal(got, seqRange(1, 10)) {
			t.Fatalf("backlog: got %v, want 1..10", got)
		}
		<-backlogDone
		st.mu.Lock()
		st.log = append(st.log, encode(11)) // stored late, not published again
		st.mu.Unlock()
		st.appendNext(12)
		if got := seqs(read(t, c, 2)); !slices.Equal(got, []int64{11, 12}) {
			t.Fatalf("live: got %v, want [11 12]", got)
		}
		expectNoMore(t, c)
	})
}

// TestBursts: messages waiting together go out as one websocket message,
// one a line: a backlog page, and live messages queued while the viewer was
// busy.
// heldViewer is a viewer of a store of n events held in its backlog's last
// read, subscribed, until release is closed: what is published meanwhile
// waits in its queue.
func heldViewer(t *testing.T, h *Hub, n int64) (c *websocket.Conn, release chan struct{}) {
	t.Helper()
	st := newStore(h, n)
	release, busy := make(chan struct{}), make(chan struct{})
	var once sync.Once
	ls := newLiveServer(t, h, serverConfig{backlog: func(ctx context.Context, after int64, limit int) ([]Message, error) {
		page, err := st.backlog(ctx, after, limit)
		if len(page) < limit {
			once.Do(func() { close(busy); <-release })
		}
		return page, err
	}})
	c = ls.dial(t, 0, nil)
	<-busy
	return c, release
}

func TestBursts(t *testing.T) {
	h := NewHub(Options{})
	c, release := heldViewer(t, h, 6)
	for seq := int64(7); seq <= 26; seq++ {
		h.Publish(sid, encode(seq))
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var frames [][]int64
	for n := 0; n < 26; {
		_, data, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", frames, err)
		}
		var f []int64
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev event
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			f = append(f, ev.Seq)
			n++
		}
		frames = append(frames, f)
	}
	if len(frames) != 2 || !slices.Equal(frames[0], seqRange(1, 6)) || !slices.Equal(frames[1], seqRange(7, 26)) {
		t.Fatalf("websocket messages %v; want the backlog page 1..6 as one, then the queued 7..26 as one", frames)
	}
	expectNoMore(t, c)
}

// TestBatchMessages: a message may hold a batch of events, one a line; a
// viewer whose backlog sent part of it gets the rest, once.
func TestBatchMessages(t *testing.T) {
	h := NewHub(Options{})
	c, release := heldViewer(t, h, 5)
	// Seqs 4..8 in one message, of which the backlog sent 4 and 5.
	var lines [][]byte
	for seq := int64(4); seq <= 8; seq++ {
		lines = append(lines, encode(seq).Data)
	}
	h.Publish(sid, Message{First: 4, Seq: 8, Data: bytes.Join(lines, []byte("\n"))})
	close(release)
	if got := seqs(read(t, c, 8)); !slices.Equal(got, seqRange(1, 8)) {
		t.Fatalf("got seqs %v, want 1..8 once each", got)
	}
	expectNoMore(t, c)
}

func TestReconnect(t *testing.T) {
	t.Run("after=30 gets 31..60 once though live overlaps the backlog", func(t *testing.T) {
		h := NewHub(Options{})
		st := newStore(h, 40)
		// On the first read, 41..45 are stored and published: the viewer
		// has them both queued live and in its next backlog pages.
		st.onRead = func(call int) {
			if call == 1 {
				for range 5 {
					st.appendNext(60)
				}
			}
		}
		ls := newLiveServer(t, h, serverConfig{backlog: st.backlog, opts: ServeOptions{PageSize: 7}})
		c := ls.dial(t, 30, nil)
		first := seqs(read(t, c, 15))
		for st.appendNext(60) != 0 {
		}
		got := append(first, seqs(read(t, c, 15))...)
		if want := seqRange(31, 60); !slices.Equal(got, want) {
			t.Fatalf("got %v, want 31..60", got)
		}
		expectNoMore(t, c)
	})

	t.Run("a second connection resumes where the first left off", func(t *testing.T) {
		h := NewHub(Options{})
		st := newStore(h, 20)
		ls := newLiveServer(t, h, serverConfig{backlog: st.backlog, opts: ServeOptions{PageSize: 7}})
		c := ls.dial(t, 0, nil)
		first := seqs(read(t, c, 12))
		c.Close(websocket.StatusNormalClosure, "")
		if err := ls.nextServed(t); err != nil {
			t.Fatalf("Serve after the client left = %v, want nil", err)
		}
		c2 := ls.dial(t, first[len(first)-1], nil)
		waitViewers(t, h, 1)
		for st.appendNext(25) != 0 {
		}
		if got := seqs(read(t, c2, 13)); !slices.Equal(got, seqRange(13, 25)) {
			t.Fatalf("second connection got %v, want 13..25", got)
		}
		expectNoMore(t, c2)
	})
}

func TestLiveOnlyMessages(t *testing.T) {
	h := NewHub(Options{})
	st := newStore(h, 5)
	published := make(chan struct{})
	st.onRead = func(call int) {
		if call == 1 {
			h.Publish(sid, liveOnly("during backlog"))
			close(published)
		}
	}
	ls := newLiveServer(t, h, serverConfig{backlog: st.backlog})
	c := ls.dial(t, 0, nil)
	<-published
	// The backlog's page is read once 1…5 have arrived; only then do the
	// next events exist (appended sooner, they would be in that page).
	got := read(t, c, 5)
	st.appendNext(6)
	h.Publish(sid, liveOnly("a"))
	h.Publish(sid, liveOnly("a")) // identical, and still not a duplicate
	st.appendNext(7)
	h.Publish(sid, liveOnly("b"))

	got = append(got, read(t, c, 6)...)
	var b strings.Builder
	for _, e := range got {
		if e.Seq == 0 {
			fmt.Fprintf(&b, "%q ", e.Text)
		} else {
			fmt.Fprintf(&b, "%d ", e.Seq)
		}
	}
	if got, want := b.String(), `1 2 3 4 5 "during backlog" 6 "a" "a" 7 "b" `; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	expectNoMore(t, c)
}

// TestSlowViewerIsDropped: one viewer never reads; five read. Publishing
// 2,000 messages must neither block nor hold the five back, and the slow
// one must be told to reconnect.
func TestSlowViewerIsDropped(t *testing.T) {
	const total, normal = 2000, 5
	h := NewHub(Options{Buffer: 8})
	ls := newLiveServer(t, h, serverConfig{
		// A long write timeout: if Publish waited on the slow viewer, the
		// timeout must not be what rescues it.
		opts: ServeOptions{WriteTimeout: time.Minute},
		// A small send buffer, so the viewer that reads nothing backs up
		// after a couple of hundred messages rather than megabytes.
		server: func(s *httptest.Server) {
			s.Config.ConnState = func(c net.Conn, st http.ConnState) {
				if tc, ok := c.(*net.TCPConn); ok && st == http.StateNew {
					tc.SetWriteBuffer(16 << 10)
				}
			}
		},
	})
	slow := ls.dial(t, 0, nil)

	var progress [normal]atomic.Int64
	errs := make(chan error, normal)
	for i := range normal {
		c := ls.dial(t, 0, nil)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
			defer cancel()
			for want := int64(1); want <= total; {
				_, data, err := c.Read(ctx)
				if err != nil {
					errs <- fmt.Errorf("viewer %d at seq %d: %w", i, want, err)
					return
				}
				for line := range bytes.SplitSeq(data, []byte("\n")) {
					if !bytes.HasPrefix(line, fmt.Appendf(nil, `{"seq":%d,`, want)) {
						errs <- fmt.Errorf("viewer %d: got %.40s, want seq %d", i, line, want)
						return
					}
					progress[i].Store(want)
					want++
				}
			}
			errs <- nil
		}()
	}
	waitViewers(t, h, normal+1)

	// Publish runs here, in the test goroutine. If it blocked on the slow
	// viewer the loop would hang, so a watchdog turns a hang into a failure.
	watchdog := time.AfterFunc(3*wait, func() {
		panic("TestSlowViewerIsDropped: Publish blocked: 2,000 calls did not finish")
	})
	defer watchdog.Stop()
	pad := strings.Repeat("x", 1000)
	var slowest time.Duration
	for seq := int64(1); seq <= total; seq++ {
		msg := Message{Seq: seq, Data: fmt.Appendf(nil, `{"seq":%d,"text":%q}`, seq, pad)}
		start := time.Now()
		h.Publish(sid, msg)
		slowest = max(slowest, time.Since(start))
		// Bursts that fit an empty queue, then let the readers catch up: the
		// readers keep pace, and the one that reads nothing does not.
		if seq%8 != 0 {
			continue
		}
		deadline := time.Now().Add(wait)
		for i := range normal {
			for progress[i].Load() < seq {
				if time.Now().After(deadline) {
					t.Fatalf("viewer %d is at seq %d, want %d: a reading viewer was held back", i, progress[i].Load(), seq)
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	watchdog.Stop()
	for range normal {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := h.Viewers(sid), normal; got != want {
		t.Fatalf("Viewers = %d, want %d (the slow viewer dropped)", got, want)
	}

	// Only now does the slow viewer read: what was in flight, then the close.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var last int64
	for {
		_, data, err := slow.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusTryAgainLater {
				t.Fatalf("slow viewer ended with %v, want close status 1013", err)
			}
			if want := fmt.Sprintf("?after=%d", last); !strings.Contains(ce.Reason, want) {
				t.Errorf("close reason %q, want it to say %s", ce.Reason, want)
			}
			break
		}
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			var ev event
			if err := json.Unmarshal(line, &ev); err != nil || ev.Seq != last+1 {
				t.Fatalf("slow viewer: got %.40s after seq %d", line, last)
			}
			last = ev.Seq
		}
	}
	if last >= total {
		t.Errorf("slow viewer got all %d messages; it was meant to fall behind", last)
	}
	if err := ls.nextServed(t); !errors.Is(err, ErrDropped) {
		t.Errorf("Serve of the slow viewer = %v, want ErrDropped", err)
	}
	t.Logf("slow viewer got %d of %d before the drop; slowest Publish %v", last, total, slowest)
}

func TestBookkeeping(t *testing.T) {
	t.Run("Viewers counts subscriptions and forgets empty sessions", func(t *testing.T) {
		h := NewHub(Options{})
		a1, a2, b := h.Subscribe("a"), h.Subscribe("a"), h.Subscribe("b")
		if got := h.Viewers("a"); got != 2 {
			t.Errorf("Viewers(a) = %d, want 2", got)
		}
		h.Publish("a", encode(1))
		if got := len(b.C()); got != 0 {
			t.Errorf("session b received %d of session a's messages", got)
		}
		if m := <-a2.C(); m.Seq != 1 {
			t.Errorf("a2 got seq %d, want 1", m.Seq)
		}
		a1.Close()
		a1.Close() // idempotent
		if got := h.Viewers("a"); got != 1 {
			t.Errorf("Viewers(a) after one Close = %d, want 1", got)
		}
		if m, ok := <-a1.C(); ok && m.Seq != 1 {
			t.Errorf("closed subscription delivered seq %d", m.Seq)
		}
		if _, ok := <-a1.C(); ok {
			t.Error("C still open after Close")
		}
		select {
		case <-a1.Dropped():
			t.Error("Dropped closed by Close; it is only for slow subscribers")
		default:
		}
		a2.Close()
		b.Close()
		if got := len(h.sessions); got != 0 {
			t.Errorf("%d sessions kept with no subscribers", got)
		}
		h.Publish("a", encode(2)) // no subscribers: a no-op
	})

	t.Run("a full queue drops the subscriber", func(t *testing.T) {
		h := NewHub(Options{Buffer: 2})
		slow, fast := h.Subscribe("a"), h.Subscribe("a")
		for seq := int64(1); seq <= 3; seq++ {
			h.Publish("a", encode(seq))
			<-fast.C()
		}
		select {
		case <-slow.Dropped():
		default:
			t.Fatal("Dropped not closed after the queue overflowed")
		}
		var got []int64
		for m := range slow.C() {
			got = append(got, m.Seq)
		}
		if !slices.Equal(got, []int64{1, 2}) {
			t.Errorf("dropped subscriber drained %v, want [1 2]", got)
		}
		if got := h.Viewers("a"); got != 1 {
			t.Errorf("Viewers = %d, want 1", got)
		}
		slow.Close() // after a drop: a no-op
		fast.Close()
		if got := len(h.sessions); got != 0 {
			t.Errorf("%d sessions kept with no subscribers", got)
		}
	})

	t.Run("Hub.Close ends every subscription", func(t *testing.T) {
		h := NewHub(Options{})
		sub := h.Subscribe("a")
		h.Close()
		h.Close()
		if _, ok := <-sub.C(); ok {
			t.Error("C open after Hub.Close")
		}
		if got := h.Viewers("a"); got != 0 {
			t.Errorf("Viewers = %d after Hub.Close, want 0", got)
		}
		late := h.Subscribe("a")
		if _, ok := <-late.C(); ok {
			t.Error("Subscribe after Hub.Close gave an open subscription")
		}
		h.Publish("a", encode(1))
		late.Close()
		sub.Close()
	})

	t.Run("Publish allocates nothing per subscriber", func(t *testing.T) {
		h := NewHub(Options{Buffer: 1000})
		for range 50 {
			defer h.Subscribe("a").Close()
		}
		msg := encode(1)
		if allocs := testing.AllocsPerRun(500, func() { h.Publish("a", msg) }); allocs != 0 {
			t.Errorf("Publish to 50 subscribers: %v allocations, want 0", allocs)
		}
	})
}

func TestServeEnds(t *testing.T) {
	t.Run("Hub.Close ends Serve with 1001", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{})
		c := ls.dial(t, 0, nil)
		waitViewers(t, h, 1)
		h.Close()
		if _, ce := readClose(t, c); ce.Code != websocket.StatusGoingAway {
			t.Errorf("close status %v, want 1001", ce.Code)
		}
		if err := ls.nextServed(t); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})

	t.Run("the client leaving ends Serve", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{})
		c := ls.dial(t, 0, nil)
		waitViewers(t, h, 1)
		c.Close(websocket.StatusNormalClosure, "bye")
		if err := ls.nextServed(t); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if got := h.Viewers(sid); got != 0 {
			t.Errorf("Viewers = %d, want 0", got)
		}
	})

	t.Run("a client vanishing without a close frame ends Serve", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{})
		c := ls.dial(t, 0, nil)
		waitViewers(t, h, 1)
		c.CloseNow()
		if err := ls.nextServed(t); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	})

	t.Run("a failing backlog closes with 1011", func(t *testing.T) {
		h := NewHub(Options{})
		boom := errors.New("disk on fire")
		ls := newLiveServer(t, h, serverConfig{backlog: func(context.Context, int64, int) ([]Message, error) {
			return nil, boom
		}})
		c := ls.dial(t, 4, nil)
		if _, ce := readClose(t, c); ce.Code != websocket.StatusInternalError || !strings.Contains(ce.Reason, "?after=4") {
			t.Errorf("close %v %q, want 1011 naming ?after=4", ce.Code, ce.Reason)
		}
		if err := ls.nextServed(t); !errors.Is(err, boom) {
			t.Errorf("Serve = %v, want the backlog's error", err)
		}
	})

	t.Run("a plain HTTP request is refused", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{})
		resp, err := http.Get(ls.URL + "/live")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Errorf("status %d, want a 4xx", resp.StatusCode)
		}
		if err := ls.nextServed(t); err == nil {
			t.Error("Serve = nil for a request that is no websocket")
		}
	})
}

func TestRequestContextEndsServe(t *testing.T) {
	h := NewHub(Options{})
	cancels := make(chan context.CancelFunc, 1)
	st := newStore(h, 3)
	ls := newLiveServer(t, h, serverConfig{backlog: st.backlog, request: func(r *http.Request) *http.Request {
		ctx, cancel := context.WithCancel(r.Context())
		cancels <- cancel
		return r.WithContext(ctx)
	}})
	c := ls.dial(t, 0, nil)
	read(t, c, 3)
	(<-cancels)()
	if _, ce := readClose(t, c); ce.Code != websocket.StatusGoingAway || !strings.Contains(ce.Reason, "?after=3") {
		t.Errorf("close %v %q, want 1001 naming ?after=3", ce.Code, ce.Reason)
	}
	if err := ls.nextServed(t); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if got := h.Viewers(sid); got != 0 {
		t.Errorf("Viewers = %d, want 0", got)
	}
}

func TestPing(t *testing.T) {
	t.Run("answered pings keep the socket open", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{opts: ServeOptions{PingInterval: 5 * time.Millisecond, WriteTimeout: wait}})
		c := ls.dial(t, 0, nil)
		c.CloseRead(context.Background()) // a client answers pings while it reads
		waitViewers(t, h, 1)
		time.Sleep(200 * time.Millisecond) // dozens of pings
		if got := h.Viewers(sid); got != 1 {
			t.Fatalf("Viewers = %d after pings were answered, want 1", got)
		}
	})

	t.Run("a peer that does not answer is let go", func(t *testing.T) {
		h := NewHub(Options{})
		ls := newLiveServer(t, h, serverConfig{opts: ServeOptions{PingInterval: 5 * time.Millisecond, WriteTimeout: 50 * time.Millisecond}})
		ls.dial(t, 0, nil) // never reads, so never answers
		if err := ls.nextServed(t); err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		if got := h.Viewers(sid); got != 0 {
			t.Errorf("Viewers = %d, want 0", got)
		}
	})
}

// BenchmarkEventToViewer100 measures how long an event takes from Publish
// to each of 100 websocket viewers on loopback, at about 1,000 events a
// second. Each iteration publishes 200 events one at a time.
func BenchmarkEventToViewer100(b *testing.B) {
	const viewers, perIter = 100, 200
	h := NewHub(Options{})
	ls := newLiveServer(b, h, serverConfig{})

	var received atomic.Int64
	lat := make([][]time.Duration, viewers)
	var wg sync.WaitGroup
	for i := range viewers {
		c := ls.dial(b, 0, nil)
		wg.Go(func() {
			// One reused buffer, so the viewers' own garbage does not weigh
			// on the figures.
			var buf bytes.Buffer
			for {
				_, r, err := c.Reader(context.Background())
				if err != nil {
					return
				}
				buf.Reset()
				if _, err := buf.ReadFrom(r); err != nil {
					return
				}
				now := time.Now().UnixNano()
				// A burst is one message, one event a line.
				for line := range bytes.SplitSeq(buf.Bytes(), []byte("\n")) {
					_, after, ok := bytes.Cut(line, []byte(`"sent":`))
					sent, err := strconv.ParseInt(string(bytes.TrimSuffix(after, []byte("}"))), 10, 64)
					if !ok || err != nil {
						panic(fmt.Sprintf("bad message %s", line))
					}
					lat[i] = append(lat[i], time.Duration(now-sent))
					received.Add(1)
				}
			}
		})
	}
	waitViewers(b, h, viewers)

	var seq int64
	for b.Loop() {
		for range perIter {
			seq++
			h.Publish(sid, Message{Seq: seq, Data: fmt.Appendf(nil, `{"seq":%d,"sent":%d}`, seq, time.Now().UnixNano())})
			time.Sleep(2 * time.Millisecond)
		}
		for received.Load() < seq*viewers {
			time.Sleep(100 * time.Microsecond)
		}
	}
	b.StopTimer()
	h.Close()
	wg.Wait()

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(all[len(all)/2]), "p50-ms")
	b.ReportMetric(ms(all[len(all)*99/100]), "p99-ms")
	b.ReportMetric(ms(all[len(all)-1]), "max-ms")
	b.ReportMetric(float64(len(all)), "deliveries")
}
