package session

import (
	"context"
	"fmt"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/trace"
	"github.com/delegationstudio/studio/internal/view"
)

// View returns a session's page state and a read of its store at the same
// seq, so a page drawn from the two is one moment of the session. The state
// is the running session's own (a copy), or the one stored when it ended;
// a session without one (stored before views were, or left by a crash) has
// its log folded once, and the result stored when the session is over.
// Close the reader.
func (r *Runner) View(ctx context.Context, id string) (*view.State, db.PageReader, error) {
	if live := r.Live(id); live != nil {
		for {
			st := live.Clone()
			rd, err := r.DB.ReadPage(ctx, id)
			if err != nil {
				return nil, nil, err
			}
			if rd.Session().LastSeq <= st.Seq {
				return st, rd, nil
			}
			// Stored but not folded in yet: it will be in a moment.
			rd.Close()
			if err := live.Wait(ctx, rd.Session().LastSeq); err != nil {
				return nil, nil, err
			}
		}
	}
	rd, err := r.DB.ReadPage(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if live := r.Live(id); live != nil {
		rd.Close() // it started in between
		return r.View(ctx, id)
	}
	blob, seq, err := rd.View(ctx, view.SnapshotVersion)
	if err != nil {
		rd.Close()
		return nil, nil, err
	}
	if blob != nil && seq == rd.Session().LastSeq {
		st, err := view.Restore(blob)
		if err == nil {
			return st, rd, nil
		}
		r.logger().Warn("stored view unreadable; folding the log", "session", id, "err", err)
	}
	// Folded from the store's cursors: the log is never all in memory.
	src := rd.Reader(ctx)
	h := src.Head()
	st, err := view.FromLog(h.Session, view.BudgetOf(h.Scenario), src.Log())
	if err != nil {
		rd.Close()
		return nil, nil, fmt.Errorf("session %s: %w", id, err)
	}
	st.Seq = rd.Session().LastSeq
	if st.Session.Status != delegation.StatusRunning {
		if b, err := st.MarshalJSON(); err == nil {
			if err := r.DB.SaveView(ctx, id, st.Seq, view.SnapshotVersion, b); err != nil {
				r.logger().Warn("store a folded view", "session", id, "err", err)
			}
		}
	}
	return st, rd, nil
}

// ContextOf resolves a call's context against lists made once by Lists, for
// a view that resolves many calls.
func ContextOf(lists map[string][]trace.Message, call trace.ModelCall) []trace.Message {
	var out []trace.Message
	for _, r := range call.Context {
		list := lists[r.AgentID]
		if r.From < 0 || r.To > len(list) || r.From > r.To {
			continue // a trace from Parse never has one; a view must not panic on it
		}
		out = append(out, list[r.From:r.To]...)
	}
	return out
}

// Lists returns each agent's message list: its messages in the order they
// were added.
func Lists(t *trace.Trace) map[string][]trace.Message {
	lists := map[string][]trace.Message{}
	for _, m := range t.Messages {
		lists[m.AgentID] = append(lists[m.AgentID], m)
	}
	return lists
}
