package ingest

import (
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// collect is a Sink that keeps every event, encoded as a store would.
type collect struct {
	mu     sync.Mutex
	events []delegation.Event
}

func (c *collect) Emit(ev delegation.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

// build turns the collected log into its trace, as a store would read it.
func (c *collect) build(t *testing.T) *trace.Trace {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ev := range c.events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
	}
	tr, err := trace.Build(trace.Meta{ID: "s1"}, c.events)
	if err != nil {
		t.Fatal(err)
	}
	// What a store writes and reads back must be a valid trace.
	raw, err := json.Marshal(tr)
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := trace.Parse(raw)
	if err != nil {
		t.Fatalf("the built trace does not parse: %v", err)
	}
	return back
}

// wordCounter counts words: deterministic and easy to reason about.
type wordCounter struct{}

func (wordCounter) Count(s string) int { return len(strings.Fields(s)) }

func loadBatch(t *testing.T, path string) Batch {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var td interface{ SpanCount() int }
	var b Batch
	if strings.HasSuffix(path, ".json") {
		tr, err := DecodeJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		td, b = tr, Group(tr)
	} else {
		tr, err := DecodeProto(raw)
		if err != nil {
			t.Fatal(err)
		}
		td, b = tr, Group(tr)
	}
	if td.SpanCount() == 0 {
		t.Fatal("no spans")
	}
	return b
}

// assemble feeds a trace's spans to a Trace in batches of n, in the order
// given, and closes it.
func assemble(spans []Span, n int) (*collect, *Trace) {
	sink := &collect{}
	tr := NewTrace(Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
	for i := 0; i < len(spans); i += n {
		tr.Add(spans[i:min(i+n, len(spans))])
	}
	tr.Close("", "", time.Time{})
	return sink, tr
}

func only(t *testing.T, b Batch) []Span {
	t.Helper()
	if len(b.Order) != 1 {
		t.Fatalf("%d traces, want 1", len(b.Order))
	}
	return b.Traces[b.Order[0]]
}

func TestDeepagentsTraceDebug(t *testing.T) {
	spans := only(t, loadBatch(t, "testdata/deepagents.otlp.json"))
	sink, _ := assemble(spans, len(spans))
	tr := sink.build(t)
	for _, a := range tr.Agents {
		t.Logf("agent %s %s parent=%v mode=%v task=%v status=%s", a.ID, a.Name, deref(a.ParentID), deref(a.Mode), deref(a.TaskCallID), a.Status)
	}
	for _, m := range tr.Messages {
		t.Logf("msg %s %s %s %q calls=%v tcid=%v", m.ID, m.Role, m.Kind, m.Content, m.ToolCalls, deref(m.ToolCallID))
	}
	for _, c := range tr.ModelCalls {
		t.Logf("call %s ctx=%v sys=%q", c.ID, c.Context, c.SystemPrompt)
	}
	for _, e := range tr.Events {
		t.Logf("ev %d %s %s %s", e.Seq, e.Type, e.AgentID, string(e.Data))
	}
	t.Logf("files %v status %s", tr.Files, tr.Session.Status)
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
