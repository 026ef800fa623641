package scripted

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/delegationstudio/studio/internal/delegation"
)

const (
	summaryLineRunes = 76 // one message's line, "- " included
	summaryHead      = 2  // messages shown from the start of a long history…
	summaryTail      = 3  // …and from its end, with a count of those between
)

// AutoSummary is the summary the scripted model writes when the script has
// no summary turn: a header with the number of messages folded, then a line
// per message (the first few and the last few of a long history), each cut
// to fit. It is deterministic and a few hundred characters at most, however
// long the history.
func AutoSummary(msgs []*delegation.Message) string {
	// Tool results name no tool; the calls folded with them say which.
	toolNames := map[string]string{}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		for _, tc := range m.ToolCalls {
			toolNames[tc.ID] = tc.Name
		}
	}
	var b strings.Builder
	b.WriteString("Summary of ")
	b.WriteString(plural(len(msgs), "earlier message"))
	b.WriteString(":")
	line := func(m *delegation.Message) {
		b.WriteString("\n")
		b.WriteString(cut("- "+describe(m, toolNames), summaryLineRunes))
	}
	if len(msgs) <= summaryHead+summaryTail+1 {
		for _, m := range msgs {
			line(m)
		}
		return b.String()
	}
	for _, m := range msgs[:summaryHead] {
		line(m)
	}
	b.WriteString("\n- … ")
	b.WriteString(plural(len(msgs)-summaryHead-summaryTail, "more message"))
	b.WriteString(" …")
	for _, m := range msgs[len(msgs)-summaryTail:] {
		line(m)
	}
	return b.String()
}

// describe says in brief what one message held.
func describe(m *delegation.Message, toolNames map[string]string) string {
	if m == nil {
		return "(missing message)"
	}
	text := squeeze(m.Content)
	switch m.Role {
	case delegation.RoleUser:
		switch m.Kind {
		case delegation.KindSummary:
			return "earlier summary: " + text
		case delegation.KindTask, delegation.KindForkPreamble:
			return "the task: " + text
		}
		return "the user: " + text
	case delegation.RoleAssistant:
		var calls []string
		for _, tc := range m.ToolCalls {
			calls = append(calls, tc.Name+"("+keyArg(tc.Args)+")")
		}
		switch {
		case len(calls) == 0:
			return "the agent: " + text
		case text == "":
			return "the agent called " + strings.Join(calls, ", ")
		default:
			return "the agent called " + strings.Join(calls, ", ") + ": " + text
		}
	case delegation.RoleTool:
		name := toolNames[m.ToolCallID]
		if name == "" {
			name = "a tool"
		}
		switch {
		case m.IsError:
			return name + " failed: " + text
		case m.Kind == delegation.KindReceipt:
			return "the report came back: " + text
		case m.Kind == delegation.KindRefusal:
			return name + " was refused: " + text
		}
		return name + " returned: " + text
	}
	return string(m.Role) + ": " + text
}

// keyArg is the one argument that says most about a call: the path it works
// on, the pattern it looks for, or the subagent it starts.
func keyArg(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	for _, k := range []string{"file_path", "path", "pattern", "subagent_type"} {
		if s, ok := m[k].(string); ok {
			return cut(squeeze(s), 30)
		}
	}
	return ""
}

// squeeze folds white space runs, newlines included, into single spaces so
// each message stays on its line.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// cut shortens s to at most n runes, marking the cut with "…".
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return strings.TrimRight(s[:i], " ") + "…"
}
