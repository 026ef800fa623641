package templates

import (
	"context"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/view"
)

// TreeWords words the tree's texts that the layout measures (view.Wording)
// in the page's language, as the tree draws them.
func TreeWords(ctx context.Context) view.Wording { return treeWords{ctx} }

type treeWords struct{ ctx context.Context }

func (w treeWords) Round(r view.PlacedRound) string { return roundText(w.ctx, r) }

func (w treeWords) NoTask() string { return T(w.ctx, "sess.no_task") }

func (w treeWords) Refused(n view.PlacedNode) (mark, why, askedBy string) {
	return T(w.ctx, "sess.refused"), refusedWhy(w.ctx, n), T(w.ctx, "sess.asked_by", "ID", n.ParentID)
}

// roundText is a round's label ("round 2 · 3 at once · step 5").
func roundText(ctx context.Context, r view.PlacedRound) string {
	parts := []string{T(ctx, "sess.round", "N", itoa(r.Number))}
	if r.Parallel {
		parts = append(parts, T(ctx, "sess.round_parallel", "N", itoa(r.Members)))
	}
	if r.Step > 0 {
		parts = append(parts, T(ctx, "sess.round_step", "N", itoa(r.Step)))
	}
	return strings.Join(parts, " · ")
}

// nodeLabel is an agent box's accessible name.
func nodeLabel(ctx context.Context, n view.PlacedNode) string {
	what := T(ctx, "sess.node.main")
	if n.Mode != "" {
		what = T(ctx, "sess.node.sub", "Mode", n.Mode)
	}
	return T(ctx, "sess.node.label", "ID", n.AgentID, "Name", n.Name, "What", what, "Status", T(ctx, statusKey(n.Status)),
		"Calls", N(ctx, "count.model_calls", n.Calls), "Tokens", N(ctx, "count.input_tokens", n.Tokens), "Task", oneLine(n.Task))
}

// refusedWhy says why a task call was refused.
func refusedWhy(ctx context.Context, n view.PlacedNode) string {
	switch n.Reason {
	case delegation.RefusedNested:
		return T(ctx, "sess.why.nested")
	case delegation.RefusedUnknownType:
		return T(ctx, "sess.why.unknown")
	}
	return n.Reason
}

// refusedLabel is a refused delegation's accessible name.
func refusedLabel(ctx context.Context, n view.PlacedNode) string {
	return T(ctx, "sess.refused_label", "Type", n.Name, "ID", n.ParentID, "Why", refusedWhy(ctx, n))
}

// tokensBadge is an agent box's token count, compact.
func tokensBadge(ctx context.Context, n view.PlacedNode) string {
	return T(ctx, "sess.tok_badge", "N", view.CompactTokens(n.Tokens))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// todoKey is the catalogue's word for a todo's status.
func todoKey(status string) string {
	switch status {
	case "pending":
		return "todo.pending"
	case "in_progress":
		return "todo.in_progress"
	case "completed":
		return "todo.completed"
	}
	return "todo.unknown"
}
