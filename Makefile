# Developer tasks for ratelimitd. `make help` lists them.
# CI runs .ci/run, which does what `make lint test` does without needing make.

GO                  ?= go
STATICCHECK_VERSION := v0.8.2
STATICCHECK         := honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
FUZZTIME            ?= 20s
BENCHTIME           ?= 1s
BIN                 ?= bin/ratelimitd
COVERPROFILE        ?= coverage.out
# Raw coverage data of the test binaries and of the daemons they start.
COVERDIR            := $(CURDIR)/.coverdata
# Flags for `make run`, e.g. make run ARGS='--listen 127.0.0.1:9090 --log-level debug'
ARGS                ?=

.DEFAULT_GOAL := help
.PHONY: help test test-short lint fmt vet staticcheck bench fuzz cover build run clean

help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

test: ## Run every test, with the race detector, in random order.
	$(GO) test -race -shuffle=on ./...

test-short: ## Run the quick tests (no end-to-end tests against the built daemon).
	$(GO) test -race -short -shuffle=on ./...

lint: fmt vet staticcheck ## gofmt (must list nothing), go vet, staticcheck.

fmt: ## Fail if any file needs gofmt.
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$out"; exit 1; fi

vet: ## go vet.
	$(GO) vet ./...

staticcheck: ## staticcheck, at a pinned version.
	$(GO) run $(STATICCHECK) ./...

bench: ## Run every benchmark (no tests), with allocations.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...

.PHONY: bench-compare
bench-compare: ## Compare with other limiters (bench/, its own module); writes bench/RESULTS.md, bench/charts/ and README.md's performance block.
	cd bench && $(GO) run ./cmd/compare -readme ../README.md

fuzz: ## Run each Fuzz target for FUZZTIME (default 20s), one after another.
	@set -e; \
	targets="$$($(GO) test -list '^Fuzz' -run '^$$' ./... | \
		awk '/^Fuzz/ { t[n++] = $$1; next } /^ok / { for (i = 0; i < n; i++) print $$2 "," t[i]; n = 0 }')"; \
	if [ -z "$$targets" ]; then echo "no Fuzz targets"; exit 0; fi; \
	for pt in $$targets; do \
		pkg="$${pt%%,*}"; target="$${pt#*,}"; \
		echo "== $$pkg $$target ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	done

cover: ## Run the tests with coverage (the daemon's, in the end-to-end tests, too); write COVERPROFILE.
	@rm -rf $(COVERDIR) && mkdir -p $(COVERDIR)
	$(GO) test -race -cover -covermode=atomic ./... -args -test.gocoverdir=$(COVERDIR)
	$(GO) tool covdata textfmt -i=$(COVERDIR) -o $(COVERPROFILE)
	@rm -rf $(COVERDIR)
	$(GO) tool cover -func=$(COVERPROFILE) | tail -n 1
	@echo "HTML report: $(GO) tool cover -html=$(COVERPROFILE)"

build: ## Build the daemon into BIN (default bin/ratelimitd).
	$(GO) build -o $(BIN) ./cmd/ratelimitd

run: build ## Build and run the daemon with ARGS.
	./$(BIN) $(ARGS)

clean: ## Remove what build and cover wrote.
	rm -f $(BIN) $(COVERPROFILE)
