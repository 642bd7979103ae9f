#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Checks that the generated code in the working tree (generated/ and the zz_generated.*.go files
# under pkg/apis) is exactly what hack/update-codegen.sh produces from the current API types.
# It copies the repository into a temporary directory, deletes the generated code there,
# regenerates it and compares. The working tree is never modified. Exits non-zero when the
# generated code is stale.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/spire-registrar-verify-codegen.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
COPY="$TMP/repo"
mkdir -p "$COPY"

# Copy the sources, leaving out VCS data and build output.
tar -C "$ROOT" \
  --exclude=./.git --exclude=./_output --exclude=./results \
  -cf - . | tar -C "$COPY" -xf -

# Start the copy from no generated code at all, so that leftovers the generators would not
# remove themselves (say, files of a deleted kind) show up as differences too.
rm -rf "$COPY/generated"
find "$COPY/pkg/apis" -type f -name 'zz_generated.*.go' -delete

# Share the installed generators with the working tree's update-codegen.sh runs.
CODEGEN_BIN=${CODEGEN_BIN:-"$ROOT/_output/codegen/bin"} "$COPY/hack/update-codegen.sh"

# diff reports changed files and files present on one side only.
status=0
for dir in generated pkg/apis; do
  if [[ ! -d "$ROOT/$dir" ]]; then
    echo "missing directory: $dir" >&2
    status=1
    continue
  fi
  if ! diff -ru "$ROOT/$dir" "$COPY/$dir"; then
    status=1
  fi
done

if [[ $status -ne 0 ]]; then
  echo >&2
  echo "generated code is stale: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "generated code is up to date"
