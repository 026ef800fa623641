package conformance_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/delegationstudio/studio/internal/conformance"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
)

// runTrace runs a scenario through the engine and returns its trace.
func runTrace(t *testing.T, doc string) *trace.Trace {
	t.Helper()
	sc, err := scenario.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []delegation.Event
	sink := delegation.SinkFunc(func(ev delegation.Event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Seq > 0 {
			events = append(events, ev)
		}
	})
	if _, err := session.Run(context.Background(), sc, session.RunOptions{SessionID: "s", Sink: sink}); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Build(trace.Meta{ID: "s"}, events)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestCompareListsWhatEachCallReceivedDifferently(t *testing.T) {
	raw, err := os.ReadFile("../lessons/scenarios/order-number.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := regexp.MustCompile(`"delay_ms": \d+`).ReplaceAllString(string(raw), `"delay_ms": 0`) // no waiting
	a := runTrace(t, doc)
	// The same team with another system prompt and another README: the main
	// agent's calls and the fork's see both; the isolated child neither.
	other := strings.Replace(doc, "You are a careful assistant.", "You are a hasty assistant.", 1)
	other = strings.Replace(other, "Customer desk.", "Help desk.", 1)
	b := runTrace(t, other)
	c := conformance.Compare(a, b)
	if len(c.OnlyA)+len(c.OnlyB) != 0 || len(c.Calls) != len(a.ModelCalls) {
		t.Fatalf("every call should be matched: %+v", c)
	}
	var got []string
	for _, d := range c.Calls {
		var whats []string
		for _, x := range d.Differences {
			whats = append(whats, x.What)
		}
		got = append(got, strings.TrimSpace(fmt.Sprintf("%s/%d: %s", d.Agent, d.Index, strings.Join(whats, ", ")))+fmt.Sprintf(" +%d", d.Repeated))
	}
	want := []string{
		"main/0: system prompt +0",
		"main/1: +1",
		"main/2: message 5 +1",
		"main/3: +2",
		"main/4: +2",
		"iso-reporter/0: +0",
		"fork-reporter/0: +2",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("differences:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c.Same != 1 {
		t.Errorf("%d calls the same, want 1 (the isolated child's)", c.Same)
	}
	msg := c.Calls[2].Differences[0]
	if !strings.Contains(msg.A, "Customer desk.") || !strings.Contains(msg.B, "Help desk.") {
		t.Errorf("the difference quotes %q and %q", msg.A, msg.B)
	}
	if same := conformance.Compare(a, a); same.Same != len(a.ModelCalls) {
		t.Errorf("a session compared with itself: %+v", same)
	}
}
