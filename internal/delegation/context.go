package delegation

// ForkPreamble opens a fork child's first user message, before the task
// description (delegation.md §4). The text is ours, of the size of
// deepagents' FORK_TASK_PREAMBLE (567 characters, deepagentsjs
// src/middleware/subagents.ts:156, npm deepagents 1.14.1) and saying what it
// says, the sentence that the child is the subagent already invoked
// included: without it a fork reading its parent's task call may take the
// request to delegate as its own.
const ForkPreamble = "[What comes before this message is an earlier conversation, which you now carry on as the subagent " +
	"that was just called. Whatever it says about handing work to a subagent has already happened: you are " +
	"that subagent, not an agent asked to delegate again. A task call of yours will be refused, so do this " +
	"work yourself. Rely on the exact facts, figures, names and identifiers already established above, and " +
	"do not give a generic answer when those details are right there in the conversation. The task you are to " +
	"carry out, and nothing else, follows this note.]\n\n"

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
// never task. None of the parent's messages. deepagents drops the parent's
// messages, todos and structured response from the state it hands the
// child and sets messages to [HumanMessage(description)]
// (middleware/subagents.py:537-539, with _EXCLUDED_STATE_KEYS at 252-256).
func isolatedContext(t *Team, s *Subagent, description string) childStart {
	return childStart{
		system:  s.SystemPrompt,
		opening: Message{Role: RoleUser, Content: description, Kind: KindTask},
		tools:   t.childTools(s, nil),
	}
}

// forkContext is what a fork child sees: the parent's own system prompt, a
// blank line, then the spec's (deepagentsjs resolveForkSystemPrompt,
// src/middleware/subagents.ts:562), and after them the sections its tools
// bring, as the parent's come after its prompt (systemPrompt); the parent's effective history without
// the in-flight assistant message that holds this task call
// (stripInFlightAIMessage and getEffectiveMessages, :485 and :874-877); one user
// message of preamble and description; and the parent's tools, task
// included, unchanged, so the prompt prefix matches the parent's and a
// prompt cache stays warm — unless the spec lists tools of its own.
func forkContext(parent *agent, t *Team, s *Subagent, description string) childStart {
	system := parent.prompt
	switch {
	case system == "":
		system = s.SystemPrompt
	case s.SystemPrompt != "":
		system += "\n\n" + s.SystemPrompt
	}
	return childStart{
		system:    system,
		inherited: withoutLast(parent.history),
		opening:   Message{Role: RoleUser, Content: ForkPreamble + description, Kind: KindForkPreamble},
		tools:     t.childTools(s, parent.tools),
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
