package delegation

// TodoSystemPrompt is the section an agent with write_todos finds at the end
// of its system prompt, word for word (trailing space included) langchain's
// TODO_LIST_MIDDLEWARE_SYSTEM_PROMPT (npm langchain 1.5.14, the version
// deepagents JS 1.14.1 resolves to in e2e/package-lock.json:
// dist/agents/middleware/todoListMiddleware.js:225-237). deepagents turns the
// todo list on with that middleware, and its wrapModelCall appends "\n\n" and
// this text to whatever system prompt the agent has (:305-308), an empty one
// too. A fork child's prompt is the parent's static prompt and its own, and
// the middleware, mirrored into the fork, appends the section after both
// (deepagentsjs src/middleware/subagents.ts:709-714; agent.ts:355-358).
const TodoSystemPrompt = "## `write_todos`\n\n" +
	"You have access to the `write_todos` tool to help you manage and plan complex objectives. \n" +
	"Use this tool for complex objectives to ensure that you are tracking each necessary step and giving the user visibility into your progress.\n" +
	"This tool is very helpful for planning complex objectives, and for breaking down these larger complex objectives into smaller steps.\n\n" +
	"It is critical that you mark todos as completed as soon as you are done with a step. Do not batch up multiple steps before marking them as completed.\n" +
	"For simple objectives that only require a few steps, it is better to just complete the objective directly and NOT use this tool.\n" +
	"Writing todos takes time and tokens, use it when it is helpful for managing complex many-step problems! But not for simple few-step requests.\n\n" +
	"## Important To-Do List Usage Notes to Remember\n" +
	"- The `write_todos` tool should never be called multiple times in parallel.\n" +
	"- Don't be afraid to revise the To-Do list as you go. New information may reveal new tasks that need to be done, or old tasks that are irrelevant."

// systemPrompt is the system prompt every model call of an agent receives:
// its own prompt (for a fork, the parent's and the spec's), then the
// sections its tools bring.
func systemPrompt(prompt string, tools []*tool) string { return prompt + promptSections(tools) }

// promptSections is what an agent's tools add to its system prompt: only
// write_todos adds something, a blank line and TodoSystemPrompt.
func promptSections(tools []*tool) string {
	if hasTool(tools, WriteTodosToolName) {
		return "\n\n" + TodoSystemPrompt
	}
	return ""
}

// MainPromptSections is what the main agent's tools add to its system
// prompt, paid on every model call as their definitions are; "" when they
// add nothing.
func (t *Team) MainPromptSections() string { return promptSections(t.mainTools) }
