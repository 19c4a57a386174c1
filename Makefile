# simrelay: `make run` starts the server on its embedded defaults; `make test` runs every test.
GO          ?= go
BIN         ?= bin/simrelay
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
STATICCHECK ?= $(shell $(GO) env GOPATH)/bin/staticcheck
STATICCHECK_VERSION ?= v0.8.2
STRIPE_MOCK_VERSION ?= v0.203.0

.DEFAULT_GOAL := help

.PHONY: help build agents run test test-binaries lint bench check tools stripe-mock chromium postgresql

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/simrelay
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/simrelay

AGENT_TARGETS ?= linux/arm64 linux/amd64 linux/arm darwin/arm64 darwin/amd64

# The targets build at once: with the packages cached, each is mostly its
# link, which runs on one core.
agents: ## cross-compile simrelay-agent into bin/ for linux/arm64 (Termux, Raspberry Pi), linux/amd64, linux/arm (v7) and macOS (darwin/arm64, darwin/amd64: iMessage)
	@pids=; for target in $(AGENT_TARGETS); do \
	  os=$${target%/*}; arch=$${target#*/}; out=bin/simrelay-agent-$$os-$$arch; \
	  if [ "$$arch" = arm ]; then out=$$out-v7; fi; \
	  echo "$$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch GOARM=7 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $$out ./cmd/simrelay-agent & \
	  pids="$$pids $$!"; \
	done; \
	failed=0; for pid in $$pids; do wait $$pid || failed=1; done; exit $$failed

run: build ## run the server on 127.0.0.1:8080 with its store in ./data; flags in ARGS="--listen 127.0.0.1:9090"
	./$(BIN) serve $(ARGS)

# TEST_TIMEOUT bounds each package's test binary. go test's default of 10
# minutes stopped httpapi on a busy 2-core machine before its tests sped up;
# 15 minutes leaves a loaded CI runner room, and a hung test still fails with
# its goroutine dump long before a CI job's own limit.
TEST_TIMEOUT ?= 15m

# The two passes run one after the other: run at once they saved a minute
# on 2 idle cores, but the doubled load made timing-bound tests (a crash
# test's deadline, a live view's) fail now and then.
#
# PG_SUITES are the packages whose tests run the server over a real store
# (internal/storetest, or the binary with --database-url): make test runs
# them a second time with the store in PostgreSQL. The store's own suites
# (store/...) run on both backends in the first pass already, and so do
# the tests of those packages that are on PostgreSQL whatever the backend
# (a cluster's nodes, a database cut off): they skip the second pass
# (storetest.PostgresEitherWay).
# They are listed longest first, for the reason below (billing, 9 s in
# this pass, ran among the last after webhook, smtpd and media).
#
# The second pass runs without the race detector: the Go code above the
# store is the same that the first pass ran under -race, and the PostgreSQL
# store's own concurrency (its report workers, leases and locks) is raced
# in the first pass by store/postgres's suites, the cluster package's and
# the store's conformance suites on it. What it gives up: the race detector
# over the server's in-process tests (httpapi, web, gateway, sms...) while
# their store is PostgreSQL. The binaries that cmd/... tests start are built
# without -race in either pass. -race doubled the pass's time (each
# package's tests took about twice as long: httpapi 338 s of test time
# against 170 s, gateway 147 against 72, cmd/simrelay 209 against 111).
PG_SUITES ?= ./httpapi ./web ./cmd/simrelay ./gateway ./cmd/simrelay-agent ./billing ./smtpd ./media ./webhook ./account ./sms ./device ./channel ./cmd/...

# PG_P is how many of PG_SUITES' test binaries the second pass runs at
# once. Their tests wait on the database and on the servers they start
# more than they compute: at go test's default, one a core, the pass kept
# the 2 cores about 55% busy (140 s of CPU in 125 s, on a machine shared
# with other work, load average 5 to 13), httpapi
# and web running side by side for most of it while the shorter packages
# waited their turn. Measured again on a machine shared with other work
# (load average 20 to 25, the same tree, in turn): -p 2 took 212 and 202 s,
# -p 3 182 s.
PG_P ?= 3

# go test starts the packages' test binaries in the order it is given them,
# at most -p (one per core) at once, and a package that waits for its turn
# starts only after every package before it has. ./... alone is in path
# order, which started httpapi, the longest, two fifths into the run, and
# the run's last minute and more was the packages after it. SLOW_FIRST
# names the longest (each over 3 s under -race in a run of make test) to
# go first, longest first, so that the short ones fill the other core
# meanwhile; ./... adds the rest, each package once. agent, cluster and
# billing (13 to 37 s, 16 to 28 s, 4 to 33 s under -race, the more on a
# busier machine) ran in path order, among the last; so did media and
# smtpd (7 to 8 s each), the last to end, after the pass's short
# packages. agent and cluster now take 5 to 9 s.
SLOW_FIRST ?= ./httpapi ./cmd/simrelay ./android-protocol/conformance ./store/boltstore ./web ./store/postgres ./gateway ./cmd/simrelay-agent ./agent ./media ./smtpd ./billing ./cluster ./pacing ./internal/pgtest ./channel ./webhook ./account ./mail

# A binary built with -race sleeps a second when it exits, so that a
# goroutine still running then has time to show a race (the race
# detector's atexit_sleep_ms, 1000 by default): a second of a core's turn
# for each of the first pass's 50 test binaries, 25 s of its time on 2
# cores, where most packages' tests take a tenth of that. Every race
# during a test still fails it (the testing package checks after each
# test); what goes is a race shown only by a goroutine that outlives every
# test of its binary, in the second after the last. GORACE from the
# environment still applies, after this (GORACE=atexit_sleep_ms=1000 make
# test puts the second back).
TEST_GORACE ?= atexit_sleep_ms=0 $(GORACE)

