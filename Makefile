# The OpenBao operator. `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# Tool binaries are built once into this cache, keyed by version, and linked into bin/.
export OPENBAO_OPERATOR_CACHE ?= $(HOME)/.cache/openbao-operator
export OPENBAO_OPERATOR_BIN := $(CURDIR)/bin
export GOTOOLCHAIN := local

BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(BIN)/controller-gen
CRD_REF_DOCS := $(BIN)/crd-ref-docs
GO_TEST := go test -count=1
# Unit tests are every package outside test/, whose subdirectories hold the slower tiers.
UNIT_PACKAGES = $$(go list ./... | grep -v '/test/')

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the operator, the bao-wrapper and the kubectl-openbao plugin binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/openbao-operator ./cmd/openbao-operator
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/bao-wrapper ./cmd/bao-wrapper
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-openbao ./cmd/kubectl-openbao

.PHONY: tools
tools: ## Build the pinned tool binaries and install Azurite from npm (cached outside the clone), linked into bin/.
	@bash test/tools/build.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs and RBAC from the API markers (and the tenancy install's roles from them), and docs/api.md.
	@bash test/tools/build.sh controller-gen crd-ref-docs
	$(CONTROLLER_GEN) object paths="./api/..."
	$(CONTROLLER_GEN) crd rbac:roleName=openbao-operator-manager paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./internal/crdgen/cmd/crdgen config/crd/bases/openbao.org_openbaoclusters.yaml
	go run ./internal/tenancy/cmd/rbacgen config/rbac/role.yaml config/tenancy/roles
	@# The same command as docs/api_test.go's, which fails when docs/api.md is stale.
	$(CRD_REF_DOCS) --config hack/api-docs/config.yaml --templates-dir hack/api-docs/templates \
		--source-path ./api --renderer markdown --output-path docs/api.md --log-level ERROR
	@$(MAKE) --no-print-directory chart-sync

# The install chart keeps copies of config/ (helm installs crds/ as they are;
# templates cannot read outside the chart); helm-charts' tests fail when
# they drift.
OPERATOR_CHART := helm-charts/openbao-operator
.PHONY: chart-sync
chart-sync: ## Copy the CRDs, the roles, the webhooks, the admission policies and the Grafana dashboard from config/ into the install chart.
	rm -f $(OPERATOR_CHART)/crds/*.yaml
	cp config/crd/bases/*.yaml $(OPERATOR_CHART)/crds/
	cp config/rbac/role.yaml $(OPERATOR_CHART)/files/manager-role.yaml
	cp config/rbac/openbao_editor_role.yaml config/rbac/openbao_viewer_role.yaml $(OPERATOR_CHART)/files/
	cp config/webhook/manifests.yaml $(OPERATOR_CHART)/files/webhook.yaml
	cp config/admission/replicas-warning.yaml config/admission/disruption-budget.yaml config/admission/managed-objects.yaml $(OPERATOR_CHART)/files/admission/
	cp config/tenancy/roles/*_role.yaml config/tenancy/tenant-bindings-policy.yaml $(OPERATOR_CHART)/files/tenancy/
	cp config/grafana/openbao-operator-dashboard.json $(OPERATOR_CHART)/files/grafana/
	@$(MAKE) --no-print-directory chart-readme

# helm-docs prints nothing (and exits 0) for a chart it cannot read, so the
# README is replaced only by a non-empty render.
.PHONY: chart-readme
chart-readme: ## Write the install chart's README.md from values.yaml's comments with helm-docs (built from its pinned module on first use).
	@bash test/tools/build.sh helm-docs
	$(BIN)/helm-docs --chart-search-root=$(OPERATOR_CHART) --template-files=README.md.gotmpl --log-level=warning \
		--dry-run > $(OPERATOR_CHART)/README.md.tmp
	@test -s $(OPERATOR_CHART)/README.md.tmp || { rm -f $(OPERATOR_CHART)/README.md.tmp; echo "helm-docs rendered nothing"; exit 1; }
	mv $(OPERATOR_CHART)/README.md.tmp $(OPERATOR_CHART)/README.md

.PHONY: lint
lint: ## Check formatting (gofmt) and run go vet.
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...

.PHONY: test
test: ## Run every test tier: unit, envtest, OpenBao, e2e, release, OLM.
	@$(MAKE) --no-print-directory -j2 tools release-tools docs-tools
	@# envtest and OpenBao share nothing (each its own apiserver, bao
	@# processes and free ports) and mostly wait: together they take about
	@# as long as the slower alone. The unit and monitoring tiers (a minute
	@# warm, minutes cold) and the release tier's linux/arm64 compile
	@# (minutes cold, nothing warm) fill that wait. -Otarget keeps each
	@# tier's output whole.
	@$(MAKE) --no-print-directory -j5 -Otarget test-unit test-monitoring test-envtest test-openbao release-prebuild
	@# The e2e tier mostly waits on its node (kubelet, pods, Raft): OLM's
	@# tools, minutes of a cold build and nothing warm, build beside it.
	@$(MAKE) --no-print-directory -j2 -Otarget test-e2e olm-tools
	@$(MAKE) --no-print-directory test-release
	@$(MAKE) --no-print-directory test-olm

.PHONY: test-unit
test-unit: ## Unit tests: pure packages, golden files, fuzz seeds.
	@echo "=== tier: unit"
	$(GO_TEST) $(UNIT_PACKAGES)

.PHONY: test-monitoring
test-monitoring: ## Monitoring tier: the chart's alert rules and the Grafana dashboard, checked and unit-tested by promtool from bin/.
	@echo "=== tier: monitoring"
	$(GO_TEST) ./test/monitoring/...

.PHONY: test-envtest
test-envtest: ## envtest tier: the real kube-apiserver and etcd from bin/.
	@echo "=== tier: envtest"
	@# -parallel 4: the real-OpenBao cases run in parallel and mostly wait on
	@# bao (Raft election, sys/init), not on the CPU.
	$(GO_TEST) -timeout 20m -parallel 4 ./test/envtest/...

.PHONY: test-openbao
test-openbao: ## OpenBao tier: the real bao 2.4.0 binary on loopback.
	@echo "=== tier: openbao"
	@# -parallel 8: the tests run their own bao processes and mostly wait on
	@# them (elections, sys/init); together they use a fraction of the cores.
	$(GO_TEST) -timeout 20m -parallel 8 ./test/openbao/... ./test/freeport/...

# The local node: a real single-node Kubernetes under $(LOCALNODE_DIR)
# (override with OPENBAO_LOCALNODE_DIR), run by `go run $(LOCALNODE)`.
LOCALNODE := ./test/localnode/cmd/localnode

.PHONY: test-e2e
test-e2e: ## e2e tier: a real single-node Kubernetes with the operator installed from its Helm chart (root).
	@echo "=== tier: e2e"
	@# The tier tears its node down itself; the extra `down` cleans up after a
	@# run that was killed (for example by the test timeout).
	@# -v shows the node's timings (up, Ready, images, teardown) in CI logs.
	$(GO_TEST) ./test/localnode/...
	@# Tests that call t.Parallel wait on the node, not on the 2 cores:
	@# -parallel 8 (the default is GOMAXPROCS): Go starts them in no set
	@# order, and with 8 slots the longest (backup) rarely waits for one,
	@# while not every cluster forms at once.
	@rc=0; $(GO_TEST) -v -parallel 8 -timeout 20m ./test/e2e/... || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

# The docs' generators: crd-ref-docs writes docs/api.md and helm-docs the
# install chart's README.md. `make generate` builds them, and the unit
# tier runs them to find a stale file (docs/api_test.go,
# helm-charts/operator_chart_readme_test.go); `make tools` leaves them out
# (a demo or a benchmark has no use for them).
.PHONY: docs-tools
docs-tools: ## Build crd-ref-docs and helm-docs (the install chart's README) from their pinned modules (cached like the other tools).
	@bash test/tools/build.sh crd-ref-docs helm-docs

# The release's SBOM tool: `make test` builds it with the other tools; a
# release builds it on demand.
.PHONY: release-tools
release-tools: ## Build cyclonedx-gomod from its pinned module (cached like the other tools).
	@bash test/tools/build.sh cyclonedx-gomod

# Compiles what the release tier builds for linux/arm64 into Go's build
# cache, with the release's flags (internal/release goBuild), so that the
# tier only links.
.PHONY: release-prebuild
release-prebuild: ## Compile the release's linux/arm64 binaries into Go's build cache.
	@for pkg in ./cmd/openbao-operator ./cmd/bao-wrapper; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 GOFLAGS=-mod=readonly \
			go build -trimpath -buildvcs=false -o /dev/null $$pkg; \
	done

.PHONY: test-release
test-release: ## Release tier: two releases (internal/release) into a loopback OCI registry the node pulls from; Helm installs the OCI chart by digest, forms a cluster, checks signatures and the SBOM, upgrades the operator and counts OpenBao restarts (root).
	@echo "=== tier: release"
	@# As test-e2e: the tier tears its node down itself; the extra `down`
	@# cleans up after a killed run.
	@rc=0; $(GO_TEST) -v -timeout 20m ./test/release || rc=$$?; \
	go run $(LOCALNODE) down -owner release; exit $$rc

# OLM v0 and opm: `make tools` leaves them out so that `make demo` does not
# pay their cold build; `make test` builds both sets.
OLM_TOOLS := opm grpc_health_probe olm-operator olm-catalog-operator olm-package-server olm-copy-content olm-cpb

.PHONY: olm-tools
olm-tools: ## Build OLM's components and opm from their pinned wrapper module (cached like the other tools).
	@bash test/tools/build.sh $(OLM_TOOLS)

.PHONY: test-olm
test-olm: olm-tools ## OLM tier: a real OLM on the local node installs the operator from bundle/ + olm/catalog via olm/install.yaml, forms a cluster, upgrades, uninstalls and installs it for one namespace (root).
	@echo "=== tier: olm"
	@# As test-e2e: the tier tears its node down itself; the extra `down`
	@# cleans up after a killed run.
	@rc=0; $(GO_TEST) -v -timeout 20m ./test/olm || rc=$$?; \
	go run $(LOCALNODE) down -owner olm; exit $$rc

.PHONY: bench-bootstrap
bench-bootstrap: tools ## Benchmark CR created -> 3 Raft voters against a bare-script floor on the local node (root; BOOTSTRAP_BENCH_RUNS, default 3).
	@# Reuses a node that is up (make demo), else starts one and tears it down
	@# as test-e2e does; the extra `down` cleans up after a killed run.
	@rc=0; go test -run '^$$' -bench TimeToThreeVoters -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-timers
bench-timers: tools ## Benchmark 3-voter formation of bao on loopback with OpenBao's timers against the operator's (BOOTSTRAP_BENCH_RUNS, default 1).
	go test -count=1 -run '^$$' -bench TimeToThreeVotersDefaultVsTuned -benchtime 1x -timeout 30m -v ./test/openbao

.PHONY: bench-scale
bench-scale: tools ## Benchmark 200 OpenBaoClusters against one cluster-wide operator on envtest and refresh BENCHMARKS.md (SCALE_CLUSTERS, SCALE_NAMESPACES, SCALE_IDLE).
	BENCH_SCALE_OUT=$(CURDIR)/BENCHMARKS.md go test -count=1 -run '^$$' -bench IdleAtScale -benchtime 1x -timeout 90m -v ./test/scale
.PHONY: bench-scale-tenancy
bench-scale-tenancy: tools ## Benchmark the tenancy install on envtest: 1000 OpenBaoClusters in 500 namespaces, each handed over by an OpenBaoTenant; refresh BENCHMARKS.md (SCALE_CLUSTERS, SCALE_NAMESPACES, SCALE_IDLE).
	SCALE_MODE=tenancy BENCH_SCALE_OUT=$(CURDIR)/BENCHMARKS.md go test -count=1 -run '^$$' -bench IdleAtScale -benchtime 1x -timeout 120m -v ./test/scale
.PHONY: bench-backup
bench-backup: tools ## Benchmark backups of a cluster holding 1 GiB against a bare snapshot-to-S3 copy on the local node (root; BACKUP_BENCH_RUNS, BACKUP_BENCH_BYTES); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkBackup$$' -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-drain
bench-drain: tools ## Benchmark every server of a 3-server cluster evicted in turn (as kubectl drain does) with the drain guard and without, under a plain writing client, on the local node (root); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkDrain$$' -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-rollout
bench-rollout: tools ## Benchmark config-change rollouts of a 3-server cluster under a plain writing client against the sum of its pods' restarts, with a timeline per pod, on the local node (root; ROLLOUT_BENCH_RUNS, default 3); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkRollout$$' -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-restore
bench-restore: tools ## Benchmark restores of a 1 GiB snapshot against a bare download-and-POST on the local node (root; RESTORE_BENCH_RUNS, RESTORE_BENCH_BYTES); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkRestore$$' -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-idle
bench-idle: tools ## Benchmark 10 idle one-server clusters for 30 min on the local node: the operator's API and OpenBao requests (root; IDLE_BENCH_CLUSTERS, IDLE_BENCH_WINDOW); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkIdle$$' -benchtime 1x -timeout 120m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

.PHONY: bench-dr
bench-dr: tools ## Benchmark a disaster-recovery standby's RPO and RTO: primary backing up every minute, standby following, primary lost, standby promoted, on the local node (root; DR_BENCH_RUNS, default 3); writes BENCHMARKS.md.
	@# Reuses a node that is up, else starts one and tears it down, as
	@# bench-bootstrap does.
	@rc=0; go test -run '^$$' -bench '^BenchmarkDR$$' -benchtime 1x -timeout 60m -v ./test/e2e || rc=$$?; \
	go run $(LOCALNODE) down -owner e2e; exit $$rc

# The OLM bundle: bundle/ (and bundle.Dockerfile) from config/manifests, by
# operator-sdk built from its pinned wrapper module (minutes cold, once).
BUNDLE_VERSION ?= 0.1.0
BUNDLE_CHANNEL ?= candidate
OPERATOR_IMAGE ?= ghcr.io/openbao/openbao-operator:$(BUNDLE_VERSION)

.PHONY: bundle
bundle: ## Generate bundle/ from config/ with operator-sdk and validate it (operatorframework suite).
	@bash test/tools/build.sh operator-sdk kustomize
	rm -rf bundle/manifests bundle/metadata
	$(BIN)/kustomize build config/manifests \
		| sed 's|ghcr.io/openbao/openbao-operator:latest|$(OPERATOR_IMAGE)|' \
		| $(BIN)/operator-sdk generate bundle -q --overwrite --version $(BUNDLE_VERSION) \
			--package openbao-operator --channels $(BUNDLE_CHANNEL) --default-channel $(BUNDLE_CHANNEL)
	@# createdAt is the time of the run: dropped, so that a second run gives the same bytes.
	sed -i "/^    createdAt: /d" bundle/manifests/openbao-operator.clusterserviceversion.yaml
	@# Its one warning (events "removed in v1.25") is about events/v1beta1;
	@# the role asks for the core and events.k8s.io/v1 events.
	$(BIN)/operator-sdk bundle validate ./bundle --select-optional suite=operatorframework

.PHONY: catalog-validate
catalog-validate: ## Validate the file-based catalog under olm/catalog with opm (built from its pinned wrapper module).
	@bash test/tools/build.sh opm
	$(BIN)/opm validate olm/catalog

# A release: every artifact built, pushed and signed by `go run ./cmd/release`
# (internal/release), from a clean tree; docs/development.md, Releasing.
# The signing key and the other inputs come from the environment.
VERSION ?=
REGISTRY ?=
export SIGNING_KEY_FILE COSIGN_KEY OPENBAO_IMAGE PLAIN_HTTP PLATFORMS OUT_DIR DOWNLOAD_BASE_URL

.PHONY: release
release: ## Build, sign and push a release: make release VERSION=0.2.0 REGISTRY=ghcr.io/openbao SIGNING_KEY_FILE=cosign.key (writes dist/VERSION).
	@test -n "$(VERSION)" -a -n "$(REGISTRY)" || { echo "usage: make release VERSION=x.y.z REGISTRY=host[/path] (SIGNING_KEY_FILE=...)"; exit 2; }
	go run ./cmd/release -version "$(VERSION)" -registry "$(REGISTRY)"

# The operator image for users of Operator-SDK projects' targets, built by
# $(CONTAINER_TOOL) from the Dockerfile: the same binaries, flags and user as
# the release's Go-built image.
IMG ?= ghcr.io/openbao/openbao-operator:dev
CONTAINER_TOOL ?= docker

.PHONY: docker-build
docker-build: ## Build the operator image IMG with $(CONTAINER_TOOL) (docker or podman/buildah) from the Dockerfile.
	$(CONTAINER_TOOL) build -t $(IMG) --build-arg VERSION=$(or $(VERSION),dev) .

.PHONY: docker-push
docker-push: ## Push the operator image IMG with $(CONTAINER_TOOL).
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: images
images: ## Build the operator, OpenBao, pause and CoreDNS images and import them into a running local node.
	go run $(LOCALNODE) images

.PHONY: demo
demo: tools ## Start the local node, install the operator and a 3-server OpenBao cluster in openbao-demo; leave it running.
	go run $(LOCALNODE) demo

.PHONY: demo-down
demo-down: ## Tear down the local node of `make demo` and restore the host.
	go run $(LOCALNODE) down
