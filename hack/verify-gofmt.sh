#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Checks that every hand-written Go file is gofmt-formatted (generated code under generated/ and
# zz_generated.*.go files is left to hack/verify-codegen.sh). Lists offending files and exits
# non-zero if there are any; fix them with `gofmt -w FILE`.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

files=()
while IFS= read -r -d '' f; do
  files+=("$f")
done < <(find . \
  \( -path ./.git -o -path ./_output -o -path ./results -o -path ./generated \) -prune -o \
  -type f -name '*.go' ! -name 'zz_generated.*.go' -print0)

if ((${#files[@]} == 0)); then
  echo "verify-gofmt: no Go files found" >&2
  exit 1
fi

unformatted=$(gofmt -l "${files[@]}")
if [[ -n "$unformatted" ]]; then
  echo "verify-gofmt: these files are not gofmt-formatted (run gofmt -w on them):" >&2
  echo "$unformatted" | sed 's/^/  /' >&2
  exit 1
fi
echo "verify-gofmt: ${#files[@]} Go files are formatted"
