# Tollgate — the two commands a new machine needs are `make run` and `make test`.
SHELL := /bin/bash
GO    ?= go
BIN   := bin
# The SDK packages a plugin compiles (GOOS=wasip1), relative to sdk/.
SDK_GUEST_PKGS := . ./abi ./jsonscan ./scaffold/templates/go
NODE_E2E := gateway/e2e/testdata/node
# The operator console's sources (npm; built into gateway/internal/console/dist).
CONSOLE := web/console

.PHONY: all build plugins console console-check run test test-deps modules vet unit e2e unit-race unit-compile unit-compile-steps low-priority-checks deploycheck fuzz-short fuzz bench drills clean

all: build

build:
	$(GO) build -o $(BIN)/ ./gateway/cmd/...

# plugins: every plugin under plugins/ into bin/plugins/NAME.wasm, and the
# built-in ones (preflight, ratelimit, budget, holdback, pii) again into the
# modules embedded in the binary (gateway/internal/builtin/modules: commit
# them; a test fails when a plugin's sources and its module disagree).
plugins: build
	@for d in plugins/*/; do n=$$(basename $$d); bin/tollgate plugin build $$d -o $(BIN)/plugins/$$n.wasm || exit 1; done
	$(GO) generate ./gateway/internal/builtin

# console: the operator console (web/console) rebuilt into
# gateway/internal/console/dist, which is committed so that `go build`
# needs no npm (like the built-in plugins, docs/adr/0008). The build is
# deterministic: content-hashed names, no timestamps. console-check (in
# make test) rebuilds in memory and fails when the committed dist differs,
# and runs the console's unit tests (node --test).
console:
	@test -d $(CONSOLE)/node_modules/esbuild || (cd $(CONSOLE) && npm ci --no-audit --no-fund)
	cd $(CONSOLE) && npm run --silent build

console-check:
	@cd $(CONSOLE) && node build.mjs --check && node --test test/unit.test.mjs

# run: the gateway on its embedded default policy with the mock model behind
# it. No Postgres, no Redis. Ctrl-C stops both. `make run POLICY=FILE` runs
# another policy (policies/keywordguard.yaml: also `make plugins`).
run: build
	@POLICY=$(POLICY) scripts/run.sh

# test: the whole suite, as CI runs it (.ci/run). After test-deps and vet,
# two tracks run at once: the package tests (unit-race and unit-compile at
# once) then the end-to-end tests, and deploycheck, doccheck's tests then
# fuzz-short under Linux's SCHED_IDLE policy (LOW_PRIORITY).
# The second track is CPU-bound; the end-to-end tests spend much of their
# time waiting on sleeps, timeouts and held streams, and SCHED_IDLE gives
# the second track only CPU nothing else wants: a waking test process
# preempts it at once. nice 19 was not enough: beside fuzz-short at nice 19
# TestReplicasEviction's slowest eviction was over its 100 ms bar in 6 runs
# of 7 (up to 744 ms); beside it under SCHED_IDLE, 11-37 ms in 5 runs of 5;
# alone, 11-98 ms in 4 of 4 (on a shared machine at load average 5-9).
# Each group's output is printed when it ends, with a line saying how long
# each step took, the CPU time it used and when it ended (scripts/timed.sh):
# where the wall time goes, and whether the CPUs or waits held it, is read
# from the log of any run. Before them, test-deps
# (apt, npm) and the Go module downloads of both modules wait on the
# network together.
LOW_PRIORITY ?= $(if $(shell command -v chrt),chrt --idle 0,nice -n 19)
test:
	@date -u +"-- make test: started %H:%M:%S UTC"
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-deps modules
	@scripts/timed.sh vet $(MAKE) --no-print-directory vet
	@$(MAKE) --no-print-directory -j3 --output-sync=target unit low-priority-checks

# low-priority-checks: the console's dist against its sources,
# deploycheck, tools/doccheck's tests, then fuzz-short at LOW_PRIORITY
# (see test). doccheck builds every program and asks each
# for its help (30-second timeouts): build-bound, with no time-sensitive
# check, it took 60-80 s of the package tests' wall time beside them.
low-priority-checks:
	@scripts/timed.sh console-check $(LOW_PRIORITY) $(MAKE) --no-print-directory console-check
	@scripts/timed.sh deploycheck $(LOW_PRIORITY) $(MAKE) --no-print-directory deploycheck
	@scripts/timed.sh doccheck $(LOW_PRIORITY) $(GO) test -race -count=1 -timeout 20m ./tools/doccheck
	@scripts/timed.sh fuzz-short $(LOW_PRIORITY) $(MAKE) --no-print-directory fuzz-short

# modules: the modules the gateway and tools/deploycheck need, into the
# module cache (a no-op when they are there).
modules:
	$(GO) mod download
	cd sdk && $(GO) mod download
	cd tools/deploycheck && $(GO) mod download

# Installs what the tests need and is missing: redis-server (tests start
# their own on a free port; so do the Postgres tests, from the installed
# PostgreSQL binaries), Debian's Rust compiler with its wasm32 standard
# library and lld (the Rust plugin SDK's tests build plugins with
# /usr/bin/rustc; rustup's rustc, if any, is not used) and the OpenAI and
# Anthropic Node SDKs used as real clients by the end-to-end tests, and for
# the console's browser test (gateway/e2e/console) Debian's chromium and
# web/console's packages (esbuild, playwright-core; npm ci from the
# committed lockfile: playwright drives the system's chromium and
# downloads no browser). The metrics tests lint /metrics with
# promlint in-process, the linter `promtool check metrics` runs, so
# Debian's prometheus package is not needed. What is missing is installed
# with one `apt-get update` and without recommended packages (npm's
# recommends pull in node-tap and its tree; ca-certificates, which npm ci
# needs for the registry, is named).
test-deps:
	@missing=; \
	command -v redis-server >/dev/null || test -x /usr/bin/redis-server || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing="$$missing postgresql"; \
	command -v node >/dev/null || missing="$$missing nodejs npm ca-certificates"; \
	test -x /usr/bin/rustc -a -d /usr/lib/rustlib/wasm32-unknown-unknown || missing="$$missing rustc libstd-rust-dev-wasm32"; \
	test -x /usr/bin/lld-14 -o -x /usr/lib/llvm-14/bin/lld || missing="$$missing lld-14"; \
	test -x /usr/bin/chromium || missing="$$missing chromium"; \
	test -z "$$missing" || { apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; }
	@test -d $(NODE_E2E)/node_modules/openai -a -d $(NODE_E2E)/node_modules/@anthropic-ai/sdk || (cd $(NODE_E2E) && npm ci --no-audit --no-fund)
	@test -d $(CONSOLE)/node_modules/playwright-core -a -d $(CONSOLE)/node_modules/esbuild -a -d $(CONSOLE)/node_modules/preact || (cd $(CONSOLE) && npm ci --no-audit --no-fund)

# vet: both modules, the SDK's guest packages also as a plugin builds them
# (wasip1), and the SDK module on its own go.mod (its go directive is the Go
# version plugin authors need).
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	cd sdk && $(GO) vet ./... && GOOS=wasip1 GOARCH=wasm $(GO) vet $(SDK_GUEST_PKGS)

# The end-to-end tests start processes and hold thousands of streams: they
# run after the package tests rather than beside them on 2 cores.
#
# Before them, two groups at once: the package tests under the race
# detector (unit-race), and the tests whose time is wazero compiling plugin
# modules, without it (unit-compile). Those are sdk/conformance (each check
# compiles the plugin once without a cache, the cold-compile measurement;
# 83% of a check's CPU in a profile of one under -race, and wazero's
# compiler under the race detector made the package 261 s of a run instead
# of 36 s) and `tollgate plugin check` and `plugin warm`, which run that
# measurement and compile a built-in plugin into an empty cache (under
# -race 212 s and 59 s of gateway/cmd/tollgate's 310 s in one loaded run,
# 2 min 40 s of CPU; without it, 16 s of CPU both). Their concurrency is the plugin runtime's, raced in
# sdk/wasmhost's own tests. Running beside the race group, they use CPU its
# packages leave idle while they wait on Postgres, Redis and timers instead
# of taking a minute of their own.
# The no-race group also runs the allocation tests (testing.AllocsPerRun)
# that skip under the race detector, where sync.Pool drops items at random
# and the detector allocates (scripts/alloc-tests.sh finds them: the files
# calling AllocsPerRun that mention raceEnabled; 4 packages, a few seconds
# beside the race group). Without this pass CI never ran them.
# The no-race group also first builds the plugins the end-to-end tests load
# and compiles them into the plugin runtime's cache
# (gateway/e2e/testdata/warmplugins): in a fresh checkout those first builds
# and compiles took over a minute of the serial end-to-end run. Last, it
# compiles the end-to-end test package (with -race) and the tollgate binary
# its TestMain builds into Go's build cache, so that e2e starts by linking,
# and runs the console's browser test (gateway/e2e/console: headless
# Chromium against the gateway as a process, 20-45 s, no time-critical
# assertion: its waits are 20 s), without the race detector.
# (make test runs them with -j3: the two groups and low-priority-checks.)
COMPILE_TESTS := ^(TestPluginCheck|TestPluginWarm)$$
unit: e2e

e2e: unit-race unit-compile
	@scripts/timed.sh e2e $(GO) test -race -count=1 -timeout 20m ./gateway/e2e/

# SLOW_FIRST: the race group's longest packages (60-115 s, 25-50 s in
# runs of make test), listed first so that go test starts them first: in
# the listing's order sdk/wasmhost came last and ran its 90 s beside
# nothing else of the group.
SLOW_FIRST := $(addprefix github.com/tollgate/tollgate/,sdk/wasmhost plugins/budget sdk/scaffold sdk/plugintest sdk/rust plugins/holdback gateway/internal/proxy)
unit-race:
	@scripts/timed.sh unit-race $(GO) test -race -count=1 -timeout 20m -skip '$(COMPILE_TESTS)' $$({ $(GO) list $(SLOW_FIRST); $(GO) list ./... github.com/tollgate/tollgate/sdk/...; } | awk '!seen[$$0]++' | grep -v -e /gateway/e2e -e /sdk/conformance -e /tools/doccheck)

unit-compile:
	@date -u +"-- unit-compile: started %H:%M:%S UTC"
	@scripts/timed.sh unit-compile $(MAKE) --no-print-directory unit-compile-steps

unit-compile-steps:
	$(GO) run ./gateway/e2e/testdata/warmplugins
	$(GO) test -count=1 -timeout 20m github.com/tollgate/tollgate/sdk/conformance
	$(GO) test -count=1 -timeout 20m -run '$(COMPILE_TESTS)' ./gateway/cmd/tollgate
	scripts/alloc-tests.sh
	$(GO) build -o /dev/null ./gateway/cmd/tollgate
	$(GO) test -race -c -o /dev/null ./gateway/e2e
	$(GO) test -count=1 -timeout 10m ./gateway/e2e/console

# deploycheck: the Helm chart rendered with Helm's engine and decoded strictly
# into k8s.io/api types, the compose file loaded with compose-go, the
# image's build steps (deploy/docker/build.sh) run and the shipped policies
# validated by the built binary. Its own module (tools/deploycheck) keeps
# helm and client-go out of the gateway's go.mod.
deploycheck:
	cd tools/deploycheck && $(GO) vet ./... && $(GO) test -count=1 -timeout 20m ./...

# fuzz-short runs every fuzz target briefly; `make fuzz FUZZTIME=5m` runs longer.
FUZZTIME ?= 20000x
fuzz-short:
	@scripts/fuzz.sh $(FUZZTIME)

fuzz:
	@scripts/fuzz.sh $(if $(filter %x,$(FUZZTIME)),2m,$(FUZZTIME))

# bench: the latency the gateway adds over direct-to-mock (no plugins, and
# all four built-in plugins), beside a plain fasthttp proxy and nginx, at
# 1/8/32/128 concurrent, non-streaming and streaming; writes the table into
# docs/BENCHMARKS.md (and BENCH_OUT if set). It measures the production
# stack too (all four plugins on Postgres + Redis, started by the script,
# installed with apt when missing); BENCH_STORES=memory leaves it out.
# BENCH_PIN=1 pins each target to one CPU and the
# load generator, mocks, Redis and Postgres to the other(s), BENCH_PIN=both
# measures both ways in one run; BENCH_QUICK=1 checks the harness in about
# two minutes without touching the docs; BENCH_PLAN=1 prints the plan.
# Where a gateway's CPU goes per request: scripts/cpubreak.sh.
bench:
	@BENCH_INVOKED="make bench" BENCH_DOC_DEFAULT=docs/BENCHMARKS.md BENCH_STORES=$${BENCH_STORES:-pg} scripts/bench.sh

# drills: the reliability drills (gateway/e2e/drills_*_test.go) in their
# long form: more load, longer faults. Each passing drill writes its
# measured row into docs/RELIABILITY.md. Their short form runs in `make
# test` with the other end-to-end tests. The full log (gateway logs
# included) goes to DRILLS_LOG.
DRILLS_LOG ?= /tmp/tollgate-drills.log
drills: test-deps
	@set -o pipefail; TOLLGATE_DRILLS=long $(GO) test -count=1 -timeout 30m -run '^TestDrill' -v ./gateway/e2e/ 2>&1 \
		| tee $(DRILLS_LOG) | grep -v 'level=' ; status=$$?; echo "full log: $(DRILLS_LOG)"; exit $$status

clean:
	rm -rf $(BIN)
