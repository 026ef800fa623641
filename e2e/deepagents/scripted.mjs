// A studio scenario played by deepagents JS (the npm package pinned in
// e2e/package.json): a scripted chat model per agent that plays the
// scenario's script, so deepagents runs the same delegation our engine does,
// deterministically and offline. e2e/deepagents/run.mjs (the differential
// tests) and e2e/otlp/deepagents.mjs (the OTLP tests) both use it.
//
// Only what those tests use is supported: the main agent's system prompt,
// write_todos in its tools and max_steps (run.mjs), subagents (name, description, system_prompt,
// mode, tools, response_format), files, and a script of
// content and tool-call turns (cases too). deepAgentOf builds the same team
// on any chat model: e2e/proxy/deepagents.mjs puts ChatOpenAI there, pointed
// at the studio's recording endpoint.

import { createDeepAgent } from "deepagents";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { todoListMiddleware } from "langchain";

// scriptedDeepAgent builds the deepagents agent of a scenario. It returns
// the agent, its input (the prompt and the scenario's files) and calls,
// which fills with every model call deepagents made: who called (main or
// the subagent's name, and which invocation), the messages and the tools.
// Options: openAIToolCalls also writes each answer's tool calls in OpenAI's
// form (additional_kwargs.tool_calls), as ChatOpenAI does; beforeTurn(agent,
// turn, last) runs, and is awaited, before each scripted turn is played.
export function scriptedDeepAgent(scenario, { openAIToolCalls = false, beforeTurn = async () => {} } = {}) {
  const script = scenario.script ?? {};
  const calls = [];

  // The task calls of the main agent's script, in call order: a child's
  // invocation number is its place among the calls to its subagent, as in our
  // engine (formats.md §1), whatever order deepagents starts them in.
  const taskCalls = [];
  for (const turn of script.main ?? []) {
    for (const tc of turn.tool_calls ?? []) {
      if (tc.name === "task") taskCalls.push({ type: tc.args.subagent_type, description: tc.args.description, taken: false });
    }
  }
  function invocationOf(type, description) {
    let n = 0;
    for (const c of taskCalls) {
      if (c.type !== type) continue;
      if (!c.taken && description.endsWith(c.description)) {
        c.taken = true;
        return n;
      }
      n++;
    }
    throw new Error(`no task call to ${type} for ${JSON.stringify(description)}`);
  }

  function text(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((b) => (typeof b === "string" ? b : b.text ?? "")).join("");
    return "";
  }

  function role(m) {
    switch (m._getType()) {
      case "system": return "system";
      case "human": return "user";
      case "ai": return "assistant";
      case "tool": return "tool";
    }
    return m._getType();
  }

  // holds reports whether a case's condition holds for what the model receives.
  function holds(when, messages) {
    if (!when) return true;
    const all = messages.map((m) => text(m.content) + JSON.stringify(m.tool_calls ?? [])).join("\n");
    if (when.context_contains !== undefined && !all.includes(when.context_contains)) return false;
    if (when.context_lacks !== undefined && all.includes(when.context_lacks)) return false;
    return true;
  }

  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

  // ScriptedModel plays the script of one subagent (name), or of the main
  // agent and the built-in general-purpose subagent, which deepagents gives
  // the main agent's model.
  class ScriptedModel extends BaseChatModel {
    constructor(name) {
      super({});
      this.agentName = name;
      this.cursors = new Map(); // conversation key → { agent, invocation, next }
      this.boundTools = [];
    }
    _llmType() { return "scripted"; }
    bindTools(tools) {
      const m = Object.create(this);
      m.boundTools = tools;
      return m;
    }
    cursorFor(messages) {
      const conv = messages.filter((m) => role(m) !== "system");
      const first = conv[0];
      if (this.agentName === "main" && first && role(first) === "user" && text(first.content) === scenario.prompt) {
        return this.cursor("main", "main", 0);
      }
      // A prompt over 200,000 characters reaches the model as a pointer to
      // the file it was moved to (the FilesystemMiddleware tags it
      // lc_evicted_to); a fork child's conversation holds it too, before
      // its preamble.
      const preamble = conv.some((m) => role(m) === "user" && text(m.content).startsWith("[The messages above"));
      if (this.agentName === "main" && first && role(first) === "user" && first.additional_kwargs?.lc_evicted_to &&
          scenario.prompt.length > 200_000 && !preamble) {
        return this.cursor("main", "main", 0);
      }
      // A child: its task message is its first (isolated) or its fork preamble.
      const task = [...conv].reverse().find((m) => role(m) === "user" && text(m.content).startsWith("[The messages above")) ?? first;
      const name = this.agentName === "main" ? "general-purpose" : this.agentName;
      if (!this.cursors.has(task.id)) {
        this.cursor(task.id, name, invocationOf(name, text(task.content)));
      }
      return this.cursors.get(task.id);
    }
    cursor(key, agent, invocation) {
      if (!this.cursors.has(key)) this.cursors.set(key, { agent, invocation, next: 0 });
      return this.cursors.get(key);
    }
    async _generate(messages) {
      const c = this.cursorFor(messages);
      calls.push({
        agent: c.agent,
        invocation: c.invocation,
        messages: messages.map((m) => ({
          role: role(m),
          text: text(m.content),
          tool_calls: (m.tool_calls ?? []).map((tc) => ({ name: tc.name, args: tc.args })),
          is_error: m.status === "error",
        })),
        tools: (this.boundTools ?? []).map((t) => t.name ?? t.function?.name),
      });
      const turns = c.agent === "main" ? script.main : (script[c.agent] ?? [])[c.invocation];
      let turn = (turns ?? [])[c.next];
      if (!turn) throw new Error(`script for ${c.agent} (invocation ${c.invocation}) ran out at turn ${c.next}`);
      const at = c.next++;
      if (turn.cases) turn = turn.cases.find((k) => holds(k.when, messages));
      await beforeTurn(c.agent, at, at === turns.length - 1);
      if (turn.delay_ms) await sleep(turn.delay_ms);
      const toolCalls = (turn.tool_calls ?? []).map((tc, j) => ({
        id: tc.id ?? `call_${c.agent}_${c.invocation}_${at}_${j}`, name: tc.name, args: tc.args ?? {}, type: "tool_call",
      }));
      const message = new AIMessage({
        content: turn.content ?? "",
        tool_calls: toolCalls,
        additional_kwargs: openAIToolCalls && toolCalls.length > 0
          ? { tool_calls: toolCalls.map((tc) => ({ id: tc.id, type: "function", function: { name: tc.name, arguments: JSON.stringify(tc.args) } })) }
          : {},
      });
      return { generations: [{ text: turn.content ?? "", message }] };
    }
  }

  const { agent, input } = deepAgentOf(scenario, (name) => new ScriptedModel(name));
  return { agent, input, calls };
}

