// A real deepagents run whose model is the studio: every agent (the main
// one and each subagent) is LangChain's ChatOpenAI with its base URL set to
// the studio's recording endpoint, which forwards each call to its upstream
// and records it. With `studio serve --upstream script:SCENARIO.json` the
// upstream is the scenario's script, so deepagents plays the same turns our
// engine plays, offline, deterministically, with no key; nothing here
// knows the script.
//
// Usage: node deepagents.mjs STUDIO_URL SCENARIO.json
//   PROVIDER=anthropic  every agent is @langchain/anthropic's ChatAnthropic,
//                  its base URL the studio's (POST /v1/messages), instead of
//                  ChatOpenAI (POST /v1/chat/completions)
//   STREAM=1       the model streams its answers (streaming: true)
//   SESSION=KEY    sends X-Studio-Session: KEY with every call
//   STUDIO_TOKEN   sent as X-Studio-Token, when set
//   GATE=1         the main agent's last call (the one that carries the
//                  receipts) waits for a line on stdin before it is sent, so
//                  a test can look at the session while it is still running
// It prints, as JSON, the main agent's answer and the files at the end.
import { ChatOpenAI } from "./chat.mjs"; // offline token counts, loopback only
import { ChatAnthropic } from "@langchain/anthropic";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { deepAgentOf } from "../deepagents/scripted.mjs";

const [url, file] = process.argv.slice(2);
if (!url || !file) {
  console.error("usage: node deepagents.mjs STUDIO_URL SCENARIO.json");
  process.exit(2);
}
const scenario = JSON.parse(readFileSync(file, "utf8"));

const headers = {};
if (process.env.SESSION) headers["X-Studio-Session"] = process.env.SESSION;
if (process.env.STUDIO_TOKEN) headers["X-Studio-Token"] = process.env.STUDIO_TOKEN;

// The gate holds the first request that carries a task call's result: the
// main agent's call after its children came back.
let gate = null;
if (process.env.GATE === "1") {
  gate = new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.once("line", () => {
      rl.close();
      resolve();
    });
  });
}
let gated = false;
async function gatedFetch(input, init) {
  if (gate && !gated && typeof init?.body === "string") {
    const { messages = [] } = JSON.parse(init.body);
    const tasks = new Set(messages.flatMap((m) => (m.tool_calls ?? []).filter((c) => c.function?.name === "task").map((c) => c.id)));
    if (messages.some((m) => m.role === "tool" && tasks.has(m.tool_call_id))) {
      gated = true;
      console.log("waiting");
      await gate;
    }
  }
  return fetch(input, init);
}

const modelFor = () =>
  process.env.PROVIDER === "anthropic"
    ? new ChatAnthropic({
        model: "claude-opus-5-5",
        apiKey: "sk-ant-the-callers-own",
        streaming: process.env.STREAM === "1",
        maxRetries: 0,
        anthropicApiUrl: url,
        clientOptions: { defaultHeaders: headers, fetch: gatedFetch },
      })
    : new ChatOpenAI({
        model: "scripted",
        apiKey: "sk-not-needed-with-a-scripted-upstream",
        streaming: process.env.STREAM === "1",
        maxRetries: 0,
        configuration: { baseURL: url + "/v1", defaultHeaders: headers, fetch: gatedFetch },
      });

const { agent, input } = deepAgentOf(scenario, modelFor);
const result = await agent.invoke(input, { recursionLimit: 10_000 });
const last = result.messages[result.messages.length - 1];
const files = {};
for (const [path, data] of Object.entries(result.files ?? {})) {
  if (data) files[path] = Array.isArray(data.content) ? data.content.join("\n") : data.content;
}
// A streamed ChatAnthropic answer is content blocks: its text is theirs.
const answer =
  typeof last.content === "string"
    ? last.content
    : Array.isArray(last.content) && last.content.every((b) => b.type === "text")
      ? last.content.map((b) => b.text).join("")
      : JSON.stringify(last.content);
process.stdout.write(JSON.stringify({ answer, files }) + "\n");
