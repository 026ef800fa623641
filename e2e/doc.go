// Package e2e holds the browser tests of Delegation Studio: they drive the
// real studio binary in a real Chromium and assert on the pages through their
// data-testid hooks.
//
// `go test ./e2e/` (and `make test`, which installs Chromium first with
// `make chromium`) builds ./cmd/studio once into a temporary directory, starts
// one headless Chromium (/usr/bin/chromium, with a fresh profile) through
// chromedp, and for each test runs `studio serve` on a free 127.0.0.1 port
// with a database of its own, in a fresh browser context. Nothing leaves
// 127.0.0.1. Without Chromium the tests fail and say to run `make chromium`.
//
// Screenshots of the key moments (and of the page whenever a wait times out)
// are saved as PNG files in e2e/artifacts/, which git ignores and CI keeps.
//
// deepagents_test.go holds the differential tests: the scenarios in
// e2e/deepagents/scenarios/ run through our engine and through deepagents
// (JS, the npm package pinned in e2e/package.json and its lockfile, which
// `make test` installs into e2e/node_modules with npm ci), driven by
// e2e/deepagents/run.mjs, and what every model call received is compared.
// otlp_test.go drives real clients that send OTLP traces to the studio;
// proxy_test.go drives deepagents on LangChain's ChatOpenAI, whose base URL
// is the studio's recording endpoint (e2e/proxy/); anthropic_test.go drives
// Anthropic's TypeScript SDK through its Messages endpoint (e2e/anthropic/),
// and deepagents on @langchain/anthropic's ChatAnthropic through the same
// endpoint to a fake Anthropic upstream (e2e/proxy/deepagents.mjs, PROVIDER=anthropic).
//
// The package has no code of its own: everything is in its _test.go files.
package e2e
