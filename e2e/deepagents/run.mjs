// Runs a Delegation Studio scenario through deepagents (JS, the npm package
// pinned in e2e/package.json) with a scripted chat model that plays the
// scenario's script (scripted.mjs), and prints, as JSON, every model call
// deepagents made: who called (main or the subagent's name, and which
// invocation), the system prompt, the messages and the tool names it received.
//
//   node e2e/deepagents/run.mjs SCENARIO.json
//
// e2e/deepagents_test.go runs the same scenario through our engine and
// compares the two. Nothing here reaches the network: the model is ours.

import { readFileSync } from "node:fs";
import { scriptedDeepAgent } from "./scripted.mjs";

const scenario = JSON.parse(readFileSync(process.argv[2], "utf8"));
const { agent, input, calls } = scriptedDeepAgent(scenario);
// The studio's max_steps counts model calls; deepagents' recursionLimit
// counts graph steps, two a turn and two more, so n calls need 2n+2. The
// limit reaches every subagent through the task tool's config.
const maxSteps = scenario.agent?.max_steps;
let result, error;
try {
  result = await agent.invoke(input, { recursionLimit: maxSteps ? 2 * maxSteps + 2 : 10_000 });
} catch (e) {
  // A failed run still shows the calls it made; the test decides.
  error = `${e.name}: ${e.message}`;
}
const finalFiles = {};
for (const [path, data] of Object.entries(result?.files ?? {})) {
  if (data) finalFiles[path] = Array.isArray(data.content) ? data.content.join("\n") : data.content;
}
process.stdout.write(JSON.stringify({ calls, files: finalFiles, ...(error ? { error } : {}) }, null, 1) + "\n");
