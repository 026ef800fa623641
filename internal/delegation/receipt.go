package delegation

import (
	"fmt"
	"strings"
)

// receiptText is the report a child sends back (delegation.md §5): its
// structured response as compact JSON when it has one; otherwise the text of
// its last assistant message with non-empty text, trailing white space
// trimmed (tool calls are not text); otherwise "".
func receiptText(child *agent) string {
	if child.structuredAnswer != "" {
		return child.structuredAnswer
	}
	for i := len(child.msgs) - 1; i >= 0; i-- {
		m := child.msgs[i]
		if m.Role != RoleAssistant {
			continue
		}
		if text := strings.TrimRight(m.Content, " \t\r\n"); strings.TrimSpace(text) != "" {
			return text
		}
	}
	return ""
}

// failureReceipt is the receipt of a child that failed (§9): it says what
// happened so the parent can decide what to do next.
func failureReceipt(name string, err error) string {
	return fmt.Sprintf("Subagent '%s' failed: %v. Its task is not done; retry with a clearer description, "+
		"try another subagent, or continue without it.", name, err)
}
