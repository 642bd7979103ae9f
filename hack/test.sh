#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The full test run (what `make test` and CI run). In order, stopping at the first failure:
#   1. hack/build-tools.sh: build the real etcd, kube-apiserver, kubectl and spire-server from
#      their pinned modules, so that on a cold machine the long build happens here and not
#      inside go test's timeout;
#   2. hack/verify-codegen.sh: the generated code matches the API types;
#   3. go vet ./...;
#   4. go test -race -timeout 30m ./... (extra arguments to this script are passed to go test);
#   5. hack/fuzz.sh: every fuzz target for FUZZTIME (default here 3s), a smoke run that finds
#      shallow crashes in new code; longer runs are `hack/fuzz.sh 10m`.
# Each step's duration is printed. Needs Go, gcc (cgo, for -race and spire-server's sqlite)
# and the Go module proxy; nothing else from the network and nothing on PATH besides go.
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
step "build real binaries (hack/build-tools.sh)" hack/build-tools.sh
step "verify generated code (hack/verify-codegen.sh)" hack/verify-codegen.sh
step "go vet" go vet ./...
step "go test -race" go test -race -timeout 30m "$@" ./...
step "short fuzz run (hack/fuzz.sh)" hack/fuzz.sh "${FUZZTIME:-3s}"
echo "=== test: all passed in $((SECONDS - total))s"
