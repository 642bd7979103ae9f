#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The full test run (what `make test` and CI run). In order, stopping at the first failure:
#   1. hack/verify-gofmt.sh: hand-written Go is gofmt-formatted;
#   2. hack/verify-gomod.sh: go.mod and go.sum are what `go mod tidy` writes;
#   3. hack/verify-codegen.sh: the generated code matches the API types;
#   4. hack/verify-lint.sh: golangci-lint, pinned in hack/tools/lint, with .golangci.yml's
#      linters (its first run builds it: a few minutes); its govet runs go vet's default
#      analyzers, so a separate `go vet ./...` would only type-check everything twice;
#   5. hack/verify-workflows.sh: actionlint, pinned in hack/tools/actionlint, over the GitHub
#      Actions workflows in .github/workflows;
#   6. hack/install-deps.sh: Debian's postgresql, prometheus, podman and runc packages, if
#      they are missing;
#   7. hack/build-tools.sh: build every real binary the tests use from its pinned module into the
#      per-user cache, so that on a cold machine the long build happens here and not inside go
#      test's timeout (no test needs kubectl: manifests are rendered with kustomize's library);
#   8. go test -race -timeout 30m ./... (extra arguments to this script are passed to go test);
#   9. hack/fuzz.sh: every fuzz target for FUZZTIME (default here 3s), a smoke run that finds
#      shallow crashes in new code; longer runs are `hack/fuzz.sh 10m`.
# The static checks come first so that a formatting or lint slip fails in minutes, not after
# the build. Each step's duration is printed. Needs Go, gcc (cgo, for -race and spire-server's
# sqlite), the Go module proxy and, where PostgreSQL is missing, apt-get.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

# The race detector needs cgo; say so plainly instead of letting go test fail obscurely.
if [[ "$(go env CGO_ENABLED)" != "1" ]]; then
  echo "test: cgo is disabled (go env CGO_ENABLED=$(go env CGO_ENABLED)); go test -race and spire-server need it: install gcc" >&2
  exit 1
fi

step() {
  local name=$1 start=$SECONDS
  shift
  echo "=== test: $name"
  "$@"
  echo "=== test: $name done in $((SECONDS - start))s"
}

total=$SECONDS
step "gofmt (hack/verify-gofmt.sh)" hack/verify-gofmt.sh
step "go mod tidy (hack/verify-gomod.sh)" hack/verify-gomod.sh
step "verify generated code (hack/verify-codegen.sh)" hack/verify-codegen.sh
step "golangci-lint (hack/verify-lint.sh)" hack/verify-lint.sh
step "actionlint (hack/verify-workflows.sh)" hack/verify-workflows.sh
step "install Debian packages the tests use (hack/install-deps.sh)" hack/install-deps.sh
step "build real binaries (hack/build-tools.sh)" hack/build-tools.sh
# -count=1: the real-component tests must really run, not be replayed from the test cache.
step "go test -race" go test -race -count=1 -timeout 30m "$@" ./...
step "short fuzz run (hack/fuzz.sh)" hack/fuzz.sh "${FUZZTIME:-3s}"
echo "=== test: all passed in $((SECONDS - total))s"