// deepAgentOf builds the deepagents agent of a scenario's team, each agent
// on the chat model modelFor(name) gives ("main", or a subagent's name), and
// its input: the prompt and the scenario's files.
export function deepAgentOf(scenario, modelFor) {
  // write_todos comes from langchain's todo middleware: listed in an
  // agent's tools, it turns that agent's todo list on. A fork mirrors the
  // main agent's middleware, todos included.
  const todos = (tools) => (Array.isArray(tools) && tools.includes("write_todos") ? { middleware: [todoListMiddleware()] } : {});
  const agent = createDeepAgent({
    model: modelFor("main"),
    ...(scenario.agent?.system_prompt ? { systemPrompt: scenario.agent.system_prompt } : {}),
    ...todos(scenario.agent?.tools),
    subagents: (scenario.subagents ?? []).map((s) => ({
      name: s.name,
      description: s.description,
      systemPrompt: s.system_prompt ?? "",
      ...(s.mode ? { mode: s.mode } : {}),
      // The studio's tools are names from its stack. deepagents' tools are
      // tool objects added to the filesystem tools its middleware brings,
      // so a list of stack names adds none of its own.
      ...(Array.isArray(s.tools) ? { tools: [] } : {}),
      ...todos(s.tools),
      // A JSON Schema with a title: langchain makes it a tool of that name
      // (ToolStrategy, as the scripted model declares no native support).
      ...(s.response_format ? { responseFormat: s.response_format } : {}),
      model: modelFor(s.name),
    })),
  });

  const now = new Date().toISOString();
  const files = {};
  for (const [path, content] of Object.entries(scenario.files ?? {})) {
    files[path] = { content, mimeType: "text/plain", created_at: now, modified_at: now };
  }
  return { agent, input: { messages: [new HumanMessage(scenario.prompt)], files } };
}
