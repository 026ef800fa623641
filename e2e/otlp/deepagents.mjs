// A real deepagents run, traced as people trace theirs: LangChain's
// OpenInference instrumentation and the OpenTelemetry Node SDK, exporting
// OTLP protobuf to the studio's /v1/traces. The model is a fake chat model
// (a BaseChatModel subclass) that plays a script, its tool calls in OpenAI's
// form as ChatOpenAI writes them, so the run is the same every time and
// needs no key and no network.
//
// The main agent writes /order.md, then delegates in one message to the
// built-in general-purpose subagent (isolated: it sees only its task) and
// to a fork ("forker", mode "fork": it continues the parent's conversation,
// where the order number is). The same delegation is the studio's lesson
// "received-deepagents", run by its own engine.
//
// Usage: node deepagents.mjs STUDIO_URL
//   STUDIO_TOKEN  sent as Authorization: Bearer, when set
//   GATE=1        the main agent's last turn waits for a line on stdin, so
//                 a test can look at the session while it is still running
import { NodeSDK, tracing, resources } from "@opentelemetry/sdk-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain";
import * as CallbackManagerModule from "@langchain/core/callbacks/manager";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage } from "@langchain/core/messages";
import { createDeepAgent } from "deepagents";
import { createInterface } from "node:readline";

const url = process.argv[2];
if (!url) {
  console.error("usage: node deepagents.mjs STUDIO_URL");
  process.exit(2);
}
const headers = process.env.STUDIO_TOKEN ? { Authorization: `Bearer ${process.env.STUDIO_TOKEN}` } : {};
const sdk = new NodeSDK({
  resource: resources.defaultResource().merge(resources.resourceFromAttributes({ "service.name": "deepagents-order-number" })),
  // Spans go out soon after they end, so the studio shows the run as it goes.
  spanProcessors: [new tracing.BatchSpanProcessor(new OTLPTraceExporter({ url: url + "/v1/traces", headers }), { scheduledDelayMillis: 20 })],
});
sdk.start();
new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);

export const PROMPT = "Note the order number, then have two helpers report it.";
export const GP_TASK = "List the files, write /seen.md saying which files you found, and report whether you can see an order number.";
export const FORK_TASK = "Report the order number above.";
const PREAMBLE = "[The messages above are a prior conversation";

let nextID = 0;
function call(name, args) {
  return { id: "call_" + ++nextID, name, args };
}
// An answer as ChatOpenAI writes it: tool calls both parsed and in OpenAI's
// additional_kwargs form.
function ai(content, calls = []) {
  return new AIMessage({
    content,
    tool_calls: calls.map((c) => ({ ...c, type: "tool_call" })),
    additional_kwargs: calls.length
      ? { tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })) }
      : {},
  });
}

let release = () => {};
const gate = process.env.GATE === "1"
  ? new Promise((resolve) => {
      release = resolve;
    })
  : Promise.resolve();
if (process.env.GATE === "1") {
  const rl = createInterface({ input: process.stdin });
  rl.once("line", () => {
    rl.close(); // stdin no longer keeps the program alive
    release();
  });
}

const scripts = {
  main: [
    () => ai("", [call("write_file", { file_path: "/order.md", content: "Order A-7731" })]),
    () => ai("", [call("task", { description: GP_TASK, subagent_type: "general-purpose" }), call("task", { description: FORK_TASK, subagent_type: "forker" })]),
    async () => {
      console.log("waiting"); // the test looks at the running session now
      await gate;
      return ai("The isolated helper could not see the order number; the fork reported A-7731.");
    },
  ],
  "general-purpose": [
    () => ai("", [call("ls", { path: "/" })]),
    () => ai("", [call("write_file", { file_path: "/seen.md", content: "Files: /order.md" })]),
    () => ai("I cannot see any order number; the files are /order.md and /seen.md."),
  ],
  forker: [(context) => ai(context.includes("A-7731") ? "A-7731" : "I cannot see any order number.")],
};

// What the model reads of a message: its text and its tool calls.
function readable(m) {
  const text = typeof m.content === "string" ? m.content : JSON.stringify(m.content);
  return text + JSON.stringify(m.tool_calls ?? []);
}

class ScriptedChatModel extends BaseChatModel {
  _llmType() {
    return "scripted";
  }
  bindTools() {
    return this;
  }
  // The agent is told by the last user message it got; the step by the
  // answers it gave since.
  async _generate(messages) {
    let last = -1;
    messages.forEach((m, i) => {
      if (m._getType() === "human") last = i;
    });
    const human = typeof messages[last]?.content === "string" ? messages[last].content : "";
    const agent = human === PROMPT ? "main" : human === GP_TASK ? "general-purpose" : human.startsWith(PREAMBLE) ? "forker" : "?";
    const step = messages.slice(last + 1).filter((m) => m._getType() === "ai").length;
    const turn = scripts[agent]?.[step];
    if (!turn) throw new Error(`no scripted turn for agent ${agent}, step ${step}`);
    const msg = await turn(messages.map(readable).join("\n"));
    return { generations: [{ text: typeof msg.content === "string" ? msg.content : "", message: msg }] };
  }
}

const agent = createDeepAgent({
  model: new ScriptedChatModel({}),
  subagents: [{ name: "forker", description: "Reports facts back", systemPrompt: "Answer briefly.", mode: "fork" }],
});
try {
  const result = await agent.invoke({ messages: [{ role: "user", content: PROMPT }] });
  console.log("files:", Object.keys(result.files ?? {}).sort().join(" "));
} finally {
  await sdk.shutdown(); // sends what is left
}
