#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Checks that go.mod and go.sum, of the module and of the linters' modules in hack/tools/lint
# and hack/tools/actionlint, are exactly what `go mod tidy` writes: every requirement used and marked direct or indirect
# as it is, no checksum missing or left over. Nothing is modified; on a difference the diff is
# printed and the exit status is non-zero. Fix with `go mod tidy` in the module named.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

status=0
for dir in . hack/tools/lint hack/tools/actionlint; do
  # go mod tidy -diff prints what tidy would change and exits 1 if anything would.
  if ! diff=$(cd "$ROOT/$dir" && go mod tidy -diff); then
    echo "verify-gomod: $dir/go.mod or go.sum is not tidy (run go mod tidy in $dir):" >&2
    echo "$diff" >&2
    status=1
  fi
done
if [[ $status -eq 0 ]]; then
  echo "verify-gomod: go.mod and go.sum are tidy"
fi
exit $status
