package server

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/delegation"
)

// TestChildTodosAreHeldBack: a child's write_todos is a todos.changed
// event of the log, and the delegation panel shows the list the child kept.
func TestChildTodosAreHeldBack(t *testing.T) {
	s := newStudio(t, "")
	res, _ := s.form("/", "/sessions", url.Values{"lesson": {"files-and-todos"}})
	id := sessionID(t, res)
	s.waitDone(id)

	tr, err := s.db.Trace(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var todos []delegation.Event
	for _, ev := range tr.Events {
		if ev.Type == delegation.EventTodosChanged {
			todos = append(todos, ev)
		}
	}
	if len(todos) != 1 || todos[0].AgentID != "a1" || !strings.Contains(string(todos[0].Data), "Draft the note") {
		t.Fatalf("todos.changed events: %+v", todos)
	}

	_, doc := s.get("/sessions/" + id + "?agent=a1")
	items := doc.Find(`[data-held-back="a1"] [data-testid="held-back-todos"] li`)
	if got, want := items.Length(), 2; got != want {
		t.Fatalf("held-back todos: %d items, want %d: %s", got, want, doc.Find(`[data-held-back="a1"]`).Text())
	}
	if got := items.First().Text(); !strings.Contains(got, "Draft the note") || !strings.Contains(got, "in_progress") {
		t.Fatalf("first held-back todo: %q", got)
	}
}
