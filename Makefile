# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Entry points for building, testing and running spire-registrar. The recipes only call
# go or the scripts in hack/, which hold the logic and can be run directly too.
# `make` alone lists the targets.

GO ?= go

# `make run` runs the local demo unless SPIRE_SOCKET is given, which selects your own cluster:
#   make run KUBECONFIG=/path/to/kubeconfig SPIRE_SOCKET=/path/to/api.sock TRUST_DOMAIN=td CLUSTER_NAME=name
# KUBECONFIG is passed on only when given on the make command line, so one exported in your
# shell does not matter (hack/run-local.sh falls back to it in your-own-cluster mode anyway).
RUN_FLAGS :=
ifeq ($(origin KUBECONFIG),command line)
RUN_FLAGS += --kubeconfig '$(KUBECONFIG)'
endif
ifneq ($(SPIRE_SOCKET),)
RUN_FLAGS += --spire-socket '$(SPIRE_SOCKET)'
endif
ifneq ($(TRUST_DOMAIN),)
RUN_FLAGS += --trust-domain '$(TRUST_DOMAIN)'
endif
ifneq ($(CLUSTER_NAME),)
RUN_FLAGS += --cluster-name '$(CLUSTER_NAME)'
endif
ifneq ($(CONFIG),)
RUN_FLAGS += --config '$(CONFIG)'
endif

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@echo 'Usage: make TARGET'
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the controller into _output/spire-registrar
	$(GO) build -o _output/spire-registrar ./cmd/spire-registrar

.PHONY: image
image: ## Build the image with hack/build-image.sh (IMAGE=..., PLATFORMS=linux/amd64,linux/arm64, CONTAINER_TOOL=podman|buildah|docker)
	hack/build-image.sh

.PHONY: tools
tools: ## Build the real binaries the tests use into ~/.cache/spire-registrar/bin (slow once per machine)
	hack/build-tools.sh

.PHONY: test
test: ## Full test: gofmt, tidy, codegen, lint (go vet included), workflow lint, packages, real binaries, go test -race, fuzz (what CI runs)
	hack/test.sh

.PHONY: test-unit
test-unit: ## Quick tests only: go test -short (skips the real-component tests)
	$(GO) test -short ./...

.PHONY: bench
bench: ## Scale matrix N x K x datastore vs spire-controller-manager on real components; results/<timestamp>/ (BENCH_FLAGS='-n 1000 -k 2 -datastores postgres')
	$(GO) run ./hack/bench $(BENCH_FLAGS)

.PHONY: generate
generate: ## Regenerate deepcopy, clientset, listers and informers
	hack/update-codegen.sh

.PHONY: verify
verify: ## Static checks only: gofmt, go mod tidy, generated code, golangci-lint (go vet included), actionlint
	hack/verify.sh

.PHONY: run
run: ## Demo on local real components; or SPIRE_SOCKET=... KUBECONFIG=... for your cluster
	hack/run-local.sh $(RUN_FLAGS)

.PHONY: clean
clean: ## Remove build output and local-up state (the real binaries stay in the per-user cache)
	rm -rf _output/spire-registrar _output/image _output/tools _output/local-up _output/run _output/codegen _output/run-local.pid
