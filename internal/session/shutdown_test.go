package session

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
)

// stuck answers "ls" once, then holds its second call until released,
// deaf to its context: a session that does not end when it is stopped.
type stuck struct {
	calls   int
	inside  chan struct{} // closed when the second call is held
	release chan struct{}
}

func (m *stuck) Generate(ctx context.Context, _ *delegation.Request) (*delegation.Response, error) {
	m.calls++
	if m.calls == 2 {
		close(m.inside)
		<-m.release
		if err := ctx.Err(); err != nil {
			return nil, err // heard at last
		}
	}
	if m.calls > 1 {
		return &delegation.Response{Content: "done"}, nil
	}
	return &delegation.Response{ToolCalls: []delegation.ToolCall{{Name: "ls", Args: json.RawMessage(`{"path": "/"}`)}}}, nil
}

func openStore(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func heldScenario(t *testing.T) *scenario.Scenario {
	t.Helper()
	sc, err := scenario.Parse([]byte(`{"name": "held", "prompt": "go", "script": {"main": [{"content": "unused: the test plays the model"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// TestShutdownRefusesStarts: once Shutdown has begun, Start, Run and
// Receive refuse, with a code the server answers 503 for, and store nothing.
func TestShutdownRefusesStarts(t *testing.T) {
	ctx := context.Background()
	d := openStore(t)
	r := &Runner{DB: d}
	if err := r.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with nothing running: %v", err)
	}
	sc := heldScenario(t)
	if _, err := r.Start(ctx, sc); !errors.Is(err, ErrStopping) || delegation.ErrorCode(err) != delegation.ESTOPPING {
		t.Errorf("Start after Shutdown: %v (code %q), want ErrStopping", err, delegation.ErrorCode(err))
	}
	if _, _, err := r.Run(ctx, sc); !errors.Is(err, ErrStopping) {
		t.Errorf("Run after Shutdown: %v, want ErrStopping", err)
	}
	if _, _, err := r.Receive(ctx, &db.Session{Name: "received", Scenario: json.RawMessage("{}")}, func() {}); !errors.Is(err, ErrStopping) {
		t.Errorf("Receive after Shutdown: %v, want ErrStopping", err)
	}
	if list, err := d.Sessions(ctx, 0); err != nil || len(list) != 0 {
		t.Errorf("sessions stored: %d (%v), want none", len(list), err)
	}
}

// TestShutdownStopsWaitingAtItsDeadline: a session that does not end when
// stopped holds Shutdown only until its context ends; it then says so.
func TestShutdownStopsWaitingAtItsDeadline(t *testing.T) {
	d := openStore(t)
	m := &stuck{inside: make(chan struct{}), release: make(chan struct{})}
	r := &Runner{DB: d, ModelFor: func(*scenario.Scenario) (delegation.Model, error) { return m, nil }}
	id, err := r.Start(context.Background(), heldScenario(t))
	if err != nil {
		t.Fatal(err)
	}
	<-m.inside
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = r.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a stuck session: %v, want the deadline's error", err)
	}
	if !r.Running(id) {
		t.Error("the stuck session is no longer held, though it has not ended")
	}
	// Released, it ends, stopped by the shutdown, and Wait sees it recorded.
	close(m.release)
	r.Wait()
	if s, err := d.Session(context.Background(), id); err != nil || s.Status != delegation.StatusInterrupted {
		t.Errorf("the session once released: %+v, %v; want interrupted", s, err)
	}
}
