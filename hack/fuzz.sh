#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Short fuzzing of every fuzz target, for CI. Finds each `func FuzzX` in the test files under
# pkg/ and cmd/ and runs it alone for FUZZTIME (default 10s):
#
#   go test -run='^$' -fuzz='^FuzzX$' -fuzztime=10s ./pkg/<package>/
#
# Usage: hack/fuzz.sh [FUZZTIME]       e.g. hack/fuzz.sh 30s, or FUZZTIME=1m hack/fuzz.sh
#        FUZZ_TARGETS='FuzzKeyOf FuzzConfigParse' hack/fuzz.sh   to run only some targets
#
# Every target runs even if an earlier one fails; the script exits non-zero if any did. A
# failing input is written by go test to <package>/testdata/fuzz/<FuzzX>/<hash>: commit it
# together with the fix, so that plain `go test` keeps checking it.
#
# Interesting inputs are minimized for at most FUZZMINIMIZETIME (default 5s): go test's
# default of 60s can spend a whole short run minimizing a single input.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

FUZZTIME=${1:-${FUZZTIME:-10s}}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}
only=" ${FUZZ_TARGETS:-} "

targets=()
while IFS=: read -r file line; do
  name=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  if [[ "$only" != "  " && "$only" != *" $name "* ]]; then
    continue
  fi
  targets+=("./$(dirname "$file")/ $name")
done < <(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' pkg cmd | sort)

if ((${#targets[@]} == 0)); then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi

failed=()
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "=== fuzz: $name in $pkg for $FUZZTIME"
  start=$SECONDS
  # -timeout guards against a hang the target itself does not catch; compiling the
  # instrumented test binary and gathering baseline coverage come on top of FUZZTIME.
  if go test -run='^$' -fuzz="^${name}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" \
    -timeout=15m "$pkg"; then
    echo "=== fuzz: $name passed in $((SECONDS - start))s"
  else
    echo "=== fuzz: $name FAILED in $((SECONDS - start))s" >&2
    failed+=("$name")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed"
