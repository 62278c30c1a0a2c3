# The front door. `make` alone prints the targets.
#
# The library's own module builds with the machine's Go. The modules that embed
# a Temporal server (integration/, examples/booking/, examples/quickstart/) need a newer Go, which the
# go command fetches from the module proxy through GOTOOLCHAIN: they get it
# here, so a user types one command.

SHELL := /bin/bash
.DEFAULT_GOAL := help

SERVER_TOOLCHAIN := go1.27.3
STATICCHECK      := honnef.co/go/tools/cmd/staticcheck@v0.8.2
WORKFLOWCHECK    := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0
# The packages with workflow code: the library's workflow side (interceptor/
# workflow_*.go), and the examples' workflows, each in its module.
WORKFLOW_PKGS    := ./interceptor/
WORKFLOW_MODULES := examples/booking examples/quickstart
SERVER_MODULES   := $(wildcard integration/go.mod examples/booking/go.mod examples/quickstart/go.mod benchmarks/go.mod)
# Small modules of their own beside the library (contrib/oteltrace keeps
# OpenTelemetry out of the library's go.mod); they build with the machine's Go.
CONTRIB_MODULES  := $(wildcard contrib/*/go.mod)
FUZZTIME         ?= 30s
TEST_TIMEOUT     ?= 15m
RACE_TIMEOUT     ?= 45m

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "; printf "Targets:\n"} /^[a-zA-Z_-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## Run the main job: the booking example against an in-process Temporal server (RUN_ARGS="-store postgres").
	@echo "make run: building the booking example with an embedded Temporal server ($(SERVER_TOOLCHAIN), which the go command"
	@echo "          fetches once). The first build downloads modules and compiles for several minutes (up to ~20 on two busy cores); later runs start in seconds."
	cd examples/booking && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go run . $(RUN_ARGS)

.PHONY: services
services: ## Start PostgreSQL and Redis on 127.0.0.1 if they do not answer (installs them if missing).
	scripts/services.sh

.PHONY: test
test: ## Run every test (library on two SDKs, contrib, real-server modules); ends with "N passed, N failed". Needs PostgreSQL, Redis and promtool (IDEMPOTENCY_SKIP_MISSING_SERVICES=1 skips what needs a missing one).
	@TEST_TIMEOUT=$(TEST_TIMEOUT) SERVER_TOOLCHAIN=$(SERVER_TOOLCHAIN) \
		CONTRIB_MODULES="$(dir $(CONTRIB_MODULES))" SERVER_MODULES="$(dir $(SERVER_MODULES))" scripts/test.sh

.PHONY: test-citus
test-citus: ## The PostgreSQL store on a real Citus cluster (coordinator and two workers on loopback): builds Citus from ../shared/third_party/citus/ when missing, then runs the Citus suite.
	TEST_TIMEOUT=$(TEST_TIMEOUT) scripts/test-citus.sh

.PHONY: bench-citus
bench-citus: ## pgstore's figures on a real Citus cluster beside the floor on the same cluster: its Go benchmarks, then make bench's throughput and per-activity sections with -citus (CITUS_BENCHTIME, default 2000x; CITUS_COUNT, default 3; BENCH_ARGS).
	CITUS_BENCH=1 CITUS_BENCHTIME=$${CITUS_BENCHTIME:-2000x} CITUS_COUNT=$${CITUS_COUNT:-3} TEST_TIMEOUT=60m \
		SERVER_TOOLCHAIN=$(SERVER_TOOLCHAIN) BENCH_ARGS="$(BENCH_ARGS)" scripts/test-citus.sh

.PHONY: test-previous-release
test-previous-release: ## Replay every committed workflow history with the previous release's workflow code (PREVIOUS_RELEASE=commit for another).
	TEST_TIMEOUT=$(TEST_TIMEOUT) SERVER_TOOLCHAIN=$(SERVER_TOOLCHAIN) scripts/previous-release.sh

.PHONY: test-newest-sdk
test-newest-sdk: ## Build, vet and test the library on the newest Temporal Go SDK (SDK_VERSION=v1.x.y for another), in a copy.
	TEST_TIMEOUT=$(TEST_TIMEOUT) scripts/newest-sdk.sh

.PHONY: test-race
test-race: ## Run the library's tests and the integration module (the workflow side against a real server) under the race detector.
	go test -count=1 -race -timeout $(TEST_TIMEOUT) ./...
	cd integration && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go test -count=1 -race -timeout $(RACE_TIMEOUT) ./...

.PHONY: lint
lint: ## go vet and staticcheck on every module, workflowcheck on the workflow code; gofmt must have nothing to say.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...
	go run $(WORKFLOWCHECK) $(WORKFLOW_PKGS)
	@for m in $(WORKFLOW_MODULES); do \
		(cd $$m && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go run $(WORKFLOWCHECK) ./...) || exit 1; \
	done
	@for m in $(dir $(CONTRIB_MODULES)); do \
		(cd $$m && go vet ./... && go run $(STATICCHECK) ./...) || exit 1; \
	done
	@for m in $(dir $(SERVER_MODULES)); do \
		(cd $$m && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go vet ./... && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go run $(STATICCHECK) ./...) || exit 1; \
	done

.PHONY: bench
bench: ## Measure the library beside its baselines and peer designs; prints tables (BENCH_ARGS="-doc ../docs/BENCHMARKS.md" also writes them there).
	cd benchmarks && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go run . $(BENCH_ARGS)

.PHONY: bench-growth
bench-growth: ## The growth, listing and sweep benchmark at full size: 10M records, 1M swept (a few minutes; BENCH_GROWTH_ROWS, BENCH_SWEEP_ROWS; BENCH_ARGS="-doc ../docs/BENCHMARKS.md -doc-marker bench-growth" writes it).
	cd benchmarks && BENCH_GROWTH_ROWS=$${BENCH_GROWTH_ROWS:-10000000} BENCH_SWEEP_ROWS=$${BENCH_SWEEP_ROWS:-1000000} \
		GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go run . -only growth $(BENCH_ARGS)

.PHONY: bench-micro
bench-micro: ## Run the packages' Go benchmarks, each beside the baseline it is compared with.
	go test -run '^$$' -bench . -benchmem ./...

.PHONY: fuzz
fuzz: ## Fuzz the key encoding for FUZZTIME (default 30s).
	go test ./keyspace -run '^$$' -fuzz FuzzDerive -fuzztime $(FUZZTIME)

.PHONY: failover-pg
failover-pg: ## PostgreSQL primary failover rounds at docs/SCALING.md's size: store calls (asynchronous standby +200ms, then no delay; synchronous), then through Temporal (faultrun).
	IDEMPOTENCY_PG_FAILOVER_KEYS=4000 IDEMPOTENCY_PG_FAILOVER_ROUNDS=3 go test -count=1 -timeout 20m -v -run 'TestPrimaryFailover$$/^asynchronous$$' ./pgstore/
	IDEMPOTENCY_PG_FAILOVER_KEYS=4000 IDEMPOTENCY_PG_FAILOVER_ROUNDS=3 IDEMPOTENCY_PG_FAILOVER_DELAY=0s go test -count=1 -timeout 20m -v -run 'TestPrimaryFailover$$/^asynchronous$$' ./pgstore/
	IDEMPOTENCY_PG_FAILOVER_KEYS=800 IDEMPOTENCY_PG_FAILOVER_ROUNDS=3 go test -count=1 -timeout 20m -v -run 'TestPrimaryFailover$$/^synchronous$$' ./pgstore/
	cd integration && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) FAULTRUN_FAILOVER_WORKFLOWS=200 go test -count=1 -timeout 20m -v -run 'TestFaultRunFailover$$' ./faultrun/

.PHONY: compat-fixtures
compat-fixtures: ## Freeze what this release writes as a new compatibility fixture set (SET=r<N>-<commit>, on a clean checkout of that commit).
	@test -n "$(SET)" || { echo "SET=r<N>-<commit> is required: N after the newest set's, commit $$(git rev-parse --short HEAD)"; exit 2; }
	IDEMPOTENCY_WRITE_COMPAT=$(SET) go test -count=1 -run '^TestCompatWrite$$' ./pgstore/ ./redisstore/ ./keyspace/ ./interceptor/

.PHONY: tidy-check
tidy-check: ## Fail if any go.mod or go.sum is not tidy.
	go mod tidy -diff
	@for m in $(dir $(CONTRIB_MODULES)); do \
		(cd $$m && go mod tidy -diff) || exit 1; \
	done
	@for m in $(dir $(SERVER_MODULES)); do \
		(cd $$m && GOTOOLCHAIN=$(SERVER_TOOLCHAIN) go mod tidy -diff) || exit 1; \
	done
