package push

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/otlp"
)

// hungStore never answers until its caller gives up: a push to it lasts
// until the queue abandons it.
type hungStore struct{ asked chan string }

func (s hungStore) Read(ctx context.Context, _ string, _ func(db.Reader) error) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s hungStore) PushedSeq(ctx context.Context, id, _ string) (int64, error) {
	s.asked <- id
	<-ctx.Done()
	return 0, ctx.Err()
}

func (s hungStore) SetPushedSeq(context.Context, string, string, int64) error { return nil }

func TestShutdownIsBounded(t *testing.T) {
	p, err := otlp.NewPusher(otlp.PushConfig{Endpoint: "http://127.0.0.1:1/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	st := hungStore{asked: make(chan string, 1)}
	q := New(st, Config{Pusher: p}, nil)
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
	q.Add("s1")
	<-st.asked // the push is under way, and hangs
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := q.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline's error", err)
	}
	q.Add("s2") // after Shutdown: dropped, no panic
	if err := q.Shutdown(context.Background()); err != nil {
		t.Errorf("a second Shutdown = %v", err)
	}
}
