package delegation

import (
	"fmt"
	"strings"
	"unicode"
)

// receiptText is the report a child sends back (delegation.md §5): its
// structured response as compact JSON when it has one; otherwise the text of
// its last assistant message with non-empty text, trailing white space
// trimmed as Python's str.rstrip() trims it (tool calls are not text);
// otherwise "". deepagents walks the child's messages back the same way
// (middleware/subagents.py:486-505: `msg.text.rstrip()`, first non-empty
// AIMessage from the end).
func receiptText(child *agent) string {
	if child.structuredAnswer != "" {
		return child.structuredAnswer
	}
	return LastText(child.msgs)
}

// LastText is the text of the last assistant message with non-empty text,
// trailing white space trimmed; "" when there is none: the receipt of a
// child without a structured response (§5), and the session's answer.
func LastText(msgs []*Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.Role != RoleAssistant {
			continue
		}
		if text := pyRStrip(m.Content); text != "" {
			return text
		}
	}
	return ""
}

// pyRStrip trims trailing white space as Python's str.rstrip() does: every
// character for which str.isspace() is true, the ideographic space U+3000
// and the other Unicode spaces included, and the separators U+001C–U+001F
// that Go's unicode.IsSpace leaves out.
func pyRStrip(s string) string {
	return strings.TrimRightFunc(s, pyIsSpace)
}

func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// failureReceipt is the receipt of a child that failed (§9): it says what
// happened so the parent can decide what to do next.
func failureReceipt(name string, err error) string {
	return fmt.Sprintf("Subagent '%s' failed: %v. Its task is not done; retry with a clearer description, "+
		"try another subagent, or continue without it.", name, err)
}
