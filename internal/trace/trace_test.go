package trace_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/schema"
)

func runExample(t *testing.T) (*scenario.Scenario, []delegation.Event) {
	t.Helper()
	doc, err := os.ReadFile("../../examples/order-number.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := scenario.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var events []delegation.Event
	_, err = session.Run(context.Background(), sc, session.RunOptions{SessionID: "s1",
		Sink: delegation.SinkFunc(func(e delegation.Event) {
			if e.Seq > 0 {
				events = append(events, e)
			}
		})})
	if err != nil {
		t.Fatal(err)
	}
	return sc, events
}

func TestBuild(t *testing.T) {
	sc, events := runExample(t)
	tr, err := trace.Build(trace.Meta{ID: "s1", Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(tr)
	t.Run("it validates against the published schema", func(t *testing.T) {
		if errs := schema.ValidateTrace(doc); len(errs) > 0 {
			t.Fatalf("invalid: %v", errs)
		}
	})
	t.Run("agents, messages and model calls come from the log", func(t *testing.T) {
		if len(tr.Agents) != 2 || tr.Agents[0].ParentID != nil || *tr.Agents[1].ParentID != "main" || *tr.Agents[1].Mode != "fork" {
			t.Fatalf("agents = %+v", tr.Agents)
		}
		if tr.Session.Status != "done" || tr.Session.Name != "order-number" || tr.Session.Tokenizer != "o200k_base" {
			t.Fatalf("session = %+v", tr.Session)
		}
		if len(tr.ModelCalls) != 4 {
			t.Fatalf("model calls = %d", len(tr.ModelCalls))
		}
		if got := tr.Files["/order.md"]; got != "Order A-7731" {
			t.Fatalf("files = %v", tr.Files)
		}
	})
	t.Run("each message is written once: events refer to it by id", func(t *testing.T) {
		for _, ev := range tr.Events {
			if ev.Type != delegation.EventMessageAdded {
				continue
			}
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			if _, inline := d["message"]; inline || d["message_id"] == nil {
				t.Fatalf("message.added data = %s", ev.Data)
			}
		}
	})
	t.Run("a fork's first call starts with a range of its parent's list", func(t *testing.T) {
		child := tr.Agents[1].ID
		for _, c := range tr.ModelCalls {
			if c.AgentID == child {
				if c.Context[0].AgentID != "main" || c.Context[len(c.Context)-1].AgentID != child {
					t.Fatalf("context = %+v", c.Context)
				}
				return
			}
		}
		t.Fatal("no call of the child")
	})
	t.Run("a session cut short is running, or what the store says, with its files replayed", func(t *testing.T) {
		var cut []delegation.Event
		for _, e := range events {
			if e.Type == delegation.EventDelegationStarted {
				break
			}
			cut = append(cut, e)
		}
		tr, err := trace.Build(trace.Meta{ID: "s1", Status: delegation.StatusInterrupted}, cut)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Session.Status != delegation.StatusInterrupted || tr.Files["/order.md"] != "Order A-7731" || tr.Files["/README.md"] != "hello" {
			t.Fatalf("status %s, files %v", tr.Session.Status, tr.Files)
		}
	})
}

func TestInflate(t *testing.T) {
	sc, events := runExample(t)
	tr, err := trace.Build(trace.Meta{ID: "s1", Scenario: sc.Raw}, events)
	if err != nil {
		t.Fatal(err)
	}
	inflated, err := trace.Inflate(tr)
	if err != nil {
		t.Fatal(err)
	}
	again, err := trace.Build(trace.Meta{ID: "s1", Scenario: sc.Raw}, inflated)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(tr)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Fatalf("a trace inflated and built again differs:\n%s\n%s", a, b)
	}
}
