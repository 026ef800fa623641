// One call of Anthropic's SDK through the studio's recording endpoint, for
// the tests of what a client sees when the upstream fails: it prints, as
// JSON, the answer's text or the error the SDK surfaced (its class, HTTP
// status, type and message).
//
// Usage: node once.mjs STUDIO_URL PROMPT   (STREAM=1 streams)
import { client as studioClient } from "./client.mjs";

const [url, prompt] = process.argv.slice(2);
const client = studioClient(url);
const params = { model: "claude-test", max_tokens: 64, messages: [{ role: "user", content: prompt }] };
try {
  const msg = process.env.STREAM === "1" ? await client.messages.stream(params).finalMessage() : await client.messages.create(params);
  process.stdout.write(JSON.stringify({ ok: true, text: msg.content.find((b) => b.type === "text")?.text ?? "" }) + "\n");
} catch (e) {
  process.stdout.write(
    JSON.stringify({ ok: false, name: e.name, status: e.status ?? null, type: e.type ?? null, apiMessage: e.apiMessage ?? null, body: e.error ?? null, message: e.message }) + "\n",
  );
}