# TEST_BIN is where make test builds simrelay and simrelay-agent once for
# both passes: the tests that run the binaries as child processes
# (cmd/simrelay, cmd/simrelay-agent, android-protocol/conformance) find
# them through SIMRELAY_TEST_BIN (internal/testbin) instead of each
# linking its own, three links of the server a pass, each several seconds
# of a core. go test ./cmd/simrelay alone still builds its own. go build
# leaves a binary that is up to date as it is, so a second make test on
# the same tree links nothing.
TEST_BIN ?= $(CURDIR)/bin/test

# TEST_GOFLAGS are go's flags for make test's builds (its two passes,
# test-binaries, and the go build a test runs, which inherits GOFLAGS).
# -trimpath keeps the checkout's directory out of what is compiled, so a
# clone in another directory (a CI's fresh clone, a second worktree) finds
# in the build cache every package compiled there before with the same
# sources, where each new directory compiled them all again: measured on a
# busy 2-core machine, the first pass's builds in a new clone took 119 s of
# CPU without it and 35 s with it (go test -race -run '^$$' ./...). The
# first build with it compiles everything once (343 s there), the standard
# library and dependencies too. Test failures name files by import path
# (github.com/simrelay/simrelay/...) instead of the checkout's path.
TEST_GOFLAGS ?= -trimpath

test: stripe-mock chromium postgresql test-binaries ## run every test with the race detector, then the server's suites again on PostgreSQL (installs stripe-mock, chromium's headless shell and postgresql first when missing)
	GOFLAGS='$(TEST_GOFLAGS) $(GOFLAGS)' GORACE='$(TEST_GORACE)' SIMRELAY_TEST_BIN=$(TEST_BIN) SIMRELAY_TEST_CHROMIUM=$(CHROMIUM_SHELL) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(SLOW_FIRST) ./...
	GOFLAGS='$(TEST_GOFLAGS) $(GOFLAGS)' SIMRELAY_TEST_BIN=$(TEST_BIN) SIMRELAY_TEST_CHROMIUM=$(CHROMIUM_SHELL) SIMRELAY_TEST_STORE=postgres $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -p $(PG_P) $(PG_SUITES)

# TEST_TAGS builds the test binaries with password hashes at the tests' cost
# (internal/testbin.Tag, account.TestCostBuild): the admin create-company and
# the logins of the tests that run simrelay were 12 s of a core in make test
# at the production cost. Only test-binaries sets it; such a binary warns at
# its start that it is not for serving users. -w leaves out the debug
# information nothing reads there (go test leaves it out of the test
# binaries too): a third of each link's CPU.
TEST_TAGS ?= simrelay_testcost

test-binaries:
	GOFLAGS='$(TEST_GOFLAGS) $(GOFLAGS)' $(GO) build -tags $(TEST_TAGS) -ldflags=-w -o $(TEST_BIN)/ ./cmd/simrelay ./cmd/simrelay-agent

# The cross check keeps what is built elsewhere building: the binaries for
# Windows (go build ./cmd/...; vet ./... would also read the PostgreSQL test
# helpers, which are Unix-only) and every package with its tests for macOS
# (go vet ./...; the agent's iMessage home, and a Unix other than Linux).
# With a warm cache on a busy 2-core machine they took 3 to 5 s (the Windows
# build about two thirds of it) beside 2.5 to 4 s for gofmt, vet and
# staticcheck: cheap next to make test, and a cold cache pays once.
lint: tools ## gofmt, go vet and staticcheck, and a Windows and macOS build check
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	GOOS=windows $(GO) build ./cmd/...
	GOOS=darwin $(GO) vet ./...

bench: build ## measure: Go benchmarks of the hot paths, then simrelay bench (about a minute)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1s ./android-protocol ./store/... ./pacing ./sms ./webhook
	./$(BIN) bench

check: lint test ## everything CI runs

tools: ## install staticcheck when it is missing
	@test -x $(STATICCHECK) || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

stripe-mock: ## install the pinned stripe-mock the billing tests run against, when neither PATH nor GOPATH/bin has it
	@command -v stripe-mock >/dev/null 2>&1 || test -x "$$($(GO) env GOPATH)/bin/stripe-mock" || \
	  $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)

# The browser tests run Chromium's headless shell (Debian's
# chromium-headless-shell), not the browser (chromium): the same Blink and
# V8, at a third of the browser's CPU on the web package's tests. make test
# hands the path to them (SIMRELAY_TEST_CHROMIUM); go test ./web alone reads
# the default here. This is the one place that names it.
CHROMIUM_SHELL ?= /usr/lib/chromium/chromium-headless-shell

chromium: ## install Debian's chromium-headless-shell for the console's browser tests, when it is missing (needs root and apt-get)
	@test -x $(CHROMIUM_SHELL) || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium-headless-shell fonts-dejavu-core >/dev/null; }
	@test -x $(CHROMIUM_SHELL)

# PG_BINDIRS is where Debian's postgresql-NN packages put initdb and postgres,
# outside PATH; internal/pgtest looks in the same places.
PG_BINDIRS ?= /usr/lib/postgresql/*/bin
HAVE_POSTGRESQL = command -v initdb >/dev/null 2>&1 || { found=; for f in $(addsuffix /initdb,$(PG_BINDIRS)); do test -x "$$f" && found=1; done; test -n "$$found"; }

postgresql: ## install Debian's postgresql for the PostgreSQL tests, when initdb is neither in PATH nor in /usr/lib/postgresql/*/bin (needs root and apt-get)
	@$(HAVE_POSTGRESQL) || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }
	@$(HAVE_POSTGRESQL) || { echo "make postgresql: no initdb in PATH or $(PG_BINDIRS) after the install"; exit 1; }
