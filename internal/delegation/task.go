package delegation

import (
	"encoding/json"
	"fmt"
	"strings"
)

// taskDescriptionHead and taskDescriptionTail frame the list of subagents in
// the task tool's description (delegation.md §3). The text is ours.
const taskDescriptionHead = `Launch an ephemeral subagent to carry out a multi-step task in a context of its own, and get back its final report.

Available subagent types, and what each is for:
`

const taskDescriptionTail = `

When to use it:
- Multi-step work whose intermediate steps (searches, file reads, trial and error) would crowd your own context: only the result comes back to you.
- Several independent tasks: send several task calls in one message and they run concurrently.

When not to use it:
- Work you can do yourself in a step or two.
- Work whose intermediate steps you need to see: only the final report comes back.

How to use it:
1. Each invocation is stateless, unless the subagent inherits your conversation: you cannot send it further messages and it cannot ask you anything. Write a self-contained description with every detail the subagent needs, and say exactly what it should return.
2. Files the subagent writes are shared with you; its todo list is not.
3. The report is shown to you, not to the user: relay what matters to the user yourself.`

// ForkSuffix ends a fork subagent's line of the task description. It is
// load-bearing: without it "each invocation is stateless" is the only signal
// the model gets, and it may refuse to delegate to a fork.
const ForkSuffix = " (This subagent inherits your full conversation and system prompt: you need not restate context, only describe the task.)"

// NestedRefusal is the task tool's result in a fork child (§3.1).
const NestedRefusal = "You are a subagent and cannot delegate to another subagent. Complete this task yourself instead of calling this tool again."

// UnknownTypeMessage is the task tool's result for a subagent_type that names
// no subagent (§3.2): text for the model, not an error that stops the run.
func UnknownTypeMessage(name string, allowed []string) string {
	quoted := make([]string, len(allowed))
	for i, n := range allowed {
		quoted[i] = "`" + n + "`"
	}
	return fmt.Sprintf("We cannot invoke subagent %s because it does not exist, the only allowed types are %s", name, strings.Join(quoted, ", "))
}

// TaskDescription is the task tool's description for a list of subagents:
// the fixed text with one line per subagent, `- {name}: {description}`, in
// list order, a fork subagent's line ending with ForkSuffix.
func TaskDescription(subagents []*Subagent) string {
	var b strings.Builder
	b.WriteString(taskDescriptionHead)
	for i, s := range subagents {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(s.Name)
		b.WriteString(": ")
		b.WriteString(s.Description)
		if s.Mode == ModeFork {
			b.WriteString(ForkSuffix)
		}
	}
	b.WriteString(taskDescriptionTail)
	return b.String()
}

func newTaskTool(subagents []*Subagent) *tool {
	return &tool{def: ToolDef{
		Name:        TaskToolName,
		Description: TaskDescription(subagents),
		Parameters: schema([]string{"description", "subagent_type"},
			"description", prop("string", "The complete task for the subagent: self-contained, with every detail it needs and what it should return."),
			"subagent_type", prop("string", "Which subagent to use: one of the names listed above.")),
	}}
}

// taskArgs are the task tool's arguments. There is no mode: it is fixed in
// the subagent's spec.
type taskArgs struct {
	Description  string `json:"description"`
	SubagentType string `json:"subagent_type"`
}

func parseTaskArgs(args json.RawMessage) (taskArgs, error) {
	var a taskArgs
	if err := decodeArgs(TaskToolName, args, &a); err != nil {
		return a, err
	}
	return a, required(TaskToolName, "description", a.Description, "subagent_type", a.SubagentType)
}
