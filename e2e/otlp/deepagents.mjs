// A real deepagents run, traced as people trace theirs: LangChain's
// OpenInference instrumentation and the OpenTelemetry Node SDK, exporting
// OTLP protobuf to the studio's /v1/traces. deepagents plays a studio
// scenario with a scripted chat model (../deepagents/scripted.mjs, a
// BaseChatModel subclass), its tool calls in OpenAI's form as ChatOpenAI
// writes them, so the run is the same every time and needs no key and no
// network.
//
// The scenario is by default the lesson "received-deepagents": the main
// agent writes /order.md, then delegates in one message to the built-in
// general-purpose subagent (isolated: it sees only its task) and to a fork
// ("forker": it continues the parent's conversation, where the order
// number is) — the same delegation the lesson runs in our engine.
//
// Usage: node deepagents.mjs STUDIO_URL [SCENARIO.json]
//   STUDIO_TOKEN  sent as Authorization: Bearer, when set
//   GATE=1        the main agent's last turn waits for a line on stdin, so
//                 a test can look at the session while it is still running
import { NodeSDK, tracing, resources } from "@opentelemetry/sdk-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { LangChainInstrumentation } from "@arizeai/openinference-instrumentation-langchain";
import * as CallbackManagerModule from "@langchain/core/callbacks/manager";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { scriptedDeepAgent } from "../deepagents/scripted.mjs";

const [url, file = new URL("../../internal/lessons/scenarios/received-deepagents.json", import.meta.url)] = process.argv.slice(2);
if (!url) {
  console.error("usage: node deepagents.mjs STUDIO_URL [SCENARIO.json]");
  process.exit(2);
}
const scenario = JSON.parse(readFileSync(file, "utf8"));
const headers = process.env.STUDIO_TOKEN ? { Authorization: `Bearer ${process.env.STUDIO_TOKEN}` } : {};
const sdk = new NodeSDK({
  resource: resources.defaultResource().merge(resources.resourceFromAttributes({ "service.name": "deepagents-order-number" })),
  // Spans go out soon after they end, so the studio shows the run as it goes.
  spanProcessors: [new tracing.BatchSpanProcessor(new OTLPTraceExporter({ url: url + "/v1/traces", headers }), { scheduledDelayMillis: 20 })],
});
sdk.start();
new LangChainInstrumentation().manuallyInstrument(CallbackManagerModule);

// The gate: the main agent's last turn waits for a line on stdin.
let gate = Promise.resolve();
if (process.env.GATE === "1") {
  gate = new Promise((resolve) => {
    const rl = createInterface({ input: process.stdin });
    rl.once("line", () => {
      rl.close(); // stdin no longer keeps the program alive
      resolve();
    });
  });
}
const { agent, input } = scriptedDeepAgent(scenario, {
  openAIToolCalls: true,
  beforeTurn: async (who, turn, last) => {
    if (who === "main" && last) {
      console.log("waiting"); // the test looks at the running session now
      await gate;
    }
  },
});
try {
  const result = await agent.invoke(input, { recursionLimit: 10_000 });
  console.log("files:", Object.keys(result.files ?? {}).sort().join(" "));
} finally {
  await sdk.shutdown(); // sends what is left
}
