#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Lints the GitHub Actions workflows in .github/workflows with actionlint: workflow syntax,
# expressions and their types, the permissions and contexts a job may use, and untrusted input
# (such as github.event.*) interpolated into `run:` scripts. actionlint is the version pinned by
# the tool directive of hack/tools/actionlint/go.mod, a module of its own (its YAML library
# conflicts with golangci-lint's); the first run builds it in seconds, later runs take it from
# Go's build cache. actionlint also runs shellcheck on every `run:` script, but only when a
# `shellcheck` binary is on PATH (it is on GitHub's Ubuntu runners; where it is missing, that
# part is skipped and the rest still runs). Extra arguments go to actionlint, e.g. -verbose.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

shopt -s nullglob
workflows=(.github/workflows/*.yaml .github/workflows/*.yml)
if ((${#workflows[@]} == 0)); then
  echo "verify-workflows: no workflows in .github/workflows" >&2
  exit 1
fi
if ! command -v shellcheck >/dev/null; then
  echo "verify-workflows: shellcheck is not installed; run: scripts are not shellchecked"
fi
go tool -modfile=hack/tools/actionlint/go.mod actionlint "$@" "${workflows[@]}"
echo "verify-workflows: ${workflows[*]} pass actionlint"
