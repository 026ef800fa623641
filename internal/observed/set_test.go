package observed_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/observed"
)

// store opens sessions that say when they are done.
type store struct {
	mu    sync.Mutex
	stops map[string]func()
	done  map[string]chan struct{}
}

func (s *store) Open(_ context.Context, name string, _ *delegation.Origin, stop func()) (observed.Recording, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "refused" {
		return observed.Recording{}, errors.New("the store is full")
	}
	id := fmt.Sprintf("s%d", len(s.done)+1)
	ch := make(chan struct{})
	s.stops[id], s.done[id] = stop, ch
	return observed.Recording{ID: id, Done: func() error { close(ch); return nil }}, nil
}

func (s *store) wait(t *testing.T, id string) {
	t.Helper()
	s.mu.Lock()
	ch := s.done[id]
	s.mu.Unlock()
	<-ch
}

// obs ends when fed "end", and its time is up after an hour of quiet.
type obs struct {
	fed   []string
	ended *observed.Ending
}

func (o *obs) Due(_ time.Time, idle time.Duration) (observed.Ending, bool) {
	return observed.Ending{Status: delegation.StatusInterrupted, Reason: "quiet"}, idle >= time.Hour
}

func (o *obs) Close(e observed.Ending) { o.ended = &e }

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newSet(max int) (*observed.Set[*obs], *store, *clock) {
	st := &store{stops: map[string]func(){}, done: map[string]chan struct{}{}}
	c := &clock{now: time.Unix(1_700_000_000, 0)}
	set := observed.NewSet[*obs](observed.Config{Store: st, Now: c.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Max: max,
		Full: func(key, _ string, open int, quiet time.Duration) observed.Ending {
			return observed.Ending{Status: delegation.StatusInterrupted, Reason: fmt.Sprintf("full: %s, %d open, quiet %s", key, open, quiet)}
		},
		Stopped: observed.Ending{Status: delegation.StatusInterrupted, Reason: "stopped"},
		Closed:  observed.Ending{Status: delegation.StatusInterrupted, Reason: "closed"}})
	return set, st, c
}

// get finds the session of a key, or opens it.
func get(t *testing.T, set *observed.Set[*obs], key string) *observed.Session[*obs] {
	t.Helper()
	var s *observed.Session[*obs]
	err := set.Do(context.Background(), func(l observed.Locked[*obs]) error {
		if s = l.Find(key); s != nil {
			return nil
		}
		var err error
		s, err = l.Open(key, key, nil, func(observed.Recording) *obs { return &obs{} })
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func feed(s *observed.Session[*obs], now time.Time, what string) bool {
	return s.Feed(now, func(o *obs) *observed.Ending {
		o.fed = append(o.fed, what)
		if what == "end" {
			return &observed.Ending{}
		}
		return nil
	})
}

func TestSessionLifecycle(t *testing.T) {
	set, st, c := newSet(0)
	a := get(t, set, "a")
	if again := get(t, set, "a"); again != a {
		t.Fatal("a key's open session is found, not opened again")
	}
	feed(a, c.Now(), "span")
	if !feed(a, c.Now(), "end") || !a.Ended() || a.Obs.ended == nil || a.Obs.ended.Status != "" {
		t.Fatalf("fed its end: ended %v as %+v", a.Ended(), a.Obs.ended)
	}
	st.wait(t, a.ID)
	if feed(a, c.Now(), "late") || len(a.Obs.fed) != 2 {
		t.Errorf("an ended session was fed: %v", a.Obs.fed)
	}
	if b := get(t, set, "a"); b == a || b.ID == a.ID {
		t.Error("a key whose session ended opens a new one")
	}

	t.Run("swept when its time is up", func(t *testing.T) {
		set, st, c := newSet(0)
		quiet, busy := get(t, set, "quiet"), get(t, set, "busy")
		c.add(59 * time.Minute)
		feed(busy, c.Now(), "span")
		set.Sweep(c.Now().Add(time.Minute))
		st.wait(t, quiet.ID)
		if quiet.Obs.ended.Reason != "quiet" || busy.Ended() {
			t.Fatalf("quiet: %+v; busy ended: %v", quiet.Obs.ended, busy.Ended())
		}
	})

	t.Run("stopped in the studio", func(t *testing.T) {
		set, st, _ := newSet(0)
		s := get(t, set, "x")
		st.stops[s.ID]()
		st.wait(t, s.ID)
		if s.Obs.ended.Reason != "stopped" {
			t.Fatalf("%+v", s.Obs.ended)
		}
	})

	t.Run("past the cap, the quietest ends to make room", func(t *testing.T) {
		set, st, c := newSet(2)
		first := get(t, set, "first")
		c.add(time.Second)
		second := get(t, set, "second")
		c.add(time.Second)
		feed(first, c.Now(), "span")
		c.add(time.Second)
		third := get(t, set, "third")
		st.wait(t, second.ID)
		if got := second.Obs.ended.Reason; got != "full: second, 2 open, quiet 2s" {
			t.Errorf("the quietest: %q", got)
		}
		if first.Ended() || third.Ended() {
			t.Error("only the quietest ends")
		}
	})

	t.Run("the store refuses: no session", func(t *testing.T) {
		set, _, _ := newSet(0)
		err := set.Do(context.Background(), func(l observed.Locked[*obs]) error {
			_, err := l.Open("k", "refused", nil, func(observed.Recording) *obs { return &obs{} })
			return err
		})
		if err == nil {
			t.Fatal("the store's refusal is the caller's")
		}
		_ = set.Do(context.Background(), func(l observed.Locked[*obs]) error {
			if n := len(l.All()); n != 0 {
				t.Errorf("%d sessions open after a refusal", n)
			}
			return nil
		})
	})

	t.Run("closed: every open one ends, none opens", func(t *testing.T) {
		set, _, _ := newSet(0)
		x, y := get(t, set, "x"), get(t, set, "y")
		set.Close()
		for _, s := range []*observed.Session[*obs]{x, y} {
			if !s.Ended() || s.Obs.ended.Reason != "closed" {
				t.Errorf("%s: %+v", s.Key, s.Obs.ended)
			}
		}
		if err := set.Do(context.Background(), func(observed.Locked[*obs]) error { return nil }); !errors.Is(err, observed.ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	})
}

// Run sweeps on its ticker until its context ends.
func TestRunSweeps(t *testing.T) {
	set, st, c := newSet(0)
	s := get(t, set, "x")
	c.add(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); set.Run(ctx, time.Millisecond) }()
	st.wait(t, s.ID)
	cancel()
	<-ran
	if s.Obs.ended.Reason != "quiet" {
		t.Fatalf("%+v", s.Obs.ended)
	}
}
