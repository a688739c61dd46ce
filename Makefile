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
GO_TEST := go test -count=1
# Unit tests are every package outside test/, whose subdirectories hold the slower tiers.
UNIT_PACKAGES = $$(go list ./... | grep -v '/test/')

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the operator and the bao-wrapper binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/openbao-operator ./cmd/openbao-operator
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/bao-wrapper ./cmd/bao-wrapper

.PHONY: tools
tools: ## Build the pinned tool binaries (cached outside the clone) and link them into bin/.
	@bash test/tools/build.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs and RBAC from the API markers.
	@bash test/tools/build.sh controller-gen
	$(CONTROLLER_GEN) object paths="./api/..."
	$(CONTROLLER_GEN) crd rbac:roleName=openbao-operator-manager paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./internal/crdgen/cmd/crdgen config/crd/bases/openbao.org_openbaoclusters.yaml

.PHONY: lint
lint: ## Check formatting (gofmt) and run go vet.
	@unformatted=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...

.PHONY: test
test: tools ## Run every test tier: unit, envtest, OpenBao.
	@$(MAKE) --no-print-directory test-unit test-envtest test-openbao

.PHONY: test-unit
test-unit: ## Unit tests: pure packages, golden files, fuzz seeds.
	@echo "=== tier: unit"
	$(GO_TEST) $(UNIT_PACKAGES)

.PHONY: test-envtest
test-envtest: ## envtest tier: the real kube-apiserver and etcd from bin/.
	@echo "=== tier: envtest"
	$(GO_TEST) -timeout 20m ./test/envtest/...

.PHONY: test-openbao
test-openbao: ## OpenBao tier: the real bao 2.4.0 binary on loopback.
	@echo "=== tier: openbao"
	$(GO_TEST) -timeout 20m ./test/openbao/...
