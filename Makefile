# replayctl: `make test` is what CI runs (.ci/run) and what the README names.
GO      ?= go
FUZZTIME ?= 20000x

.PHONY: test fmt vet unit fuzz-smoke bench bench-quick build screenshots screenshots-tests

# scripts/testrun runs gofmt, go vet, every package's tests (the slow ones
# first, each package's result printed as it finishes, a failing test's
# output shown) and the fuzz smoke run, and ends with "N passed, N failed";
# it exits 1 when anything failed or did not build.
test:
	$(GO) run ./scripts/testrun -fuzztime $(FUZZTIME)

build:
	$(GO) build -o replayctl ./cmd/replayctl

# gofmt must print nothing.
fmt:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null | while read f; do [ -f "$$f" ] && echo "$$f"; done)); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# atexit_sleep_ms: see docs/development.md (the race runtime's 1 s exit sleep).
unit:
	GORACE="$${GORACE:-atexit_sleep_ms=10}" $(GO) test -race -count=1 ./...

# A short run of every fuzz target, so the decoders, the stored-record codecs, the rules loader and the
# HTTP API's request decoding are fuzzed on every change (longer: make
# fuzz-smoke FUZZTIME=2000000x). The budget is a count of executions, not a
# duration: Go 1.26's fuzz coordinator can fail a target with "context
# deadline exceeded" and no crasher when a -fuzztime duration expires
# (go.dev/issue/75804, fixed in Go 1.27), which failed CI once. A failing
# target's output (and the crasher it wrote under testdata/fuzz) is shown.
# The packages are listed in scripts/testrun (fuzzPackages).
fuzz-smoke:
	$(GO) run ./scripts/testrun -only fuzz -fuzztime $(FUZZTIME)

# The benchmark table (docs/benchmarks.md): every figure is a ratio to a
# baseline measured in the same run (alternating runs, medians). The full run
# takes tens of minutes and several GB of scratch space (1M-entry corpora,
# 1M Prodigy item files); ONLY=decisions (or memory, ledger, replays, floor, safe, micro,
# workers, reads, pgread, size, backtest, prune, brokers) runs one part. The workers and pgread rows
# need PostgreSQL, the RabbitMQ brokers row rabbitmq-server (skipped with a note without them).
bench:
	$(GO) build -o bin/replayctl ./cmd/replayctl
	./bin/replayctl bench $(if $(ONLY),--only $(ONLY))

bench-quick:
	$(GO) run ./cmd/replayctl bench --quick

# Every console page at 1280 and 390 px wide, full page, with the local
# headless Chromium (TestConsoleScreenshots, internal/server): builds
# replayctl, serves a temporary copy of the bundled samples (no target,
# nothing written in the checkout), waits for the first reconcile and
# writes NAME-WIDTH.png to $(SCREENSHOTS). Not committed: one set is ~7 MB
# (~3 MB at 1280 px alone); screenshots/ is ignored by git. For a before/
# after, run it on each checkout with SCREENSHOTS=DIR.
# The browser tests' own screenshots: make screenshots-tests.
SCREENSHOTS ?= screenshots
screenshots:
	@mkdir -p $(SCREENSHOTS)
	REPLAYCTL_CONSOLE_SHOTS=$(abspath $(SCREENSHOTS)) $(GO) test -count=1 -run '^TestConsoleScreenshots$$' -v ./internal/server/
	@echo "screenshots in $(SCREENSHOTS)/:"; ls $(SCREENSHOTS)

screenshots-tests:
	@mkdir -p $(SCREENSHOTS)
	REPLAYCTL_SCREENSHOTS=$(abspath $(SCREENSHOTS)) $(GO) test -count=1 -run '^TestBrowser' ./internal/server/
	@echo "screenshots in $(SCREENSHOTS)/:"; ls $(SCREENSHOTS)
