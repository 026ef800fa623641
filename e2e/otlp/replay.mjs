// Replays an OTLP JSON document — the studio's own export, GenAI spans —
// through the OpenTelemetry Node SDK and its OTLP protobuf exporter, as a
// program instrumented with the GenAI conventions would send them: each
// span started with its parent's context, ended in the order it ended,
// with its attributes, events and status. The spans get new ids and a new
// trace id; what they say is the document's.
//
// Usage: node replay.mjs STUDIO_URL FILE.otlp.json
//   STUDIO_TOKEN  sent as Authorization: Bearer, when set
import { NodeSDK, tracing, resources } from "@opentelemetry/sdk-node";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { trace, context, ROOT_CONTEXT } from "@opentelemetry/api";
import { readFileSync } from "node:fs";

const [url, file] = process.argv.slice(2);
if (!url || !file) {
  console.error("usage: node replay.mjs STUDIO_URL FILE.otlp.json");
  process.exit(2);
}
const doc = JSON.parse(readFileSync(file, "utf8"));

// An OTLP JSON AnyValue as a JavaScript value.
function value(v) {
  if ("stringValue" in v) return v.stringValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return v.doubleValue;
  if ("boolValue" in v) return v.boolValue;
  if ("arrayValue" in v) return (v.arrayValue.values ?? []).map(value);
  return JSON.stringify(v);
}
const attrs = (list) => Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));
// Unix nanoseconds (a decimal string) as OpenTelemetry's [seconds, nanos].
const hrTime = (ns) => {
  const n = BigInt(ns);
  return [Number(n / 1000000000n), Number(n % 1000000000n)];
};

const headers = process.env.STUDIO_TOKEN ? { Authorization: `Bearer ${process.env.STUDIO_TOKEN}` } : {};
const rs = doc.resourceSpans[0];
// The replayer is a program of its own: its service is its name, and the
// studio's session naming (delegation.session.*) is not what it sends.
const resource = Object.fromEntries(Object.entries(attrs(rs.resource.attributes)).filter(([k]) => !k.startsWith("delegation.session.")));
const sdk = new NodeSDK({
  resource: resources.defaultResource().merge(resources.resourceFromAttributes({ ...resource, "service.name": "genai-replay" })),
  spanProcessors: [new tracing.BatchSpanProcessor(new OTLPTraceExporter({ url: url + "/v1/traces", headers }), { scheduledDelayMillis: 20 })],
});
sdk.start();

const started = new Map(); // the document's span id → the replayed span
for (const ss of rs.scopeSpans) {
  const tracer = trace.getTracer(ss.scope.name, ss.scope.version);
  const spans = [...ss.spans].sort((a, b) => (BigInt(a.startTimeUnixNano) < BigInt(b.startTimeUnixNano) ? -1 : 1));
  // Parents first, whatever their start times say.
  for (let left = spans; left.length > 0; ) {
    const next = [];
    for (const s of left) {
      const parent = s.parentSpanId ? started.get(s.parentSpanId) : null;
      if (s.parentSpanId && !parent && left.some((o) => o.spanId === s.parentSpanId)) {
        next.push(s);
        continue;
      }
      const ctx = parent ? trace.setSpan(context.active(), parent) : ROOT_CONTEXT;
      const span = tracer.startSpan(s.name, { kind: Math.max(0, (s.kind ?? 1) - 1), startTime: hrTime(s.startTimeUnixNano), attributes: attrs(s.attributes) }, ctx);
      started.set(s.spanId, span);
    }
    if (next.length === left.length) throw new Error("spans whose parents never start");
    left = next;
  }
  // They end, and so are exported, in the order they ended.
  const byEnd = [...ss.spans].sort((a, b) => (BigInt(a.endTimeUnixNano) < BigInt(b.endTimeUnixNano) ? -1 : 1));
  for (const s of byEnd) {
    const span = started.get(s.spanId);
    for (const e of s.events ?? []) span.addEvent(e.name, attrs(e.attributes), hrTime(e.timeUnixNano));
    if (s.status?.code) span.setStatus({ code: s.status.code, message: s.status.message });
    span.end(hrTime(s.endTimeUnixNano));
  }
}
await sdk.shutdown();
console.log(`replayed ${started.size} spans`);
