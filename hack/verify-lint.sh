#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs golangci-lint with the linters of .golangci.yml over the whole module (tests included,
# generated code excluded). golangci-lint is the version pinned by the tool directive of
# hack/tools/lint/go.mod, a module of its own so that its dependencies never enter ours; the
# first run builds it (a few minutes of CPU), later runs take it from Go's build cache.
# Extra arguments go to `golangci-lint run`, e.g. hack/verify-lint.sh --fix.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

go tool -modfile=hack/tools/lint/go.mod golangci-lint run "$@" ./...
