# walrelay — see docs/development.md.

GO ?= go

# The Go toolchain every target builds and tests with: the newest patch
# release the module proxy serves, which fixes the standard library's known
# vulnerabilities (make vuln). The go command fetches it from the module
# proxy once (about 76 MB) whatever Go the machine has; go.mod's go line
# stays the minimum a module user needs. Exported, with GO, so that what a
# test runs (make image, go build of an older release) uses the same.
GOTOOLCHAIN ?= go1.27.3
export GO GOTOOLCHAIN

.PHONY: fleet-group build test chaos cluster explore matrix lint clean image inbox-chaos alerts vuln deploy-check

# The version walrelay reports (walrelay version, its start log line,
# walrelay_build_info); without it, what the Go toolchain stamps.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# walrelay is built as the image builds it (Dockerfile, make image):
# static, without cgo, a symbol table or DWARF. make bench measures that
# binary too: a cgo build also maps libc, about 2 MiB more RSS.
RELEASE_BUILD = CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)"

# Where make build writes walrelay.
BUILD_OUT ?= bin/walrelay

build:
	$(RELEASE_BUILD) -o $(BUILD_OUT) ./cmd/walrelay

# First make vuln (about a minute: a reachable known vulnerability fails
# the run). Then one PostgreSQL (this machine's: Debian 12 has 15) and one Kafka for every
# package (test/cmd/testbed); then package test/e2e on the newest PostgreSQL
# (fetched once, see make matrix). Then 600,000 runs of fuzzing the pgoutput
# decoder (about 30 s here; a count, not a duration: Go 1.26's fuzzing
# coordinator can fail a target that found nothing at the end of a duration,
# with a bare "context deadline exceeded", golang/go#75804, fixed in Go 1.27),
# and the record compatibility check against Debezium (report in a temporary
# directory). The Kafka cluster scenarios (about 10 minutes even short) are
# left to make cluster; TestKafkaDownMessages (a Kafka stop and start, half a
# minute or more) and TestFleetGroupFaults (12 databases, 3 fleet replicas, two
# kills and a broker restart: two to three minutes of both cores) to make chaos;
# the fleet's replica tests that count on the default 10 s group session
# (TestFleetGroup* but RefusesAnotherFile: a kill, a stall, Kafka stopped;
# a Kafka starved by the rest of the suite can stall past that session,
# stopping pipelines the tests expect to keep) to make fleet-group; make
# test runs the group tests whose file sets group-session-timeout: 40s.
# The second run is the e2e package alone: the failover tests (each starts a
# primary and a standby of a fixed version of its own, 15 or 17, not the
# bed's) are in test/e2e/failover, the tests of what happens on the Kafka
# side (topic limits and creation, delivery and transaction timeouts, the
# in-flight budget, the HTTP server, metrics, configuration mistakes) in
# test/e2e/kafkaside: neither depends on the bed's PostgreSQL version, and
# make matrix runs every e2e package on each version.
#
# The three test runs go side by side, each on a test bed of its own
# (make -j3; each one's output printed when it ends): the packages whose
# tests stop and restart servers (testbed.Disrupt: test/fault, test/explore
# and test/testbed/disrupttest; with the others on one bed, each of their
# disruptive tests waited for the bed to itself, and the run took 21-22
# minutes, the two cores half idle), every other package, and test/e2e on
# the newest PostgreSQL followed by the fuzzing. The tests of test/e2e that
# take the bed to themselves (E2E_DISRUPTIVE) run in the third only: in the
# second they waited for every other package to end (a shared bed's lock
# does not favour the one waiting for it alone), and test/e2e took 811 s
# instead of about 400. test/layout checks that the list names each of
# them.
PG_NEWEST ?= 18
TEST_SKIP = ^(TestCluster|TestKafkaDownMessages$$|TestFleetGroup(SharesPipelines|HandoverResendsNothing|LostSessionResendsNothing|WaitsForKafkaAtStart|Faults)$$)
E2E_DISRUPTIVE = TestKafkaDownHoldsTheSlot|TestIdleOutboxDoesNotPinWAL|TestFleetInflightBudgetWait
DISRUPTIVE_PKGS = ./test/fault/ ./test/explore/ ./test/testbed/disrupttest/
test:
	$(MAKE) --no-print-directory vuln
	$(MAKE) --no-print-directory deploy-check
	$(MAKE) --no-print-directory -j3 --output-sync=target test-disruptive test-shared test-newest
	$(MAKE) --no-print-directory compat COMPAT_OUT="$$(mktemp -d)"

