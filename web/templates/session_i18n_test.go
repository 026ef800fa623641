package templates

import (
	"context"
	"testing"

	"github.com/delegationstudio/studio/internal/i18n"
	"github.com/delegationstudio/studio/internal/view"
)

func TestRoundText(t *testing.T) {
	en, zh := i18n.With(context.Background(), i18n.Get(i18n.English)), i18n.With(context.Background(), i18n.Get(i18n.Chinese))
	for _, c := range []struct {
		r      view.PlacedRound
		en, zh string
	}{
		{view.PlacedRound{Number: 2, Members: 3, Parallel: true, Step: 5}, "round 2 · 3 at once · step 5", "第 2 轮 · 3 个同时 · 第 5 步"},
		{view.PlacedRound{Number: 1, Members: 1, Step: 1200}, "round 1 · step 1200", "第 1 轮 · 第 1200 步"},
		{view.PlacedRound{Number: 4, Members: 1}, "round 4", "第 4 轮"},
	} {
		if got := TreeWords(en).Round(c.r); got != c.en {
			t.Errorf("%+v in English: %q; want %q", c.r, got, c.en)
		}
		if got := TreeWords(zh).Round(c.r); got != c.zh {
			t.Errorf("%+v in Chinese: %q; want %q", c.r, got, c.zh)
		}
	}
}

func TestNodeLabel(t *testing.T) {
	en := i18n.With(context.Background(), i18n.Get(i18n.English))
	n := view.PlacedNode{AgentID: "a2", Name: "researcher", Mode: "isolated", Status: "done", Calls: 3, Tokens: 1200,
		Task: "Research part 1 of\nthe payments service."}
	want := "a2 researcher, isolated subagent, done: 3 model calls, 1,200 input tokens. Task: Research part 1 of the payments service."
	if got := nodeLabel(en, n); got != want {
		t.Errorf("nodeLabel: %q; want %q", got, want)
	}
	r := view.PlacedNode{ParentID: "main", Name: "nobody", Status: "refused", Reason: "unknown_type"}
	mark, _, asked := TreeWords(en).Refused(r)
	if mark != "refused" || asked != "asked by main" {
		t.Errorf("a refusal's words: %q, %q", mark, asked)
	}
}
