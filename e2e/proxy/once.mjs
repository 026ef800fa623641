// One call of LangChain's ChatOpenAI through the studio's recording
// endpoint, for the tests of what a client sees when the upstream fails:
// it prints, as JSON, the answer or the error the client got (its HTTP
// status and message).
//
// Usage: node once.mjs STUDIO_URL PROMPT   (STREAM=1 streams)
import { ChatOpenAI } from "./chat.mjs"; // offline token counts

const [url, prompt] = process.argv.slice(2);
const model = new ChatOpenAI({
  model: "gpt-test",
  apiKey: "sk-the-callers-own",
  streaming: process.env.STREAM === "1",
  maxRetries: 0,
  configuration: { baseURL: url + "/v1" },
});
try {
  const answer = await model.invoke(prompt);
  process.stdout.write(JSON.stringify({ ok: true, content: answer.content }) + "\n");
} catch (e) {
  process.stdout.write(JSON.stringify({ ok: false, status: e.status ?? e.response?.status ?? null, message: e.message, name: e.name }) + "\n");
}
