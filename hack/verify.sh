#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs the static checks that need no real components: the generated code is current
# (hack/verify-codegen.sh), hand-written Go is gofmt-formatted (hack/verify-gofmt.sh), go.mod
# and go.sum are tidy (hack/verify-gomod.sh), golangci-lint, go vet's analyzers included, finds
# nothing (hack/verify-lint.sh) and actionlint passes the GitHub workflows
# (hack/verify-workflows.sh). Every check runs even when an earlier one fails; the exit status
# is non-zero if any failed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

failed=()
check() {
  local name=$1
  shift
  echo "=== verify: $name"
  if ! "$@"; then
    failed+=("$name")
  fi
}

check codegen hack/verify-codegen.sh
check gofmt hack/verify-gofmt.sh
check gomod hack/verify-gomod.sh
check lint hack/verify-lint.sh
check workflows hack/verify-workflows.sh

if ((${#failed[@]} > 0)); then
  echo "verify: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "verify: all checks passed"
