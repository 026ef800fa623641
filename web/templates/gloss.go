package templates

import (
	"sort"
	"strings"
	"sync"
	"unicode"
)

// glossary glosses in English the Chinese texts the lessons take from the
// articles (a lesson's test checks that every one has its gloss), so that a
// receipt or a description in Chinese can be read by everyone.
var glossary = map[string]string{
	"子 Agent 的最终报告：结论是 42。": "The subagent's final report: the conclusion is 42.",
	"3 条线索": "3 leads",
	"查资料的":  "looks things up",
	"接对话的":  "continues the conversation",
	"独立干活的": "works on its own",
}

// GlossOf is the English gloss of a text in Chinese: the whole text's, or
// else that of each known phrase it holds ("“3 条线索”: 3 leads"); "" when
// it has no Chinese or none is known.
func GlossOf(text string) string {
	han := false
	for _, r := range text {
		if unicode.Is(unicode.Han, r) {
			han = true
			break
		}
	}
	if !han {
		return ""
	}
	if g, ok := glossary[text]; ok {
		return g
	}
	var parts []string
	for _, zh := range phrases() {
		if strings.Contains(text, zh) {
			parts = append(parts, "“"+zh+"”: "+glossary[zh])
		}
	}
	return strings.Join(parts, "; ")
}

// phrases are the glossary's texts, longest first, for a stable order.
var phrases = sync.OnceValue(func() []string {
	out := make([]string, 0, len(glossary))
	for zh := range glossary {
		out = append(out, zh)
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
})
