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
# Every target runs even if an earlier one fails; the script exits non-zero if any did. Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline exceeded" when -fuzztime
# ends (go.dev/issue/75804): such a run, which found nothing, is run once more and then not
# counted as a failure. A
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

# runFuzz runs one target once, printing its output and keeping it in $log.
runFuzz() {
  go test -run='^$' -fuzz="^${2}\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZETIME" \
    -timeout=15m "$1" 2>&1 | tee "$log"
  return "${PIPESTATUS[0]}"
}

# deadlineFlake says whether a failed run is Go's fuzz coordinator race at the end of a
# -fuzztime window (go.dev/issue/75804, fixed in Go 1.27): the target fails with a bare
# "context deadline exceeded" although no input failed. A real finding always writes its
# input under testdata/fuzz and says so, and a panic or t.Error prints more than that line.
deadlineFlake() {
  grep -q 'context deadline exceeded' "$log" &&
    ! grep -qE 'Failing input written to|panic:|_test\.go:[0-9]+:' "$log"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
flaked=()
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  echo "=== fuzz: $name in $pkg for $FUZZTIME"
  start=$SECONDS
  # -timeout guards against a hang the target itself does not catch; compiling the
  # instrumented test binary and gathering baseline coverage come on top of FUZZTIME.
  if runFuzz "$pkg" "$name"; then
    echo "=== fuzz: $name passed in $((SECONDS - start))s"
  elif deadlineFlake; then
    # Run it once more: a second bare deadline with nothing found is the same race again.
    echo "=== fuzz: $name hit Go's fuzztime deadline race (go.dev/issue/75804) and found nothing; running it again"
    if runFuzz "$pkg" "$name"; then
      echo "=== fuzz: $name passed on its second run in $((SECONDS - start))s"
    elif deadlineFlake; then
      echo "=== fuzz: $name hit the deadline race twice and found nothing; not counted as a failure"
      flaked+=("$name")
    else
      echo "=== fuzz: $name FAILED in $((SECONDS - start))s" >&2
      failed+=("$name")
    fi
  else
    echo "=== fuzz: $name FAILED in $((SECONDS - start))s" >&2
    failed+=("$name")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets passed${flaked[*]:+ (deadline race without a finding: ${flaked[*]})}"
