package session

import (
	"context"
	"fmt"

	"github.com/delegationstudio/studio/internal/db"
	"github.com/delegationstudio/studio/internal/delegation"
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
