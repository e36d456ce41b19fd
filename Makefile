# kplug: build, test and lint. `make help` lists the targets.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

CARGO ?= cargo
GO ?= go
NPM ?= npm

# Cargo's target directory; the kplug-testenv crate looks in the same place.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)

# --- testenv: a real kube-apiserver + etcd, built from Go modules ----------

TESTENV_BIN := $(TARGET_DIR)/testenv/kube-testenv
TESTENV_SRC := $(wildcard testenv/*.go) testenv/go.mod testenv/go.sum

# The Go build cache of the builds from the k8s.io/kubernetes module
# (kube-testenv, the node binaries): a directory of its own, so that
# `make images` can hand it to kube-testenv's image build whole
# (deploy/images/go-cache-seed.Dockerfile) without the rest of this
# machine's Go cache.
K8S_GOCACHE ?= $(HOME)/.cache/kplug-k8s-go-build

.PHONY: help
help: ## show this help
	@echo "kplug make targets:"
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z_-]+:.*## / { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: testenv
testenv: $(TESTENV_BIN) ## build target/testenv/kube-testenv (kube-apiserver + etcd for tests); no-op when up to date

# The version is the k8s.io/kubernetes requirement in testenv/go.mod. It is
# stamped into every binary built from that module because a module build
# does not set it (the API server would report v0.0.0 and clients would see
# an unknown version). A recipe line that starts with $(K8S_BUILD) sets
# $$version and the $$ldflags that $(GO_BUILD) uses, in testenv/
GO_BUILD = GOCACHE=$(K8S_GOCACHE) $(GO) build -trimpath -buildvcs=false -ldflags "$$ldflags"
K8S_BUILD = version=$$(cd testenv && $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes); \
	major=$${version\#v}; major=$${major%%.*}; \
	minor=$${version\#v*.}; minor=$${minor%%.*}; \
	pkg=k8s.io/component-base/version; \
	ldflags="-s -w -X $$pkg.gitVersion=$$version -X $$pkg.gitMajor=$$major -X $$pkg.gitMinor=$$minor -X $$pkg.gitTreeState=clean"

$(TESTENV_BIN): $(TESTENV_SRC)
	@echo "building kube-apiserver for $@ (the first build takes several minutes; later ones reuse the Go build cache)..."
	@mkdir -p $(@D)
	@$(K8S_BUILD); \
	start=$$(date +%s); \
	cd testenv && $(GO_BUILD) -o $(abspath $@).tmp . ; \
	mv $(abspath $@).tmp $(abspath $@); \
	echo "built $@ (kube-apiserver $$version) in $$(( $$(date +%s) - start ))s"

# --- a real node: kube-testenv --node ----------------------------------------
#
# kubelet, kube-controller-manager, kube-scheduler and kubectl from the same
# k8s.io/kubernetes module as kube-testenv (the `tool` lines of
# testenv/go.mod), and the static pause program, next to kube-testenv, where
# `kube-testenv --node` looks for them. containerd, runc and the CNI plugins
# are Debian's packages, installed here when missing.
NODE_BINS := kubelet kube-controller-manager kube-scheduler kubectl
NODE_BIN_FILES := $(addprefix $(TARGET_DIR)/testenv/,$(NODE_BINS) pause)
NODE_PACKAGES := containerd runc containernetworking-plugins iptables iproute2

.PHONY: node-binaries
node-binaries: $(NODE_BIN_FILES) ## build kubelet, kube-controller-manager, kube-scheduler, kubectl and pause for kube-testenv --node; install containerd, runc and the CNI plugins when missing
	@missing=""; for pkg in $(NODE_PACKAGES); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  echo "[node] installing Debian packages:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Under a lock: `make test` builds these in test-prepare while the
# background `make images` needs kubectl too, and two go builds of the same
# packages at once compile each of them twice (Go's cache helps only once a
# build is done). The second waits, then finds everything in the cache.
$(addprefix $(TARGET_DIR)/testenv/,$(NODE_BINS)) &: testenv/go.mod testenv/go.sum
	@mkdir -p $(TARGET_DIR)/testenv
	@exec 8>$(TARGET_DIR)/testenv/.node-build.lock; \
	flock -n 8 || { echo "[node] another build of the node binaries runs; waiting for it..."; flock 8; }; \
	echo "[node] building $(NODE_BINS) (the first build takes several minutes; later ones reuse the Go build cache)..."; \
	$(K8S_BUILD); \
	start=$$(date +%s); \
	cd testenv && $(GO_BUILD) -o $(abspath $(TARGET_DIR))/testenv/ $(addprefix k8s.io/kubernetes/cmd/,$(NODE_BINS)); \
	echo "[node] built $(NODE_BINS) ($$version) in $$(( $$(date +%s) - start ))s"

$(TARGET_DIR)/testenv/pause: testenv/pause/pause.c
	@mkdir -p $(@D)
	$(CC) -static -Os -Wall -Wextra -Werror -o $@ $<

# --- build and test ---------------------------------------------------------

# Tests run workspace binaries and examples (kplug-operator, plugins, the
# scripted test plugin) as real processes; `cargo test` alone builds examples
# only as test harnesses, so they are built here first.
.PHONY: build
build: ## build every crate, binary and example of the workspace
	$(CARGO) build --workspace --bins --examples

# `make test` runs in three phases (docs/development.md, "How make test
# runs"):
# 1. test-prepare, one step at a time: everything the tests run or read is
#    built or installed once (binaries, plugins, virtualenvs, stubs, the
#    databases), and `make images` starts in the background. One at a time,
#    because several of these write the same files (the Python SDK's stubs,
#    the TypeScript build); after this phase every one of them is a no-op.
# 2. test-checks, two at a time (make -j2, each target's output printed
#    whole when it ends): the checks that may download (the Go, Java and
#    TypeScript SDKs', the Java lint, the test binaries that pip install
#    from PyPI). One at a time while `make images` still builds in the background (on a
#    new machine: the release build in Docker is the longest path, and two
#    at a time made it 2.7 times slower, 887 s against 5 minutes alone):
#    images-hold, the first of them, holds one of the two slots until the
#    background build ends, and the second slot opens the moment it does.
# 3. test-last, one at a time: every test binary of the workspace (those
#    that need the whole machine's node or engine and the images, one at a
#    time, beside the others two at a time: the node tests wait on pods, and
#    the others fill that time), and beside them, two make jobs at once, the
#    checks that need nothing from the network (TEST_BESIDE); then chaos
#    alone, the doc tests, then docs/your-own-kind.md word for word. The page last: its
#    `cargo build -p ...` and its Rust plugin build some dependencies again
#    with those packages' features (beside the workspace's build, not over
#    it).
# With -k (as CI runs it), every phase runs even after one failed.
TEST_PREPARE := testenv images-background node-binaries build test-build databases python python-sdk go-stubs java-sdk sdk-hellos bench-servers conformance-plugins deploy-tools tools
TEST_CHECKS := images-hold test-rust-network test-go-sdk test-java-sdk test-typescript-sdk lint-java test-deploy
# The checks that run beside the real node's tests in test-last (test-beside):
# they wait on processes of their own on loopback, touch no node or engine
# state and need nothing from the network, which the node tests' leak and
# egress checks would see. A check that downloads anything (npm ci, Maven)
# stays in TEST_CHECKS.
TEST_BESIDE := test-rust-beside conformance test-python test-postgresql-plugin test-bench lint-offline
TEST_LAST := images-wait test-beside test-rust-quiet test-rust-doc test-docs
TEST_PARALLEL ?= 2
# Within `make test`, phases 2 and 3 run with PREPARED=1: what a check needs
# was built in test-prepare, so its prerequisites are left out. Not only to
# save their no-op recipes: make -j starts a target only after a pass over
# its prerequisites, and defers it while it has some to run, so a check with
# a chain of them (test-rust-shared: sdk-hellos, go-stubs, tools...) started
# after every check without one, and the longest check ran last, alone
# (warm CI: 4 minutes of test-rust-shared after the rest). Run on its own
# (`make test-rust-shared`), a check builds what it needs, as before.
prepared = $(if $(PREPARED),,$(1))
KEEP_GOING = $(findstring k,$(firstword -$(MAKEFLAGS)))

.PHONY: test
test: ## run every test (real kube-apiserver, real databases, real images) and every lint
	@status=0; \
	phase() { echo "[test] make $$* ($$(date -u +%H:%M:%S))"; \
	  $(MAKE) "$$@" || { status=$$?; [ -n "$(KEEP_GOING)" ] || exit $$status; }; }; \
	phase -j1 test-prepare; \
	phase -j$(TEST_PARALLEL) --output-sync=target PREPARED=1 test-checks; \
	phase -j1 PREPARED=1 test-last; \
	exit $$status

.PHONY: test-prepare test-checks test-last
test-prepare: $(TEST_PREPARE)
test-checks: $(TEST_CHECKS)
test-last: $(TEST_LAST)

# Every cargo test runs with the databases' DSNs in its environment: the
# example's tests use the real MariaDB and PostgreSQL (they fail, never skip,
# without them).
DB_ENV = eval "$$(examples/database-table/dev/databases.sh env)"

# The test binaries are built as `cargo test --workspace --all-targets`
# builds them, then run two at a time by dev/test-binaries.py (most of them
# wait on their own API server; those that need the whole machine, such as
# the real node and docker compose, run alone after the rest):
# docs/development.md. TEST_JOBS=1 runs them one after another.
TEST_JOBS ?= 2

TEST_BINARIES = $(DB_ENV); CARGO=$(CARGO) python3 dev/test-binaries.py --jobs $(TEST_JOBS)

# The test binaries, as dev/test-binaries.py builds them (the same
# arguments): built in test-prepare, so that the shared ones start at once in
# test-checks instead of waiting for clippy's and rustdoc's hold on the
# target directory.
.PHONY: test-build
test-build: ## build every test binary of the workspace (cargo test --workspace --all-targets --no-run)
	$(CARGO) test --workspace --all-targets --no-run

.PHONY: test-rust
test-rust: images test-rust-binaries test-rust-doc ## every test binary of the workspace (two at a time; the machine-wide ones one at a time beside them), then the doc tests

# Every test binary: the shared ones two at a time, beside them the ones
# that need the whole machine's node or engine one at a time, then chaos
# alone (dev/test-binaries.py says why). `make test` runs this in test-last,
# once the images are built: the node tests wait on pods for minutes, and
# the shared binaries fill that time.
.PHONY: test-rust-binaries test-rust-beside test-rust-quiet test-rust-network
test-rust-binaries: $(call prepared,testenv node-binaries build sdk-hellos databases python python-sdk deploy-tools) ## every test binary of the workspace (the real node's ones need `make images` first)
	$(TEST_BINARIES) --group all
test-rust-beside: $(call prepared,testenv node-binaries build sdk-hellos databases python python-sdk deploy-tools)
	$(TEST_BINARIES) --group beside
test-rust-quiet: $(call prepared,testenv build databases)
	$(TEST_BINARIES) --group quiet
test-rust-network: $(call prepared,testenv build databases python-sdk deploy-tools)
	$(TEST_BINARIES) --group network

# test-last's second step: the test binaries (the real node's one at a time,
# the others two at a time) beside the checks that can share the machine
# with a node's tests, two make jobs at once.
.PHONY: test-beside
test-beside:
	@$(MAKE) -j$(TEST_PARALLEL) --output-sync=target $(TEST_BESIDE)

.PHONY: test-rust-shared
test-rust-shared: $(call prepared,testenv build sdk-hellos databases python python-sdk deploy-tools) ## the test binaries that share the machine, two at a time
	$(TEST_BINARIES) --group shared

.PHONY: test-rust-alone
test-rust-alone: $(call prepared,testenv node-binaries build databases deploy-tools) ## the test binaries that need the whole machine (the real node, docker compose, the Docker engine, chaos), one at a time; they need `make images` first
	$(TEST_BINARIES) --group alone

.PHONY: test-rust-doc
test-rust-doc: ## the doc tests of the workspace
	$(CARGO) test --workspace --doc

# The Python SDK has its own Makefile (virtualenv, lint, type-check, tests).
# The fast tier: no control plane, no database, no container. Unit tests of
# every crate, and the Rust SDK's tests over real Unix sockets against the
# operator's registry in-process. Everything else in `make test` needs a
# cluster (kube-testenv) or a database.
.PHONY: unit
unit: ## the fast tier: unit tests and in-process socket tests, no control plane (about a minute warm)
	$(CARGO) test --workspace --lib --bins
	$(CARGO) test -p kplug-sidecar --tests

.PHONY: test-python
test-python: $(call prepared,python-sdk) ## Python SDK checks and tests (make -C sidecar-sdk/python check)
	$(MAKE) -C sidecar-sdk/python check

# The Python SDK's virtualenv (sidecar-sdk/python/.venv: the SDK with its
# generated stubs, pytest, ruff, mypy), which the Python hello and
# conformance plugins run from and whose ruff and mypy check docs/tests and
# dev/. A prerequisite, not a line of each recipe, so that one `make` builds
# it once and never twice at the same time.
.PHONY: python-sdk
python-sdk: ## the Python SDK's virtualenv (make -C sidecar-sdk/python install)
	$(MAKE) -C sidecar-sdk/python install

# The Go SDK's generated stubs (sidecar-sdk/go/kplugv1), for the same reason.
.PHONY: go-stubs
go-stubs: tools ## the Go SDK's gRPC stubs (make -C sidecar-sdk/go generate)
	$(MAKE) -C sidecar-sdk/go generate

# The Go and TypeScript SDKs have their own Makefiles (stubs generated with
# the pinned buf, lint, unit tests, the shared conformance cases).
.PHONY: test-go-sdk
test-go-sdk: $(call prepared,go-stubs) ## Go SDK: generate, gofmt, go vet, go test (make -C sidecar-sdk/go check)
	$(MAKE) -C sidecar-sdk/go check

# The Go, TypeScript and Java SDKs' hello plugins, as the processes that
# operator/tests/go_typescript_plugins.rs and java_plugins.rs run next to
# the real operator: $(TARGET_DIR)/sdk-hellos/hello-go,
# sidecar-sdk/typescript/build/examples/hello.js (run with node; it imports
# the SDK compiled next to it) and $(TARGET_DIR)/sdk-hellos/hello-java
# (java-sdk below). Always checked: go build writes nothing when
# the binary is up to date, and the TypeScript Makefile compiles only what
# changed (so that running this again while tests run those plugins rewrites
# nothing under them).
.PHONY: sdk-hellos
sdk-hellos: go-stubs java-sdk ## build the Go, TypeScript and Java hello plugins that the operator's end-to-end tests run
	cd sidecar-sdk/go && $(GO) build -o $(abspath $(TARGET_DIR))/sdk-hellos/hello-go ./examples/hello
	$(MAKE) -C sidecar-sdk/typescript build
	$(MAKE) -C sidecar-sdk/typescript build-test

.PHONY: test-typescript-sdk
test-typescript-sdk: ## TypeScript SDK: npm ci, build, tsc, eslint, node --test (make -C sidecar-sdk/typescript check)
	$(MAKE) -C sidecar-sdk/typescript check

# --- the Java SDK (sidecar-sdk/java, Maven) ---
# java-sdk builds the SDK and its hello and conformance plugins (mvn package,
# tests skipped; the gRPC stubs generated from proto/ on the way; the
# polyglot benchmark's Java servers too, which bench-servers copies), then puts
# what the plugins run from in $(JAVA_RUN), outside Maven's target/: the two
# jars and the class path of the jars in ~/.m2 they need, with the launchers
# $(TARGET_DIR)/sdk-hellos/hello-java and $(JAVA_RUN)/conformance-plugin
# (executables that exec java). So the `mvn verify` of test-java-sdk, which
# reuses this build (nothing is compiled twice), never rewrites a file a
# running plugin reads. Like a file target, it runs Maven only when a source,
# a POM or a .proto changed (sdk-hellos, conformance and test-docs all ask
# for it, while plugins and Maven's tests run). Maven runs quietly (-B -q)
# and touches the network only for what ~/.m2 lacks (on a new machine: once,
# here, then the test and lint plugins in test-java-sdk and lint-java).
MVN ?= mvn
MVN_FLAGS := -B -q
# One Maven at a time: Maven 3.8 does not lock its local repository, and
# make test runs test-java-sdk and lint-java side by side (both may download
# into ~/.m2 on a new machine).
MAVEN = mkdir -p $(abspath $(TARGET_DIR)) && flock $(abspath $(TARGET_DIR))/maven.lock $(MVN) $(MVN_FLAGS)
JAVA_SDK_DIR := sidecar-sdk/java
JAVA_RUN := $(abspath $(TARGET_DIR))/sdk-hellos/java
JAVA_STAMP := $(JAVA_RUN)/.built
JAVA_SOURCES := $(shell find $(JAVA_SDK_DIR) -name target -prune -o \( -name '*.java' -o -name pom.xml \) -print) \
	$(wildcard proto/kplug/v1/*.proto)

# $(call java-launcher,FILE,MAIN CLASS): an executable that starts a plugin
# of the examples with java (exec, so that signals reach the JVM).
define java-launcher
	@printf '%s\n' '#!/bin/sh' \
	  '# Written by `make java-sdk`: starts $(2) from $(JAVA_RUN).' \
	  'dir=$(JAVA_RUN)' \
	  'exec java -cp "$$dir/kplug-examples.jar:$$dir/kplug-sidecar.jar:$$(cat "$$dir/classpath")" $(2) "$$@"' \
	  >$(1).tmp
	@chmod +x $(1).tmp && mv $(1).tmp $(1)
endef

.PHONY: java-sdk
java-sdk: $(JAVA_STAMP) ## build the Java SDK and its hello and conformance plugins (mvn package, no tests): target/sdk-hellos/hello-java

# A jar is replaced by a rename, never rewritten in place: a JVM running the
# old one keeps reading it.
$(JAVA_STAMP): $(JAVA_SOURCES)
	cd $(JAVA_SDK_DIR) && $(MAVEN) package -DskipTests
	@mkdir -p $(JAVA_RUN)
	@for f in sdk/target/kplug-sidecar.jar examples/target/kplug-examples.jar examples/target/classpath; do \
	  cp $(JAVA_SDK_DIR)/$$f $(JAVA_RUN)/$${f##*/}.tmp && mv $(JAVA_RUN)/$${f##*/}.tmp $(JAVA_RUN)/$${f##*/}; \
	done
	$(call java-launcher,$(abspath $(TARGET_DIR))/sdk-hellos/hello-java,io.kplug.examples.hello.Hello)
	$(call java-launcher,$(JAVA_RUN)/conformance-plugin,io.kplug.conformance.ConformancePlugin)
	@touch $@

.PHONY: test-java-sdk
test-java-sdk: $(call prepared,java-sdk) ## Java SDK: mvn verify (JUnit tests over real sockets, the shared conformance cases, spotless check)
	cd $(JAVA_SDK_DIR) && $(MAVEN) verify

.PHONY: lint-java
lint-java: ## google-java-format on the Java SDK (mvn spotless:check; `mvn spotless:apply` in sidecar-sdk/java fixes it)
	cd $(JAVA_SDK_DIR) && $(MAVEN) spotless:check

# kplug-conformance against every SDK: each SDK's hello plugin (the protocol
# checks) and its conformance plugin (the protocol checks and the shared
# cases), as real processes on real sockets. The Rust conformance plugin runs
# in `cargo test` (sidecar-sdk/tests/conformance.rs). A JUnit report per run
# lands in target/conformance/.
CONFORMANCE_DIR := $(TARGET_DIR)/conformance
KIT := $(TARGET_DIR)/debug/kplug-conformance
CASES := sidecar-sdk/conformance/cases.json
PY_SDK := sidecar-sdk/python/.venv/bin/python
TS_BUILD := sidecar-sdk/typescript/build

.PHONY: conformance
conformance: $(call prepared,build sdk-hellos python-sdk conformance-plugins) ## run kplug-conformance against the Rust, Python, Go, TypeScript and Java SDKs' plugins
	@# Every run at once, each on its own socket directory (they wait on
	@# heartbeats and TTLs, not on the CPU); each run's output is printed
	@# whole, in order, when all are done.
	@run() { name=$$1; shift; \
	  sockets=$$(mktemp -d); \
	  status=0; $(KIT) --socket-dir $$sockets --junit $(CONFORMANCE_DIR)/$$name.xml "$$@" \
	    >$(CONFORMANCE_DIR)/$$name.log 2>&1 || status=$$?; \
	  rm -rf $$sockets; echo $$status >$(CONFORMANCE_DIR)/$$name.status; }; \
	run rust-hello -- $(TARGET_DIR)/debug/examples/hello & \
	run python-hello -- $(PY_SDK) sidecar-sdk/python/examples/hello.py & \
	run python-cases --cases $(CASES) -- $(PY_SDK) sidecar-sdk/conformance/python_plugin.py & \
	run go-hello -- $(TARGET_DIR)/sdk-hellos/hello-go & \
	run go-cases --cases $(CASES) -- $(CONFORMANCE_DIR)/bin/conformance-plugin & \
	run typescript-hello -- node $(TS_BUILD)/examples/hello.js & \
	run typescript-cases --cases $(CASES) -- node $(TS_BUILD)/conformance/main.js & \
	run java-hello -- $(TARGET_DIR)/sdk-hellos/hello-java & \
	run java-cases --cases $(CASES) -- $(JAVA_RUN)/conformance-plugin & \
	wait; \
	failed=""; \
	for name in rust-hello python-hello python-cases go-hello go-cases typescript-hello typescript-cases java-hello java-cases; do \
	  echo "[conformance] $$name"; cat $(CONFORMANCE_DIR)/$$name.log; \
	  [ "$$(cat $(CONFORMANCE_DIR)/$$name.status)" = 0 ] || failed="$$failed $$name"; \
	done; \
	if [ -n "$$failed" ]; then echo "[conformance] failed:$$failed"; exit 1; fi; \
	echo "[conformance] every SDK passed; JUnit reports in $(CONFORMANCE_DIR)/"

# The Go SDK's conformance plugin (the TypeScript and Java ones are built
# with their SDKs, the Python one runs from source).
.PHONY: conformance-plugins
conformance-plugins: go-stubs java-sdk
	@mkdir -p $(CONFORMANCE_DIR)/bin
	cd sidecar-sdk/go && $(GO) build -o $(abspath $(CONFORMANCE_DIR))/bin/ ./internal/conformance/cmd/conformance-plugin

# docs/your-own-kind.md, every command word for word, once per language of
# the plugin the reader writes (docs/tests/); its Python is checked with the
# Python SDK's tools.
DOCS_PY := sidecar-sdk/python/.venv/bin
.PHONY: test-docs
test-docs: $(call prepared,testenv node-binaries build sdk-hellos python-sdk) ## run docs/your-own-kind.md word for word, with its plugin in each SDK's language
	$(DOCS_PY)/ruff check docs/tests
	$(DOCS_PY)/ruff format --check docs/tests
	$(DOCS_PY)/mypy --strict docs/tests
	$(DOCS_PY)/python -m pytest -q -p no:asyncio docs/tests

.PHONY: test-postgresql-plugin
test-postgresql-plugin: $(call prepared,databases) ## the Python PostgreSQL plugin: lint, types, tests against real PostgreSQL
	$(DB_ENV); $(MAKE) -C examples/database-table/postgresql-plugin check

# The deployment tests themselves (kustomize, RBAC, compose, Dockerfiles) are
# a workspace crate, run by test-rust; they need deploy/'s pinned tools.
.PHONY: deploy-tools
deploy-tools: ## install the pinned deployment tools (kustomize, hadolint, composecheck) into deploy/.tools
	$(MAKE) -C deploy tools

.PHONY: test-deploy
test-deploy: $(call prepared,deploy-tools) ## lint deploy/'s own Go helper (its tests run in test-rust)
	$(MAKE) -C deploy lint

# Real PostgreSQL and MariaDB from Debian's packages, on loopback, state in
# target/databases (installed with apt-get when missing).
.PHONY: databases
databases: ## install (if missing) and start PostgreSQL and MariaDB on loopback
	examples/database-table/dev/databases.sh install
	examples/database-table/dev/databases.sh start

.PHONY: databases-stop
databases-stop: ## stop the local databases
	examples/database-table/dev/databases.sh stop

# The Python PostgreSQL plugin's virtualenv (the SDK installed from this
# repository, editable); the Rust end-to-end tests run the plugin from it.
.PHONY: python
python: ## create the Python plugin's virtualenv (SDK + plugin)
	$(MAKE) -C examples/database-table/postgresql-plugin install

# --- images: built for real with the Docker engine -----------------------------

# The docker CLI; builds use BuildKit (the Dockerfiles' cache mounts).
DOCKER ?= docker
IMAGE_REGISTRY ?= ghcr.io/kplug
IMAGE_TAG ?= 0.1.0
comma := ,

# `make images` in the background, its output in $(IMAGES_LOG), and the wait
# for it; `make test` runs the tests that need no image in between.
# images-wait prints the log and fails as `make images` did. The background
# build runs at the tests' own priority: it is the longer of the two paths
# on a new machine (about 21 minutes of the two cores' time, cold), and at
# nice 19 it yielded to every compile of the foreground and was still
# building when the tests were done (cold CI 42.0 min, against 36.5 min at the
# same priority). The tests pass beside it (docs/development.md).
IMAGES_LOG := $(TARGET_DIR)/docker/images-background.log
IMAGES_STATUS := $(TARGET_DIR)/docker/images-background.status

.PHONY: images-background
images-background: ## start `make images` in the background (images-wait waits for it); nothing when one is under way
	@mkdir -p $(TARGET_DIR)/docker
	@# CI starts it before `make testenv`, and `make test` then finds it here.
	@if [ -s $(IMAGES_STATUS).pid ] && [ ! -s $(IMAGES_STATUS) ] && kill -0 $$(cat $(IMAGES_STATUS).pid) 2>/dev/null; then \
	  echo "[images] already building in the background; log: $(IMAGES_LOG)"; \
	else \
	  rm -f $(IMAGES_STATUS) $(IMAGES_STATUS).pid; \
	  echo "[images] building in the background; log: $(IMAGES_LOG)"; \
	  ( start=$$(date +%s); status=0; \
	    $(MAKE) images >$(IMAGES_LOG) 2>&1 || status=$$?; \
	    echo "$$status $$(( $$(date +%s) - start ))" >$(IMAGES_STATUS) ) </dev/null & echo $$! >$(IMAGES_STATUS).pid; \
	fi

# images-hold: the first of test-checks' targets. It waits, quietly, for
# the background build to end (fail or not: images-wait says how it went),
# and so keeps one of test-checks' two slots while the images take the CPU.
.PHONY: images-hold
images-hold:
	@start=$$(date +%s); \
	if [ -e $(IMAGES_STATUS).pid ] && [ ! -s $(IMAGES_STATUS) ]; then \
	  echo "[images] still building in the background: the checks run one at a time until it ends ($$(date -u +%H:%M:%S))"; \
	  while [ ! -s $(IMAGES_STATUS) ] && kill -0 $$(cat $(IMAGES_STATUS).pid) 2>/dev/null; do sleep 2; done; \
	  echo "[images] the background build ended after $$(( $$(date +%s) - start ))s of the checks ($$(date -u +%H:%M:%S)): two at a time from here"; \
	fi

.PHONY: images-wait
images-wait: ## wait for images-background, print its log; fails as it did
	@start=$$(date +%s); \
	[ -e $(IMAGES_LOG) ] || { echo "[images] no background build was started: make images-background"; exit 1; }; \
	while [ ! -s $(IMAGES_STATUS) ]; do \
	  kill -0 $$(cat $(IMAGES_STATUS).pid) 2>/dev/null || sleep 1; \
	  [ -s $(IMAGES_STATUS) ] || kill -0 $$(cat $(IMAGES_STATUS).pid) 2>/dev/null \
	    || { echo "[images] the background build ended without a status; its log:"; cat $(IMAGES_LOG); exit 1; }; \
	  sleep 2; \
	done; \
	read -r status seconds <$(IMAGES_STATUS); \
	echo "[images] the background build's log (it took $${seconds}s; waited $$(( $$(date +%s) - start ))s for it here):"; \
	cat $(IMAGES_LOG); \
	if [ "$$status" != 0 ]; then echo "[images] make images failed (exit $$status)"; exit 1; fi

.PHONY: docker-engine
docker-engine: ## start the Docker engine when none runs (deploy/images/engine.sh start; `engine.sh stop` ends it)
	@DOCKER=$(DOCKER) deploy/images/engine.sh start

# One image: `docker build` with its log in $(TARGET_DIR)/docker/build-<name>.log
# and the log's tail when it fails. $(call image,NAME,TAG,BUILD ARGUMENTS,WHAT).
define image
	@start=$$(date +%s); \
	echo "[images] $(2) ($(4))..."; \
	DOCKER_BUILDKIT=1 $(DOCKER) build --progress=plain $(3) -t $(2) . > $(TARGET_DIR)/docker/build-$(1).log 2>&1 \
	  || { tail -40 $(TARGET_DIR)/docker/build-$(1).log; echo "[images] $(1) failed; the whole log: $(TARGET_DIR)/docker/build-$(1).log"; exit 1; }; \
	echo "[images] $(1) built in $$(( $$(date +%s) - start ))s"
endef

# Every image compose.yaml and the manifests name. The kubectl stand-in
# (deploy/images/standins.sh) is the kubectl node-binaries builds.
.PHONY: images
images: docker-engine ## build every kplug image and compose.yaml's kube-testenv with the Docker engine (local stand-ins for base images no registry here serves; buildx and Compose v2 from their Go modules when missing)
	@GO=$(GO) DOCKER=$(DOCKER) deploy/images/cli-plugins.sh buildx compose
	@# kubectl's stand-in last: it is the node binaries' kubectl, which CI
	@# builds in the foreground meanwhile (the build waits for that one).
	@GO=$(GO) DOCKER=$(DOCKER) deploy/images/standins.sh --except-kubectl
	@$(MAKE) $(TARGET_DIR)/testenv/kubectl
	@GO=$(GO) DOCKER=$(DOCKER) KUBECTL=$(TARGET_DIR)/testenv/kubectl deploy/images/standins.sh
	@mkdir -p $(TARGET_DIR)/docker
	$(call image,kplug-operator,$(IMAGE_REGISTRY)/kplug-operator:$(IMAGE_TAG),--target kplug-operator,Dockerfile --target kplug-operator; the first build compiles the workspace in release mode$(comma) ten minutes or more)
	$(call image,sqlite-plugin,$(IMAGE_REGISTRY)/sqlite-plugin:$(IMAGE_TAG),--target sqlite-plugin,Dockerfile --target sqlite-plugin; the workspace build is shared)
	$(call image,mariadb-plugin,$(IMAGE_REGISTRY)/mariadb-plugin:$(IMAGE_TAG),--target mariadb-plugin,Dockerfile --target mariadb-plugin; the workspace build is shared)
	$(call image,kplug-exec,$(IMAGE_REGISTRY)/kplug-exec:$(IMAGE_TAG),--target kplug-exec,Dockerfile --target kplug-exec; the workspace build is shared)
	$(call image,sqlite-shell-plugin,$(IMAGE_REGISTRY)/sqlite-shell-plugin:$(IMAGE_TAG),--target sqlite-shell-plugin,Dockerfile --target sqlite-shell-plugin)
	$(call image,postgresql-server-plugin,$(IMAGE_REGISTRY)/postgresql-server-plugin:$(IMAGE_TAG),--target postgresql-server-plugin,Dockerfile --target postgresql-server-plugin; the workspace build is shared)
	$(call image,backup-plugin,$(IMAGE_REGISTRY)/backup-plugin:$(IMAGE_TAG),--target backup-plugin,Dockerfile --target backup-plugin; the workspace build is shared)
	$(call image,postgresql-plugin,$(IMAGE_REGISTRY)/postgresql-plugin:$(IMAGE_TAG),-f examples/database-table/postgresql-plugin/Dockerfile,examples/database-table/postgresql-plugin/Dockerfile)
	@if ! $(DOCKER) image inspect kplug-kube-testenv:dev >/dev/null 2>&1 && [ -d $(K8S_GOCACHE) ]; then \
	  start=$$(date +%s); \
	  echo "[images] seeding kube-testenv's Go build cache from $(K8S_GOCACHE) ($$(du -sh $(K8S_GOCACHE) | cut -f1); deploy/images/go-cache-seed.Dockerfile)..."; \
	  DOCKER_BUILDKIT=1 $(DOCKER) build --progress=plain -f deploy/images/go-cache-seed.Dockerfile -t kplug-go-cache-seed:dev $(K8S_GOCACHE) \
	    > $(TARGET_DIR)/docker/build-go-cache-seed.log 2>&1 \
	    || { tail -20 $(TARGET_DIR)/docker/build-go-cache-seed.log; echo "[images] the seed failed (the image's build compiles everything instead)"; }; \
	  $(DOCKER) image rm kplug-go-cache-seed:dev >/dev/null 2>&1 || true; \
	  echo "[images] seeded in $$(( $$(date +%s) - start ))s"; \
	fi
	$(call image,kube-testenv,kplug-kube-testenv:dev,-f deploy/compose/kube-testenv.Dockerfile,deploy/compose/kube-testenv.Dockerfile for compose.yaml; the first build compiles kube-apiserver in a Go container$(comma) several minutes$(comma) or links what the seed above brought)

# --- demo ----------------------------------------------------------------------

.PHONY: demo
demo: testenv ## the database-table walkthrough: control plane, operator, SQLite plugin, a table converging
	@echo "building the operator, the SQLite plugin and the demo (first build takes a few minutes)..."
	$(CARGO) build -p kplug-operator-bin -p sqlite-plugin -p mariadb-plugin -p database-table-demo
	$(TARGET_DIR)/debug/kplug-demo

# --- chaos -------------------------------------------------------------------

CHAOS_TABLES ?= 500
CHAOS_SECONDS ?= 40

.PHONY: chaos
chaos: testenv ## CHAOS_TABLES (500) SQLite tables converge through plugin and leader SIGKILLs, an API server restart and edits; checked in SQLite (make test runs 60)
	$(CARGO) build -p kplug-operator-bin -p sqlite-plugin
	KPLUG_CHAOS_TABLES=$(CHAOS_TABLES) KPLUG_CHAOS_SECONDS=$(CHAOS_SECONDS) \
	  $(CARGO) test -p kplug-operator --test chaos -- --nocapture

# --- benchmarks ----------------------------------------------------------------

# `make bench` measures kplug against what users would pick instead, each
# baseline in the same run, and prints one table (saved as
# $(TARGET_DIR)/bench/report.md, the processes' logs and metrics next to it
# in bench/end-to-end/):
# - P1, polyglot: every SDK's echo plugin vs the same service in its bare
#   gRPC library (tonic, grpc-go, @grpc/grpc-js, grpcio, grpc-java), alone
#   and with the language's standard JSON library, each a process of its
#   own, from a tonic client ($(TARGET_DIR)/bench/polyglot.md).
#   KPLUG_BENCH_* in the environment pick the SDKs, sizes and call counts
#   (sidecar-sdk/benches/polyglot.rs), e.g.
#     KPLUG_BENCH_SDKS=go,typescript KPLUG_BENCH_CALLS=1000 make bench-polyglot
# - P2-P4, end to end (kplug-bench, bench/): converging BENCH_TABLES tables
#   against an in-process kube-rs controller, reacting to a plugin's start,
#   SIGKILL and restart, the operator's footprint over BENCH_FOOTPRINT
#   tables and extensions against a bare reflector, and (P5) over
#   BENCH_CHILDREN tables with three ConfigMap children each, with the
#   writes a restart makes to them, each on a control plane of its own. `kplug-bench run --help` says what is measured how.
# roundtrip: the Rust SDK vs bare tonic in one process (criterion), apart.
BENCH_TABLES ?= 2000
BENCH_ROUNDS ?= 2
BENCH_PARTS ?= p2,p3,p4,p5
BENCH_WAITING ?= 1000
BENCH_FOOTPRINT ?= 10000
BENCH_CHILDREN ?= 1000

.PHONY: bench
bench: bench-polyglot bench-end-to-end ## kplug vs bare gRPC servers, an in-process kube-rs controller and a bare reflector (P1-P5), one table in target/bench/report.md

.PHONY: bench-roundtrip
bench-roundtrip: ## the Rust SDK vs bare tonic in one process (criterion)
	$(CARGO) bench -p kplug-sidecar --bench roundtrip

.PHONY: bench-polyglot
bench-polyglot: bench-servers ## P1: every SDK vs its bare gRPC library, each a process, over Unix sockets (target/bench/polyglot.md)
	$(CARGO) bench -p kplug-sidecar --bench polyglot

.PHONY: bench-end-to-end
bench-end-to-end: testenv ## P2-P5 (then the whole table, with P1's rows if bench-polyglot ran): kplug end to end against its baselines on a real API server
	$(CARGO) build --release -p kplug-operator-bin -p sqlite-plugin -p kplug-bench --bins
	$(TARGET_DIR)/release/kplug-bench run --tables $(BENCH_TABLES) --rounds $(BENCH_ROUNDS) \
	  --waiting $(BENCH_WAITING) --footprint $(BENCH_FOOTPRINT) --children $(BENCH_CHILDREN) \
	  --parts $(BENCH_PARTS) \
	  $(if $(wildcard $(TARGET_DIR)/bench/polyglot.md),--p1 $(TARGET_DIR)/bench/polyglot.md)

# The benchmarks once at tiny sizes, in the test profile, as tests (the
# polyglot one, fifteen servers with three JVMs, took 31-77 s on a 2-core box
# busy with a CI run; the end-to-end one about 1 min): every bench server
# starts, answers and echoes what it should, and every part of the end-to-end run completes (its objects
# converge, its processes start and stop). Their numbers mean nothing at
# that size and nothing is asserted on time; the tables go to
# $(TARGET_DIR)/bench/smoke/, not over a real run's. The polyglot bench is
# the binary that the test build made (dev/test-binaries.py
# --only): `cargo test --bench polyglot` alone would build another feature set
# of the shared dependencies, and the next full test build would rebuild the
# workspace again.
.PHONY: test-bench
test-bench: $(call prepared,build bench-servers testenv databases) ## the benchmarks once at tiny sizes: every bench server answers, every end-to-end part completes
	$(DB_ENV); export KPLUG_BENCH_CALLS=20 KPLUG_BENCH_INFLIGHT_CALLS=64 KPLUG_BENCH_ROUNDS=2 \
	  KPLUG_BENCH_OUT=$(abspath $(TARGET_DIR))/bench/smoke/polyglot.md; \
	  CARGO=$(CARGO) python3 dev/test-binaries.py --only kplug-sidecar/polyglot -- --bench
	$(TARGET_DIR)/debug/kplug-bench run --tables 20 --rounds 1 --waiting 20 --footprint 20 --children 20 \
	  --p1 $(TARGET_DIR)/bench/smoke/polyglot.md --out $(TARGET_DIR)/bench/smoke/report.md

# The Go servers as binaries in $(TARGET_DIR)/bench/go, the TypeScript ones
# compiled to sidecar-sdk/typescript/build/bench, the Python SDK's virtualenv
# (sidecar-sdk/python/.venv), the Java ones (sidecar-sdk/java/bench, built by
# java-sdk's mvn package) as launchers in $(JAVA_BENCH) next to copies of
# their jars, replaced by a rename as java-sdk's are; the Rust ones are the
# bench binary itself.
JAVA_BENCH := $(abspath $(TARGET_DIR))/bench/java

# $(call java-bench-launcher,NAME,MAIN CLASS): $(JAVA_BENCH)/NAME, an
# executable that starts a Java bench server (exec, as java-launcher).
define java-bench-launcher
	@printf '%s\n' '#!/bin/sh' \
	  '# Written by `make bench-servers`: starts $(2) from $(JAVA_BENCH).' \
	  'dir=$(JAVA_BENCH)' \
	  'exec java -cp "$$dir/kplug-bench.jar:$$dir/kplug-sidecar.jar:$$(cat "$$dir/classpath")" $(2) "$$@"' \
	  >$(JAVA_BENCH)/$(1).tmp
	@chmod +x $(JAVA_BENCH)/$(1).tmp && mv $(JAVA_BENCH)/$(1).tmp $(JAVA_BENCH)/$(1)
endef

.PHONY: bench-servers
bench-servers: go-stubs python-sdk java-sdk ## build the Go, TypeScript, Python and Java bench servers
	cd sidecar-sdk/go && $(GO) build -o $(abspath $(TARGET_DIR))/bench/go/ ./internal/bench/sdkecho ./internal/bench/bareecho ./internal/bench/barejsonecho
	$(MAKE) -C sidecar-sdk/typescript bench
	@mkdir -p $(JAVA_BENCH)
	@for f in sdk/target/kplug-sidecar.jar bench/target/kplug-bench.jar bench/target/classpath; do \
	  cp $(JAVA_SDK_DIR)/$$f $(JAVA_BENCH)/$${f##*/}.tmp && mv $(JAVA_BENCH)/$${f##*/}.tmp $(JAVA_BENCH)/$${f##*/}; \
	done
	$(call java-bench-launcher,sdk-echo,io.kplug.bench.SdkEcho)
	$(call java-bench-launcher,bare-echo,io.kplug.bench.BareEcho)
	$(call java-bench-launcher,bare-json-echo,io.kplug.bench.BareJsonEcho)

# --- fuzzing -------------------------------------------------------------------

# cargo-fuzz (libFuzzer) targets in fuzz/, its own workspace: heartbeat
# checks, socket confinement, and the checks on plugins' Reconcile and
# Finalize responses (fuzz/README.md). They build with nightly, without a
# sanitizer (the code under test is safe Rust; ASan made runs 4-5x slower),
# in target/fuzz/build; corpora grow in target/fuzz/corpus, crashes land in
# fuzz/artifacts/<target>/. The timed fuzzing is not part of `make test` nor
# of CI: `make test` replays every committed seed and regression input
# through the same functions on stable (fuzz/lib/tests/replay.rs); fuzz for
# long apart from CI, with `make fuzz-long`.
CARGO_FUZZ_VERSION := 0.13.2
FUZZ_TOOLCHAIN ?= nightly
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_OUT := $(TARGET_DIR)/fuzz
FUZZ_ENV = FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_OUT=$(FUZZ_OUT) \
	CARGO_FUZZ="$(CARGO) +$(FUZZ_TOOLCHAIN) fuzz" FUZZ_FLAGS="$(FUZZ_FLAGS)"
FUZZ_FLAGS = --fuzz-dir fuzz --sanitizer none --target-dir $(abspath $(FUZZ_OUT))/build

.PHONY: fuzz-tools
fuzz-tools: ## install cargo-fuzz (pinned) and the nightly toolchain when missing
	@rustup toolchain list | grep -q '^$(FUZZ_TOOLCHAIN)' || rustup toolchain install $(FUZZ_TOOLCHAIN) --profile minimal
	@if [[ "$$($(CARGO) fuzz --version 2>/dev/null)" == "cargo-fuzz $(CARGO_FUZZ_VERSION)" ]]; then \
	  echo "cargo-fuzz $(CARGO_FUZZ_VERSION) is installed"; \
	else \
	  $(CARGO) install cargo-fuzz --version $(CARGO_FUZZ_VERSION) --locked; \
	fi

.PHONY: fuzz-build
fuzz-build: fuzz-tools ## build the fuzz targets (target/fuzz/build)
	$(CARGO) +$(FUZZ_TOOLCHAIN) fuzz build $(FUZZ_FLAGS)

.PHONY: fuzz
fuzz: fuzz-build ## fuzz every target for FUZZ_SECONDS (default 60) each; fails on any crash
	$(FUZZ_ENV) fuzz/run.sh $(FUZZ_TARGETS)

.PHONY: fuzz-long
fuzz-long: ## `make fuzz` for 600 s per target (FUZZ_TARGETS="a b" picks targets)
	$(MAKE) fuzz FUZZ_SECONDS=600

# --- lint ------------------------------------------------------------------

BUF := node_modules/.bin/buf
NPM_STAMP := node_modules/.kplug-npm-installed

.PHONY: lint
lint: lint-offline lint-java ## rustfmt, clippy, module sizes, rustdoc, go vet, buf lint and buf breaking, ruff and mypy on dev/'s scripts, google-java-format on the Java SDK

# What of `lint` needs nothing from the network: `make test` runs it beside
# the real node's tests (lint-java's Maven may fetch its formatter).
.PHONY: lint-offline
lint-offline: fmt-check clippy module-lines rustdoc go-vet buf-lint buf-breaking lint-scripts ## every lint but lint-java's

# No Rust module over 400 lines, its unit tests aside (docs/development.md).
.PHONY: module-lines
module-lines: ## no Rust module over 400 lines without its unit tests
	python3 dev/module-lines.py 400

# The repository's own Python scripts (dev/), with the Python SDK's tools.
.PHONY: lint-scripts
lint-scripts: $(call prepared,python-sdk) ## ruff and mypy --strict on dev/'s Python scripts
	$(DOCS_PY)/ruff check --line-length 100 dev
	$(DOCS_PY)/ruff format --check --line-length 100 dev
	$(DOCS_PY)/mypy --strict dev/test-binaries.py dev/module-lines.py

.PHONY: fmt-check
fmt-check: ## cargo fmt --check
	$(CARGO) fmt --all -- --check

.PHONY: fmt
fmt: ## format Rust and Go sources
	$(CARGO) fmt --all
	gofmt -w testenv/*.go

.PHONY: clippy
clippy: ## clippy on every target, warnings are errors (too_many_lines at 60: clippy.toml)
	$(CARGO) clippy --workspace --all-targets -- -D warnings

.PHONY: rustdoc
rustdoc: ## cargo doc of the workspace, private items included: a broken or ambiguous link is an error
	RUSTDOCFLAGS='-D warnings' $(CARGO) doc --workspace --no-deps --document-private-items

# -trimpath as in $(GO_BUILD): vet type-checks against its dependencies'
# compiled export data, and with the flags `make testenv` built them with,
# that is all in Go's build cache already (on a new machine a vet without it
# compiled the whole k8s.io/kubernetes module a second time: 4 min, against 1).
.PHONY: go-vet
go-vet: ## go vet and gofmt check of testenv
	@unformatted=$$(gofmt -l testenv/*.go); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed (make fmt): $$unformatted"; exit 1; fi
	@# In the Kubernetes builds' cache: vet needs every dependency's export
	@# data, which `make testenv` compiled there (anywhere else, it compiles
	@# kube-apiserver's dependencies again: 2 minutes of a cold CI run).
	cd testenv && GOCACHE=$(K8S_GOCACHE) $(GO) vet -trimpath ./...

# buf comes from the npm registry, pinned by package-lock.json (1.74.0: the
# newest release published there for every platform, which `npm ci` needs).
# A stamp file, because npm keeps the packed mtimes of the files it installs.
.PHONY: tools
tools: $(NPM_STAMP) ## install the pinned dev tools (npm ci: buf)

$(NPM_STAMP): package.json package-lock.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

.PHONY: buf-lint
buf-lint: $(NPM_STAMP) ## lint the protos (proto/buf.yaml)
	cd proto && ../$(BUF) lint

# Compares proto/ with the same directory at the latest release tag (v*).
.PHONY: buf-breaking
buf-breaking: $(NPM_STAMP) ## check the protos for breaking changes against the latest v* tag
	@tag=$$(git tag --list 'v*' --sort=-version:refname | sed -n 1p); \
	if [ -z "$$tag" ]; then \
	  echo "buf-breaking: no v* release tag yet; nothing to compare against (skipped)"; \
	else \
	  echo "buf-breaking: comparing proto/ with $$tag"; \
	  cd proto && ../$(BUF) breaking --against "../.git#tag=$$tag,subdir=proto"; \
	fi

# --- CI ---------------------------------------------------------------------

# What CI costs (docs/development.md, "CI budget"): `.ci/run` on a fresh
# clone of HEAD, as CI runs it, with its closing table of minutes per section.
.PHONY: ci-cold
ci-cold: ## wipe every cache a new machine lacks (Cargo, Go, npm, pip, Maven, nightly, the CI run's Cargo build, Docker images and build cache), then run .ci/run on a fresh clone of HEAD
	dev/ci-cold.sh

.PHONY: ci-warm
ci-warm: ## run .ci/run on a fresh clone of HEAD, caches kept
	dev/ci-cold.sh --warm

# --- housekeeping ------------------------------------------------------------

.PHONY: clean
clean: ## remove build outputs (target/, including kube-testenv) and tool installs
	$(CARGO) clean
	rm -rf node_modules .pytest_cache
