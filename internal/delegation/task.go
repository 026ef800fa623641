package delegation

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// taskDescriptionHead and taskDescriptionTail frame the list of subagents in
// the task tool's description (delegation.md §3). The text is ours, saying
// what deepagents' TASK_TOOL_DESCRIPTION says (middleware/subagents.py:285-296)
// at the size the articles measured: 1,419 characters with the default
// list.
const taskDescriptionHead = `Launch an ephemeral subagent to carry out a complex, multi-step task in a context window of its own, and get back one final report.

Available subagent types and what each one is for:
`

const taskDescriptionTail = `

Set subagent_type to choose one. Usage notes:
- Independent tasks can run at the same time: send several task calls in a single message and they run concurrently.
- Each call is stateless, unless the subagent's line says it inherits your conversation: the subagent sees only the description you write and returns one final report. Put every detail in the description and say exactly what the report should contain.
- The report comes back to you, not to the user: the user never sees it, so relay what matters in your own reply. Its files come back to you too.
- Say whether the subagent should create content, analyse, or only research, since it cannot see what the user asked for.
- When a subagent's description says to use it proactively, do so without waiting to be asked.
- When general-purpose is the only subagent, use it for any complex, context-heavy task; it has the same tools as you.`

// ForkSuffix ends a fork subagent's line of the task description, at the
// size of deepagents' FORKED_SUBAGENT_TOOL_NOTE (86 characters, deepagentsjs
// src/middleware/subagents.ts:134). It is load-bearing: without it "each
// call is stateless" is the only signal the model gets, and it may refuse
// to delegate to a fork.
const ForkSuffix = " (inherits your whole conversation and system prompt: no need to restate the context)"

// NestedRefusal is the task tool's result in a fork child (§3.1): deepagents'
// FORK_RECURSION_REFUSAL, returned as the tool's text when the state carries
// the fork marker (deepagentsjs src/middleware/subagents.ts:48 and :848).
const NestedRefusal = "You are a subagent and cannot delegate to another subagent. Complete this task yourself instead of calling this tool again."

// UnknownTypeMessage is the task tool's result for a subagent_type that names
// no subagent (§3.2): text for the model, not an error that stops the run
// (middleware/subagents.py:547-549; deepagentsjs throws instead,
// src/middleware/subagents.ts:852-858, and ends the run: we follow Python).
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
			"description", prop("string", "The whole task for the subagent to carry out on its own: give it every piece of context it needs and say what form its report should take."),
			"subagent_type", prop("string", "Which subagent to run. It must be one of the subagent types listed in this tool's description.")),
	}}
}

// taskArgs are the task tool's arguments. There is no mode: it is fixed in
// the subagent's spec.
type taskArgs struct {
	Description  string `json:"description"`
	SubagentType string `json:"subagent_type"`
}

// parseTaskArgs reads a task call's arguments. An argument the tool does
// not take is refused, naming it, so the model learns its invented key
// went nowhere (**Better**: deepagents validates the call against
// TaskToolSchema, middleware/subagents.py:272-282, whose pydantic model
// ignores extra keys, and deepagentsjs's zod object strips them; with
// lenient set, as under compat "deepagents", they are dropped the same way).
// An empty description or subagent_type is refused too (**Ours**: a child
// with nothing to do helps no one); with lenient set the call goes ahead,
// as in deepagents.
func parseTaskArgs(args json.RawMessage, lenient bool) (taskArgs, error) {
	var a taskArgs
	if err := decodeArgs(TaskToolName, args, &a); err != nil {
		return a, err
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(args, &all)
	if lenient {
		// deepagents' schema takes any string, the empty one too: a task
		// with an empty description starts a child whose message is empty
		// (deepagentsjs taskToolSchema, z.string(), src/middleware/
		// subagents.ts:930-939, and [new HumanMessage({content:
		// description})] at :883; Python's TaskToolSchema, description: str,
		// middleware/subagents.py:272-282). Only a missing argument fails.
		var missing []string
		for _, k := range []string{"description", "subagent_type"} {
			if v, ok := all[k]; !ok || string(v) == "null" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return a, toolErrorf("Invalid arguments for %s: missing %s.", TaskToolName, strings.Join(missing, ", "))
		}
		return a, nil
	}
	var extra []string
	for k := range all {
		if k != "description" && k != "subagent_type" {
			extra = append(extra, "'"+k+"'")
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return a, toolErrorf("Invalid arguments for task: it takes only description and subagent_type, not %s; "+
			"put everything the subagent needs in description and call task again.", strings.Join(extra, ", "))
	}
	return a, required(TaskToolName, "description", a.Description, "subagent_type", a.SubagentType)
}
