// The third article's loop (subagent patterns), transliterated from its
// Python to Anthropic's TypeScript SDK: runAgent, the first article's
// agentic loop; SUBAGENT_TOOL, a tool whose one argument is the task; and
// spawnSubagent, the same loop on fresh messages with read-only tools. The
// tools run on the scenario's files, in memory. Its base URL is the
// studio's recording endpoint (e2e/anthropic_test.go), which answers from
// the scenario's script.
//
// Usage: node loop.mjs STUDIO_URL SCENARIO.json
//   STREAM=1 streams each call (client.messages.stream); SESSION=NAME sends
//   X-Studio-Session. It prints, as one JSON line, the main agent's answer
//   and the tool_result each subagent call sent back.
import { readFileSync } from "node:fs";
import { client as studioClient } from "./client.mjs";

const [url, scenarioPath] = process.argv.slice(2);
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
const files = scenario.files ?? {};
const client = studioClient(url);
const MODEL = "claude-opus-5-5";
const stream = process.env.STREAM === "1";

// create is client.messages.create, or its streamed form put together by
// the SDK's own MessageStream.
async function create(params) {
  if (stream) return client.messages.stream(params).finalMessage();
  return client.messages.create(params);
}

// runAgent is the first article's agentic loop, reused as is: it runs to
// the end and returns the final text.
async function runAgent(userInput, tools, maxSteps = 20) {
  const messages = [{ role: "user", content: userInput }];
  for (let step = 0; step < maxSteps; step++) {
    const resp = await create({ model: MODEL, max_tokens: 8000, tools, messages });
    messages.push({ role: "assistant", content: resp.content });
    if (resp.stop_reason !== "tool_use") {
      return resp.content.find((b) => b.type === "text")?.text ?? "";
    }
    const results = [];
    for (const block of resp.content) {
      if (block.type === "tool_use") {
        const [out, err] = await executeTool(block.name, block.input); // the tool layer
        results.push({ type: "tool_result", tool_use_id: block.id, content: out, ...(err ? { is_error: true } : {}) });
      }
    }
    messages.push({ role: "user", content: results });
  }
  return "(子任务达到步数上限未完成)";
}

const SUBAGENT_TOOL = {
  name: "subagent",
  description:
    "派一个子 Agent 独立完成一项子任务，返回结论摘要。" +
    "适合：大范围搜索/调研、读大量文件定位问题等探索型工作。" +
    "不适合：需要与用户交互的任务。",
  input_schema: {
    type: "object",
    properties: {
      task: { type: "string", description: "子任务描述，要自包含：目标、范围、期望的返回格式" },
    },
    required: ["task"],
    additionalProperties: false,
  },
};

const READ_FILE = {
  name: "read_file",
  description: "Read a file.",
  input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
};
const GREP = {
  name: "grep",
  description: "Search the files under a path for a regular expression; each match as path:line:text.",
  input_schema: {
    type: "object",
    properties: { pattern: { type: "string" }, path: { type: "string" } },
    required: ["pattern"],
  },
};
const LIST_DIR = {
  name: "list_dir",
  description: "List a directory.",
  input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
};

// spawnSubagent derives a child: its own messages and a narrowed,
// read-only tool surface.
async function spawnSubagent(task) {
  const readonlyTools = [READ_FILE, GREP, LIST_DIR]; // no write tools
  try {
    const summary = await runAgent(task, readonlyTools);
    return [summary || "(子任务无输出)", false];
  } catch (e) {
    return [`子 Agent 执行失败:${e.constructor.name}:${e.message}`, true];
  }
}

const receipts = [];

// executeTool runs one tool; it returns its output and whether it failed.
async function executeTool(name, input) {
  const under = (dir) => Object.keys(files).filter((p) => p.startsWith(dir.replace(/\/?$/, "/"))).sort();
  switch (name) {
    case "subagent": {
      const receipt = await spawnSubagent(input.task);
      receipts.push(receipt[0]);
      return receipt;
    }
    case "read_file":
      return input.path in files ? [files[input.path], false] : [`no such file: ${input.path}`, true];
    case "list_dir": {
      const dir = input.path.replace(/\/?$/, "/");
      const names = [...new Set(under(dir).map((p) => p.slice(dir.length).split("/")[0]))];
      return names.length ? [names.join("\n"), false] : [`no such directory: ${input.path}`, true];
    }
    case "grep": {
      const re = new RegExp(input.pattern);
      const hits = under(input.path ?? "/").flatMap((p) =>
        files[p].split("\n").flatMap((line, i) => (re.test(line) ? [`${p}:${i + 1}:${line}`] : [])),
      );
      return [hits.join("\n") || "no match", false];
    }
    default:
      return [`unknown tool: ${name}`, true];
  }
}

// The main agent: the base tools, and SUBAGENT_TOOL added to them.
const answer = await runAgent(scenario.prompt, [READ_FILE, GREP, LIST_DIR, SUBAGENT_TOOL]);
process.stdout.write(JSON.stringify({ answer, receipts }) + "\n");
