package view_test

import (
	"context"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/scenario"
	"github.com/delegationstudio/studio/internal/session"
	"github.com/delegationstudio/studio/internal/view"
)

const slowChild = `{"name": "slow", "prompt": "go",
 "subagents": [{"name": "helper", "description": "Helps."}],
 "script": {
  "main": [{"tool_calls": [{"name": "task", "args": {"description": "Think slowly.", "subagent_type": "helper"}}]}, {"content": "done"}],
  "helper": [[{"content": "first", "tool_calls": [{"name": "ls", "args": {"path": "/"}}]}, {"content": "never", "delay_ms": 60000}]]}}`

// TestStoppedBy: a session stopped from outside while its child thinks
// carries why as a code, on the session and on each agent the stop ended;
// a log written before the code (only the English errors) still reads as
// interrupted, its error shown as it was.
func TestStoppedBy(t *testing.T) {
	sc, err := scenario.Parse([]byte(slowChild))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	var events []delegation.Event
	childCalls := 0
	sink := delegation.SinkFunc(func(e delegation.Event) {
		if e.Seq > 0 {
			events = append(events, e)
		}
		if e.Type == delegation.EventModelStarted && e.AgentID != "main" {
			if childCalls++; childCalls == 2 { // the child's long turn
				stop(delegation.Stopped{By: delegation.StopUser})
			}
		}
	})
	if _, err := session.Run(ctx, sc, session.RunOptions{SessionID: "s", Sink: sink}); err != nil {
		t.Fatal(err)
	}
	st, err := view.Build(view.Meta{ID: "s"}, events)
	if err != nil {
		t.Fatal(err)
	}
	if st.Session.Status != delegation.StatusInterrupted || st.Session.StoppedBy != delegation.StopUser || len(st.Agents) != 2 {
		t.Fatalf("session %+v, %d agents", st.Session, len(st.Agents))
	}
	for _, a := range st.Agents {
		if a.Status != delegation.StatusInterrupted || a.StoppedBy != delegation.StopUser || strings.Contains(a.Error, "context canceled") {
			t.Errorf("agent %s: %s by %q: %s", a.ID, a.Status, a.StoppedBy, a.Error)
		}
	}

	// The same log as written before stopped_by.
	old := make([]delegation.Event, len(events))
	for i, e := range events {
		switch d := e.Payload.(type) {
		case delegation.AgentFinished:
			if d.StoppedBy != "" {
				d.StoppedBy, d.Error = "", "context canceled"
			}
			e.Payload = d
		case delegation.SessionFinished:
			d.StoppedBy, d.Error = "", "the session was stopped"
			e.Payload = d
		}
		old[i] = e
	}
	st, err = view.Build(view.Meta{ID: "s"}, old)
	if err != nil {
		t.Fatal(err)
	}
	if st.Session.Status != delegation.StatusInterrupted || st.Session.StoppedBy != "" || st.Session.Error != "the session was stopped" {
		t.Fatalf("old log: session %+v", st.Session)
	}
	for _, a := range st.Agents {
		if a.Status != delegation.StatusInterrupted || a.StoppedBy != "" {
			t.Errorf("old log: agent %s: %s by %q", a.ID, a.Status, a.StoppedBy)
		}
	}
}
