# Delegation Studio. `make run` and `make test` are the two set-up commands;
# both work on a fresh machine with Go installed.

GO      ?= go
BIN     := bin/studio
PKGS    := ./...

.PHONY: run build test check-fmt vet unit bench fuzz generate lint clean

## run: build the studio and run the example scenario
run: build
	./$(BIN) run examples/order-number.json

build:
	$(GO) build -o $(BIN) ./cmd/studio

## test: every check CI runs: formatting, vet, and all tests with the race detector
test: check-fmt vet unit

check-fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

## bench: the benchmarks; per-model-call figures are reported as ns/model-call
bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./internal/session/ ./internal/tokens/ ./internal/model/scripted/

## fuzz: run each fuzz target for a while (FUZZTIME, default 1m)
FUZZTIME ?= 1m
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzMatchesReference -fuzztime=$(FUZZTIME) ./internal/tokens/

generate:
	$(GO) generate $(PKGS)

lint: check-fmt vet

clean:
	rm -rf bin
