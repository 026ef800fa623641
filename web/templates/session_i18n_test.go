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
