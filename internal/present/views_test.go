package present

import (
	"strings"
	"testing"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
)

// sessionOnly is a page read that knows only its session's row.
type sessionOnly struct {
	db.PageReader
	s *db.Session
}

func (r sessionOnly) Session() *db.Session { return r.s }

// TestForkPreamblePreview: a fork's opening message is the fixed preamble,
// then its task; the pane's preview names the preamble and shows the task.
func TestForkPreamblePreview(t *testing.T) {
	task := "Find the boiling point of water at sea level."
	p := &Page{rd: sessionOnly{s: &db.Session{ID: "s"}}}
	v := p.MessageView(db.Message{Message: trace.Message{ID: "a1.0", AgentID: "a1", Role: "user", Kind: string(delegation.KindForkPreamble),
		Content: delegation.ForkPreamble + task}})
	if !strings.HasPrefix(v.Preview, "[the fork preamble, ") || !strings.HasSuffix(v.Preview, task) || !v.More {
		t.Fatalf("preview %q (more %v)", v.Preview, v.More)
	}
}
