package delegation

// ForkPreamble opens a fork child's first user message, before the task
// description (delegation.md §4). The text is ours.
const ForkPreamble = "The messages above are a prior conversation, which you now continue as the subagent just invoked " +
	"for the task below. You cannot delegate further: a task call will be refused. Use the facts already " +
	"established above rather than asking for them again.\n\nYour task:\n\n"

// childStart is everything a child starts from: its system prompt, the
// history it inherits (as ranges of its parent's lists), its opening
// message, and its tools.
type childStart struct {
	system    string
	inherited []Range
	opening   Message
	tools     []*tool
}

// isolatedContext is what an isolated child sees: the spec's system prompt,
// one user message holding the description verbatim, and its own tools,
// never task. None of the parent's messages.
func isolatedContext(t *Team, s *Subagent, description string) childStart {
	return childStart{
		system:  s.SystemPrompt,
		opening: Message{Role: RoleUser, Content: description, Kind: KindTask},
		tools:   t.childTools(s),
	}
}

// forkContext is what a fork child sees: the parent's system prompt, a blank
// line, then the spec's; the parent's effective history without the
// in-flight assistant message that holds this task call; one user message of
// preamble and description; and the parent's tools, task included, unchanged,
// so the prompt prefix matches the parent's and a prompt cache stays warm.
func forkContext(parent *agent, s *Subagent, description string) childStart {
	system := parent.system
	switch {
	case system == "":
		system = s.SystemPrompt
	case s.SystemPrompt != "":
		system += "\n\n" + s.SystemPrompt
	}
	tools := append([]*tool(nil), parent.tools...)
	if s.structured != nil {
		tools = append(tools, &s.structured.tool)
	}
	return childStart{
		system:    system,
		inherited: withoutLast(parent.history),
		opening:   Message{Role: RoleUser, Content: ForkPreamble + description, Kind: KindForkPreamble},
		tools:     tools,
	}
}

// withoutLast drops the last message of a history: the in-flight assistant
// message, which is always the parent's newest.
func withoutLast(h []Range) []Range {
	out := append([]Range(nil), h...)
	if n := len(out); n > 0 {
		out[n-1].To--
		if out[n-1].Len() == 0 {
			out = out[:n-1]
		}
	}
	return out
}