.PHONY: test-disruptive test-shared test-newest
test-disruptive:
	$(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -timeout 20m -skip '$(TEST_SKIP)' $(DISRUPTIVE_PKGS)

test-shared:
	$(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -timeout 20m -skip '$(TEST_SKIP)|^($(E2E_DISRUPTIVE))$$' \
		$$($(GO) list ./... | grep -v -x $(foreach p,$(DISRUPTIVE_PKGS),-e 'github.com/walrelay/walrelay/$(p:./%/=%)'))

test-newest:
	WALRELAY_TEST_PG_VERSION=$(PG_NEWEST) $(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -timeout 20m -skip '^(TestFleetGroup|TestGroupSession)' ./test/e2e/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 600000x ./decode/

# The long fault-injection run of test/fault (its package doc): at least 100
# kill -9 over 500,000 events, 30 s Kafka outages, and longer versions of every
# other scenario. About half an hour on two cores.
chaos:
	WALRELAY_CHAOS=1 $(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -v -timeout 3h ./test/fault/

# The fleet's replicas (docs/fleet.md, "Replicas"): the group tests of
# test/e2e and test/fault on a bed of their own, about five minutes. make
# test leaves out those that count on the default 10 s group session (a
# kill, a stall, a Kafka stopped), which its own load on two cores can
# break by stalling Kafka for seconds.
fleet-group:
	$(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -v -timeout 30m -run '^(TestFleetGroup|TestGroupSession)' ./test/e2e/ ./test/fault/

# The long kill -9 proof of package inbox (test/inboxkill): walrelay and the
# examples/inbox consumer killed again and again (100 consumer kills, every
# third with walrelay) under the demo's workload, then the projection checked
# against the outbox table; make test runs the short version (6 kills).
inbox-chaos:
	WALRELAY_CHAOS=1 $(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -v -timeout 1h -run TestInboxKill ./test/inboxkill/

# The TestCluster scenarios of test/fault on a Kafka cluster of three brokers
# and three KRaft controllers (replication factor 3, min.insync.replicas 2):
# kill -9 of partition leaders and of the active controller, a broker cut
# off, a rolling restart, two brokers down. About 10 minutes; with
# WALRELAY_CHAOS=1 the long version (30 leader kills over 300,000 events and
# more), which make chaos runs too.
cluster:
	WALRELAY_TEST_KAFKA_BROKERS_N=3 $(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -v -timeout 3h -run '^TestCluster' ./test/fault/

# The generative suite of test/explore (its package doc) over many random
# cases: EXPLORE_CASES=N, WALRELAY_EXPLORE_BASE=seed of the first; one case
# again with WALRELAY_EXPLORE_SEED=N. About 30 s a case on two cores.
EXPLORE_CASES ?= 300
explore:
	EXPLORE_CASES=$(EXPLORE_CASES) $(GO) run ./test/cmd/testbed -- $(GO) test -count=1 -v -timeout 12h -run TestExplore ./test/explore/

# The e2e suite (test/e2e/...) and the short fault run (kill -9, PostgreSQL restart,
# PostgreSQL connection cuts) on PostgreSQL 14 to 18, each on a bed of its own
# (WALRELAY_TEST_PG_VERSION; versions Debian lacks are fetched once with npm).
# Report: MATRIX_OUT/DATE-HOST-pg-matrix.md (table and RESULT lines), logs
# beside it.
MATRIX_OUT ?= bench/results
MATRIX_PG_VERSIONS ?= 14 15 16 17 18
matrix:
	GO=$(GO) test/matrix.sh $(MATRIX_OUT) $(MATRIX_PG_VERSIONS)

# The Prometheus alerting rules of deploy/prometheus: promtool check rules
# and their unit tests (walrelay-alerts_test.yml). promtool is built once
# from the Go module proxy into ~/.cache/walrelay/tools (test/tools.sh;
# about 15 minutes the first time on two cores, then a second). That every
# metric they and the Grafana dashboard query is one walrelay exports is
# checked by make test (TestDeployQueriesUseExportedMetrics).
alerts:
	@promtool=$$(test/tools.sh promtool) && \
	$$promtool check rules deploy/prometheus/walrelay-alerts.yml && \
	$$promtool test rules deploy/prometheus/walrelay-alerts_test.yml

# The Kubernetes deployment (docs/deploy.md, "Helm chart"): the chart of
# deploy/helm/walrelay rendered by Helm's engine for each values file of its
# ci/ directory, and deploy/kubernetes, validated by kubeconform in strict mode
# against the schemas of Kubernetes 1.37 (made from k8s.io/kubernetes's
# OpenAPI spec, fetched through the Go module proxy); the fleet example equal
# to the chart's fleet rendering; broken manifests refused. tools/deploycheck
# is a module of its own (Helm, kubeconform). The first run builds them
# (about 230 CPU seconds), later ones take 10 to 15 s: make test runs it.
deploy-check:
	cd tools/deploycheck && $(GO) test -count=1 ./...

# Known vulnerabilities in the code walrelay calls (govulncheck, built once
# from the Go module proxy). Needs vuln.go.dev, or GOVULNDB=URL of a mirror;
# where neither is reachable it checks against the snapshot of
# golang.org/x/vulndb pinned in test/tools.sh and says so (test/vuln.sh).
# Exit 3: vulnerable code is called (docs/security.md, "Dependencies").
vuln:
	GO=$(GO) test/vuln.sh

lint:
	$(GO) vet ./...
	cd tools/image && $(GO) vet ./...
	cd tools/deploycheck && $(GO) vet ./...
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt -w needed:"; echo "$$unformatted"; exit 1; fi

clean:
	rm -rf bin

# The container image without a container engine (docs/deploy.md, "The
# container image"): the static binary built as the Dockerfile builds it, on an empty
# base laid out by tools/image (its own module: go-containerregistry), written
# as an OCI image layout in one tar (with a docker load manifest.json). The
# same commit, Go toolchain and CA bundle give the same bytes: every time
# stamp is SOURCE_DATE_EPOCH (default: the last commit's time).
# IMAGE_ARCH=arm64 cross-builds. test/compose's TestImage runs this target.
IMAGE ?= bin/walrelay-image.tar
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_BIN ?= bin/image/walrelay-linux-$(IMAGE_ARCH)
IMAGE_CA_FILE ?= /etc/ssl/certs/ca-certificates.crt
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=$(VERSION)" -o $(IMAGE_BIN) ./cmd/walrelay
	cd tools/image && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run . -binary $(abspath $(IMAGE_BIN)) -ca-file $(IMAGE_CA_FILE) -version $(VERSION) -out $(abspath $(IMAGE))

# Quick start: PostgreSQL and Kafka from the test bed, walrelay between them,
# sample orders written and read back.
.PHONY: demo
demo:
	$(GO) run ./test/cmd/testbed -- $(GO) run ./test/cmd/demo

# Side-by-side benchmark (bench/README.md): walrelay, its null sink,
# pg_recvlogical and Debezium on one test bed; sizes from BENCH_* variables
# (BENCH_ROWS=50000 for a quick run), raw results in bench/results/. The
# bench build (-tags bench) of walrelay adds --bench-null-sink and
# --cpu-profile, which the product's binary does not have; it is otherwise
# built as the product is (RELEASE_BUILD).
.PHONY: bench compat
bench:
	$(RELEASE_BUILD) -tags bench -o bin/walrelay-bench ./cmd/walrelay
	$(GO) build -o bin/bench ./bench/cmd/bench
	$(GO) build -o bin/inboxbench ./bench/cmd/inboxbench
	WALRELAY_TEST_KAFKA_STOCK_JVM=1 $(GO) run ./test/cmd/testbed -- bin/bench -walrelay bin/walrelay-bench -inbox-consumer bin/inboxbench

# Record compatibility: Debezium and walrelay relay the same outbox rows;
# every difference is listed (bench/results/DATE-HOST-compat.md); exit 1 on
# one that is not documented.
COMPAT_OUT ?= bench/results
compat: build
	$(GO) build -o bin/compat ./bench/cmd/compat
	WALRELAY_TEST_KAFKA_STOCK_JVM=1 $(GO) run ./test/cmd/testbed -- bin/compat -walrelay bin/walrelay -out $(COMPAT_OUT)
