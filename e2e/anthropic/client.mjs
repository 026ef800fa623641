// Anthropic's official TypeScript SDK (@anthropic-ai/sdk, pinned in
// e2e/package.json) as the tests use it: its base URL the studio's, no
// retries (a failure is the test's to see), and a fetch that refuses any
// host but loopback, loudly: the tests must not need the internet.
import Anthropic from "@anthropic-ai/sdk";

function loopbackOnly(input, init) {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const host = new URL(url).hostname;
  if (host !== "127.0.0.1" && host !== "localhost" && host !== "[::1]") {
    throw new Error(`the e2e client tried to reach ${url}: the tests run offline`);
  }
  return fetch(input, init);
}

// client is an Anthropic client of the studio at studioURL; SESSION, when
// set, is sent as X-Studio-Session.
export function client(studioURL) {
  return new Anthropic({
    baseURL: studioURL,
    apiKey: "sk-ant-the-callers-own",
    maxRetries: 0,
    fetch: loopbackOnly,
    defaultHeaders: process.env.SESSION ? { "X-Studio-Session": process.env.SESSION } : {},
  });
}
