package templates

import "unicode"

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

// GlossOf is the English gloss of a text in Chinese, or "" when the text
// has no Chinese or no gloss is known.
func GlossOf(text string) string {
	for _, r := range text {
		if unicode.Is(unicode.Han, r) {
			return glossary[text]
		}
	}
	return ""
}
