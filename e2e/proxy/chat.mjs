// ChatOpenAI as the tests use it, offline. When it streams, ChatOpenAI
// estimates the usage itself, and LangChain fetches the BPE ranks for that
// from https://tiktoken.pages.dev/js/ENCODING.json (retrying for minutes
// when it cannot). This module answers those requests in the process from
// js-tiktoken's bundled ranks — the same document, pinned in e2e/package.json
// — so LangChain's own code runs unchanged. Requests to loopback (the
// studio) go through; any other is refused, loudly: the tests must not need
// the internet.
import { ChatOpenAI } from "@langchain/openai";

const ranksHost = "https://tiktoken.pages.dev/js/";
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  if (url.startsWith(ranksHost)) {
    const name = url.slice(ranksHost.length).replace(/\.json$/, "");
    if (!/^[a-z0-9_]+$/.test(name)) return new Response("not found", { status: 404 });
    const ranks = (await import(`js-tiktoken/ranks/${name}`)).default;
    return new Response(JSON.stringify(ranks), { headers: { "Content-Type": "application/json" } });
  }
  const host = new URL(url).hostname;
  if (host !== "127.0.0.1" && host !== "localhost" && host !== "[::1]") {
    throw new Error(`the e2e client tried to reach ${url}: the tests run offline`);
  }
  return realFetch(input, init);
};

export { ChatOpenAI };
