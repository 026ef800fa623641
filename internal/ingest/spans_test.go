package ingest_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/ingest"
	"github.com/delegationstudio/studio/internal/trace"
)

// collect is a Sink that keeps every event, encoded as a store would.
type collect struct {
	mu     sync.Mutex
	events []delegation.Event
	live   []delegation.Event // seq 0: live only, never stored
}

func (c *collect) Emit(ev delegation.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.Seq == 0 {
		c.live = append(c.live, ev)
		return
	}
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

func loadBatch(t *testing.T, path string) ingest.Batch {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var td interface{ SpanCount() int }
	var b ingest.Batch
	if strings.HasSuffix(path, ".json") {
		tr, err := ingest.DecodeJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		td, b = tr, ingest.Group(tr)
	} else {
		tr, err := ingest.DecodeProto(raw)
		if err != nil {
			t.Fatal(err)
		}
		td, b = tr, ingest.Group(tr)
	}
	if td.SpanCount() == 0 {
		t.Fatal("no spans")
	}
	return b
}

// assemble feeds a trace's spans to an ingest.Trace in batches of n, in the order
// given, and closes it.
func assemble(spans []ingest.Span, n int) (*collect, *ingest.Trace) {
	sink := &collect{}
	tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
	for i := 0; i < len(spans); i += n {
		tr.Add(spans[i:min(i+n, len(spans))])
	}
	tr.Close("", "", time.Time{})
	return sink, tr
}

func only(t *testing.T, b ingest.Batch) []ingest.Span {
	t.Helper()
	if len(b.Order) != 1 {
		t.Fatalf("%d traces, want 1", len(b.Order))
	}
	return b.Traces[b.Order[0]]
}

const (
	gpTask   = "List the files, write /seen.md saying which files you found, and report whether you can see an order number."
	forkTask = "Report the order number above."
)

// checkDeepagents checks the session made of the recorded deepagents run:
// three agents, what each child first received, both receipts in the
// parent's context, the files, and every span accounted for.
func checkDeepagents(t *testing.T, tr *trace.Trace) {
	t.Helper()
	type agent struct{ name, parent, mode, task string }
	var got []agent
	for _, a := range tr.Agents {
		got = append(got, agent{a.Name, deref(a.ParentID), deref(a.Mode), deref(a.TaskCallID)})
	}
	want := []agent{{"main", "-", "-", "-"}, {"general-purpose", "main", "isolated", "call_2"}, {"forker", "main", "fork", "call_3"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("agents = %v, want %v", got, want)
	}
	lists := trace.Lists(tr)
	first := map[string]trace.ModelCall{}
	var last trace.ModelCall
	for _, c := range tr.ModelCalls {
		if _, ok := first[c.AgentID]; !ok {
			first[c.AgentID] = c
		}
		if c.AgentID == "main" {
			last = c
		}
	}
	t.Run("the isolated child sees only its task", func(t *testing.T) {
		c := first["a1"]
		ctx := trace.ContextOf(lists, c)
		if fmt.Sprint(c.Context) != "[{a1 0 1}]" || len(ctx) != 1 || ctx[0].Content != gpTask || ctx[0].Kind != "task" {
			t.Fatalf("first context %v = %+v", c.Context, ctx)
		}
		if !strings.HasPrefix(c.SystemPrompt, "In order to complete the objective") {
			t.Errorf("system prompt %q: the text blocks of input.value are read", c.SystemPrompt)
		}
	})
	t.Run("the fork begins with the parent's history, then its task", func(t *testing.T) {
		c := first["a2"]
		ctx := trace.ContextOf(lists, c)
		if got, want := fmt.Sprint(c.Context), "[{main 0 3} {a2 0 1}]"; got != want {
			t.Fatalf("context = %s, want %s: the inherited prefix is a range of the parent's list", got, want)
		}
		end := ctx[len(ctx)-1]
		if end.Kind != "fork_preamble" || !strings.HasSuffix(end.Content, forkTask) {
			t.Errorf("its last message = %+v", end)
		}
		seen := false
		for _, m := range ctx {
			for _, tc := range m.ToolCalls {
				seen = seen || strings.Contains(string(tc.Args), "A-7731")
			}
		}
		if !seen || c.InheritedTokens == 0 {
			t.Errorf("the fork should see the order number in what it inherited (inherited tokens %d)", c.InheritedTokens)
		}
	})
	t.Run("both receipts are in the parent's next context", func(t *testing.T) {
		ctx := trace.ContextOf(lists, last)
		if fmt.Sprint(last.Context) != "[{main 0 6}]" {
			t.Fatalf("the main agent's last context = %v: successive calls share their prefix", last.Context)
		}
		r1, r2 := ctx[4], ctx[5]
		if r1.Kind != "receipt" || deref(r1.ToolCallID) != "call_2" || !strings.HasPrefix(r1.Content, "I cannot see any order number") ||
			r2.Kind != "receipt" || deref(r2.ToolCallID) != "call_3" || r2.Content != "A-7731" {
			t.Errorf("receipts = %+v, %+v", r1, r2)
		}
		if len(ctx[3].ToolCalls) != 2 || ctx[3].ToolCalls[0].ID != "call_2" {
			t.Errorf("the task calls = %+v", ctx[3].ToolCalls)
		}
	})
	t.Run("messages are stored once", func(t *testing.T) {
		if got := len(tr.Messages); got != 15 {
			t.Errorf("%d messages, want 15 (main 7, general-purpose 6, forker 2)", got)
		}
	})
	t.Run("the files", func(t *testing.T) {
		if got, want := fmt.Sprint(tr.Files), "map[/order.md:Order A-7731 /seen.md:Files: /order.md]"; got != want {
			t.Errorf("files = %s, want %s", got, want)
		}
	})
	t.Run("every span is mapped or kept", func(t *testing.T) {
		kept := 0
		for _, ev := range tr.Events {
			if ev.Type == delegation.EventSpanReceived {
				kept++
			}
		}
		// 44 spans: 7 model calls, 5 tool calls, 3 agent runs, and 29 kept.
		if kept != 29 || len(tr.ModelCalls) != 7 {
			t.Errorf("%d kept spans and %d model calls; want 29 and 7", kept, len(tr.ModelCalls))
		}
	})
	t.Run("where it came from", func(t *testing.T) {
		o := tr.Session.Origin
		if o == nil || o.Kind != "otlp" || o.Service != "deepagents-order-number" || o.Convention != "openinference" ||
			fmt.Sprint(o.Instrumentation) != "[@arizeai/openinference-instrumentation-langchain 4.1.1]" || !strings.HasPrefix(o.SDK, "opentelemetry nodejs") {
			t.Errorf("origin = %+v", o)
		}
		if tr.Session.Status != "done" || tr.Session.Prompt != "Note the order number, then have two helpers report it." {
			t.Errorf("status %s, prompt %q", tr.Session.Status, tr.Session.Prompt)
		}
	})
}

func TestDeepagentsTrace(t *testing.T) {
	for _, file := range []string{"testdata/deepagents.otlp.json", "testdata/deepagents.otlp.pb"} {
		spans := only(t, loadBatch(t, file))
		if len(spans) != 44 {
			t.Fatalf("%s: %d spans, want the 44 of a real run", file, len(spans))
		}
		t.Run(file+" in one request", func(t *testing.T) {
			sink, _ := assemble(spans, len(spans))
			checkDeepagents(t, sink.build(t))
		})
	}
	spans := only(t, loadBatch(t, "testdata/deepagents.otlp.json"))
	// As an exporter sends them: in the order they ended.
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].End.Before(spans[j].End) })
	t.Run("one span at a time, children before their parents", func(t *testing.T) {
		sink, _ := assemble(spans, 1)
		checkDeepagents(t, sink.build(t))
	})
	t.Run("in batches, each in any order", func(t *testing.T) {
		// An exporter sends its batches one after another, each holding the
		// spans that ended since the last, in whatever order.
		rng := rand.New(rand.NewPCG(1, 2))
		for round := 0; round < 20; round++ {
			sink := &collect{}
			tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
			for i := 0; i < len(spans); {
				n := 1 + rng.IntN(9)
				b := append([]ingest.Span(nil), spans[i:min(i+n, len(spans))]...)
				rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
				tr.Add(b)
				i += n
			}
			tr.Close("", "", time.Time{})
			checkDeepagents(t, sink.build(t))
		}
	})
	t.Run("live: the tree grows while the run goes on", func(t *testing.T) {
		sink := &collect{}
		tr := ingest.NewTrace(ingest.Config{SessionID: "s1", Tokenizer: "approx", Counter: wordCounter{}, Sink: sink})
		var agentsAt []int
		for i := range spans {
			tr.Add(spans[i : i+1])
			sink.mu.Lock()
			n := 0
			for _, ev := range sink.events {
				if ev.Type == delegation.EventAgentStarted {
					n++
				}
			}
			sink.mu.Unlock()
			agentsAt = append(agentsAt, n)
		}
		if agentsAt[len(agentsAt)-1] != 3 || agentsAt[len(agentsAt)/4] == 3 || tr.Complete() != true {
			t.Errorf("agents after each span: %v; complete %v", agentsAt, tr.Complete())
		}
		if tr.Session().Finished() {
			t.Error("the session ends when the receiver closes it, not before")
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
