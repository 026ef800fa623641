package templates

import (
	"context"
	"regexp"
	"strings"

	"github.com/delegationstudio/studio/internal/delegation"
	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/view"
)

// The tree's texts the layout measures in English (internal/view), said in
// the page's language: the layout keeps the boxes' sizes, the words change.

var (
	roundN    = regexp.MustCompile(`^round (\d+)$`)
	atOnce    = regexp.MustCompile(`^(\d+) at once$`)
	roundStep = regexp.MustCompile(`^step (\d+)$`)
)

// roundText is a round's label ("round 2 · 3 at once · step 5").
func roundText(ctx context.Context, r view.PlacedRound) string {
	if i18n.From(ctx).Code == i18n.English {
		return r.Text
	}
	parts := strings.Split(r.Text, " · ")
	for i, p := range parts {
		switch {
		case roundN.MatchString(p):
			parts[i] = T(ctx, "sess.round", "N", roundN.FindStringSubmatch(p)[1])
		case atOnce.MatchString(p):
			parts[i] = T(ctx, "sess.round_parallel", "N", atOnce.FindStringSubmatch(p)[1])
		case roundStep.MatchString(p):
			parts[i] = T(ctx, "sess.round_step", "N", roundStep.FindStringSubmatch(p)[1])
		}
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
