# Delegation Studio. `make run` and `make test` are the two set-up commands;
# both work on a fresh machine with Go installed.

GO      ?= go
BIN     := bin/studio
PKGS    := ./...

.PHONY: run build test check-fmt check-generated vet staticcheck unit chromium npm bench load fuzz generate lint clean

## run: build the studio and serve it on 127.0.0.1:7788, sessions in ./studio.db
run: build
	./$(BIN) serve --addr 127.0.0.1:7788 --db studio.db

# The commit goes in by hand too: the toolchain stamps none in a git
# worktree or with -buildvcs=false, and studio --version should say it.
COMMIT  := $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo +dirty)

build:
	$(GO) build -ldflags "-X main.buildCommit=$(COMMIT)" -o $(BIN) ./cmd/studio

## test: every check CI runs: formatting, vet, staticcheck, generated files up to date,
## and all tests with the race detector, the browser tests in Chromium, the
## differential tests against deepagents (JS) and the store's tests against
## a PostgreSQL server of their own included
test: check-fmt vet staticcheck check-generated chromium npm postgres unit

check-fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# The *_templ.go files must be what templ generates from the .templ files:
# generate into a scratch copy and compare, so the check never writes here.
check-generated:
	@tmp=$$(mktemp -d); cp web/templates/*.templ web/templates/*.go $$tmp/ && \
	$(GO) tool templ generate -path $$tmp >/dev/null 2>&1 || { $(GO) tool templ generate -path $$tmp; rm -rf $$tmp; exit 1; }; \
	stale=""; for f in $$tmp/*_templ.go; do cmp -s $$f web/templates/$$(basename $$f) || stale="$$stale $$(basename $$f)"; done; \
	rm -rf $$tmp; if [ -n "$$stale" ]; then echo "web/templates: stale generated files:$$stale; run 'make generate'"; exit 1; fi

# The browser tests drive Debian's Chromium, with CJK fonts so that the
# articles' Chinese renders in screenshots; install what is missing.
chromium:
	@missing=""; for p in chromium fonts-noto-cjk; do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing for the browser tests:$$missing (apt-get install)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

# The differential tests run deepagents (JS), and the OTLP tests drive it and
# the OpenTelemetry Node SDK against the studio, from e2e/node_modules, pinned
# by e2e/package.json and its lockfile; npm ci installs them when the lockfile
# is newer than the install (npm is installed from Debian when it is missing).
npm:
	@command -v npm >/dev/null 2>&1 || { \
		echo "installing Node.js and npm for the e2e tests (apt-get install nodejs npm)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; }
	@if [ ! -f e2e/node_modules/.package-lock.json ] || [ e2e/package-lock.json -nt e2e/node_modules/.package-lock.json ]; then \
		echo "installing the real clients of the e2e tests (npm ci in e2e/)"; \
		cd e2e && npm ci --no-audit --no-fund --loglevel=error; fi

# The store's suite and the two-replica tests run against PostgreSQL too:
# Debian's postgresql is installed when its server is missing, and
# scripts/with-postgres.sh runs the tests with a cluster of their own, in a
# temporary directory on a free port, stopped when they end.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then \
		echo "installing PostgreSQL for the store tests (apt-get install postgresql)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; fi

# A package may take longer than go test's 10-minute default on a busy machine
# (internal/server's live property took 6.6 min at load 20): 45 minutes, as
# the suite's whole budget at that load.
unit:
	./scripts/with-postgres.sh $(GO) test -race -count=1 -timeout 45m $(PKGS)

## bench: the studio's figures as one table, each with its target and command (docs/performance.md)
bench:
	./scripts/bench.sh

## load: 50 concurrent sessions with delays and 200 websocket viewers for 60 s, 50 agents
## streaming through the recording endpoint and 20 OTLP exporters beside them, on loopback:
## on one studio (SQLite), then on two sharing a PostgreSQL database, sessions
## and viewers spread over both
load: postgres
	STUDIO_LOAD_SESSIONS=50 STUDIO_LOAD_VIEWERS=200 STUDIO_LOAD_AGENTS=50 STUDIO_LOAD_EXPORTERS=20 STUDIO_LOAD_SECONDS=60 $(GO) test -run '^TestLoad$$' -count=1 -v -timeout 10m ./internal/server/
	STUDIO_LOAD_SESSIONS=50 STUDIO_LOAD_VIEWERS=200 STUDIO_LOAD_AGENTS=50 STUDIO_LOAD_EXPORTERS=20 STUDIO_LOAD_SECONDS=60 ./scripts/with-postgres.sh $(GO) test -run '^TestLoadReplicas$$' -count=1 -v -timeout 10m ./internal/server/

## fuzz: run each fuzz target for a while (FUZZTIME, default 60000 inputs each)
FUZZTIME ?= 60000x
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzMatchesReference$$' -fuzztime=$(FUZZTIME) ./internal/tokens/
	$(GO) test -run='^$$' -fuzz='^FuzzImport$$' -fuzztime=$(FUZZTIME) ./internal/db/
	$(GO) test -run='^$$' -fuzz='^FuzzScenario$$' -fuzztime=$(FUZZTIME) ./internal/scenario/
	$(GO) test -run='^$$' -fuzz='^FuzzToolArgs$$' -fuzztime=$(FUZZTIME) ./internal/delegation/
	$(GO) test -run='^$$' -fuzz='^FuzzLiveParams$$' -fuzztime=$(FUZZTIME) ./internal/server/
	$(GO) test -run='^$$' -fuzz='^FuzzReceive$$' -fuzztime=$(FUZZTIME) ./internal/ingest/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./internal/proxy/

generate:
	$(GO) tool templ generate -path web/templates
	$(GO) generate ./internal/tokens
	$(GO) generate ./internal/i18n

lint: check-fmt vet staticcheck

# staticcheck, pinned as a tool in go.mod: no finding may land.
staticcheck:
	$(GO) tool staticcheck $(PKGS)

clean:
	rm -rf bin
