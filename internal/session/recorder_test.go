package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/view"
)

// published records what a recorder hands its publisher, a publish at a
// time.
type published struct {
	mu     sync.Mutex
	groups [][]delegation.Event
	merged []view.Changes
	came   chan struct{} // a stored batch was published
}

func (p *published) Publish(_ string, events []delegation.Event, ch view.Changes, _ *Live) {
	if events[0].Seq == 0 {
		return // live-only streamed text
	}
	p.mu.Lock()
	p.groups = append(p.groups, append([]delegation.Event(nil), events...))
	p.merged = append(p.merged, ch)
	p.mu.Unlock()
	select {
	case p.came <- struct{}{}:
	default:
	}
}

func (p *published) all() ([][]delegation.Event, []view.Changes) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groups, p.merged
}

// gated answers "ls" once, holds its second call until released, then
// answers: the session waits in the middle for as long as the test wants.
type gated struct {
	calls   int
	mu      sync.Mutex
	release chan struct{}
}

func (m *gated) Generate(ctx context.Context, _ *delegation.Request) (*delegation.Response, error) {
	m.mu.Lock()
	m.calls++
	n := m.calls
	m.mu.Unlock()
	ls := &delegation.Response{ToolCalls: []delegation.ToolCall{{Name: "ls", Args: json.RawMessage(`{"path": "/"}`)}}}
	switch n {
	case 1:
		return ls, nil
	case 2:
		select {
		case <-m.release:
			return ls, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &delegation.Response{Content: "done"}, nil
}

func recorded(t *testing.T, every time.Duration, model delegation.Model) (*published, *db.DB, string, func()) {
	t.Helper()
	d, err := db.Open(context.Background(), filepath.Join(t.TempDir(), "studio.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	sc, err := scenario.Parse([]byte(`{"name": "rec", "prompt": "Look.", "script": {"main": [
		{"tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "done"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	id := "rec"
	if err := d.CreateSession(context.Background(), &db.Session{ID: id, Name: "rec", Prompt: "Look.", Scenario: sc.Raw}); err != nil {
		t.Fatal(err)
	}
	pub := &published{came: make(chan struct{}, 1)}
	rec := newRecorderEvery(d, id, nil, pub, nil, nil, 1, every)
	run := func() {
		if _, err := Run(context.Background(), sc, RunOptions{SessionID: id, Sink: rec, Model: model}); err != nil {
			t.Error(err)
		}
		if err := rec.Close(); err != nil {
			t.Error(err)
		}
	}
	return pub, d, id, run
}

// checkPublished: every stored event was published once, in order, and
// each publish's changes are what folding its events as one batch gives.
func checkPublished(t *testing.T, d *db.DB, id string, groups [][]delegation.Event, merged []view.Changes) {
	t.Helper()
	sess, err := d.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	twin := view.New(view.Meta{ID: id})
	next := int64(1)
	for i, g := range groups {
		var ch view.Changes
		for _, ev := range g {
			if ev.Seq != next {
				t.Fatalf("publish %d holds seq %d where %d was due", i, ev.Seq, next)
			}
			next++
			if err := twin.ApplyTo(ev, &ch); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(ch, merged[i]) {
			t.Errorf("publish %d (seqs %d–%d): its changes\n %+v\nare not its events' folded as one batch\n %+v", i, g[0].Seq, g[len(g)-1].Seq, merged[i], ch)
		}
	}
	if next-1 != sess.LastSeq || groups[len(groups)-1][len(groups[len(groups)-1])-1].Type != delegation.EventSessionFinished {
		t.Errorf("published through seq %d, stored through %d", next-1, sess.LastSeq)
	}
}

// TestRecorderPublishesBatchesTogether: batches committed within the
// interval after a publish go out as one publish, their changes merged,
// the last at once when the session ends. With an interval longer than
// the session, that is exactly two: the first batch, and all the rest.
func TestRecorderPublishesBatchesTogether(t *testing.T) {
	pub, d, id, run := recorded(t, time.Hour, nil)
	run()
	groups, merged := pub.all()
	if len(groups) != 2 || len(groups[0]) != 1 {
		t.Fatalf("%d publishes of %v events; want the first batch (of one event), then the rest together", len(groups), lens(groups))
	}
	checkPublished(t, d, id, groups, merged)
}

// TestRecorderPublishesWhatItHolds: batches held for the interval are
// published when it is over though nothing else comes: a session waiting
// on its model shows everything up to there.
func TestRecorderPublishesWhatItHolds(t *testing.T) {
	m := &gated{release: make(chan struct{})}
	pub, d, id, run := recorded(t, 20*time.Millisecond, m)
	done := make(chan struct{})
	go func() { run(); close(done) }()
	// The second call's model.started is stored while the model holds it:
	// it must reach the publisher with nothing after it.
	deadline := time.After(time.Minute)
	for {
		groups, _ := pub.all()
		n := 0
		for _, g := range groups {
			for _, ev := range g {
				if ev.Type == delegation.EventModelStarted {
					n++
				}
			}
		}
		if n == 2 {
			break
		}
		select {
		case <-pub.came:
		case <-deadline:
			t.Fatalf("the second call's start was never published while the model held it: %v", lens(groups))
		}
	}
	close(m.release)
	<-done
	groups, merged := pub.all()
	checkPublished(t, d, id, groups, merged)
}

func lens(groups [][]delegation.Event) []int {
	var out []int
	for _, g := range groups {
		out = append(out, len(g))
	}
	return out
}
