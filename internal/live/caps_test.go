package live

import (
	"errors"
	"testing"
)

func TestViewerCaps(t *testing.T) {
	h := NewHub(Options{Buffer: 1, MaxViewers: 3, MaxSessionViewers: 2})
	defer h.Close()
	try := func(id string) (*Subscription, error) { return h.TrySubscribe(id) }
	a1, _ := try("a")
	a2, _ := try("a")
	if _, err := try("a"); !errors.Is(err, ErrFull) {
		t.Fatalf("a third viewer of a: %v", err)
	} else if fe := err.(*FullError); !fe.Session || fe.Max != 2 {
		t.Fatalf("error %+v", fe)
	}
	b1, _ := try("b")
	if _, err := try("c"); !errors.Is(err, ErrFull) || err.(*FullError).Session {
		t.Fatalf("a fourth viewer in all: %v", err)
	}
	t.Run("a closed viewer frees its place", func(t *testing.T) {
		a1.Close()
		if _, err := try("c"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a dropped viewer frees its place", func(t *testing.T) {
		h.Publish("b", Message{Seq: 1})
		h.Publish("b", Message{Seq: 2}) // b1's queue of one is full: dropped
		<-b1.Dropped()
		if _, err := try("d"); err != nil {
			t.Fatal(err)
		}
	})
	_ = a2
	t.Run("Subscribe ignores the caps", func(t *testing.T) {
		for range 5 {
			h.Subscribe("a")
		}
		if got := h.Viewers("a"); got != 6 {
			t.Fatalf("viewers of a = %d", got)
		}
	})
}
