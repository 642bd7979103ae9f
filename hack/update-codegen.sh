#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Regenerates the Go code derived from the API types in pkg/apis: the deepcopy functions
# (zz_generated.deepcopy.go beside the types) and the typed clientset (with its fake), listers
# and informers under generated/. The generators are those of the k8s.io/code-generator version
# that go.mod pins; they are installed into _output/codegen/bin (or $CODEGEN_BIN) on each run,
# which is quick once the Go build cache is warm. Works from any directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
MODULE=github.com/spire-registrar/spire-registrar
BOILERPLATE="$ROOT/hack/boilerplate.go.txt"

cd "$ROOT"

# Install the generators into a directory of our own so that whatever else lives in the
# user's GOBIN or GOPATH/bin neither shadows them nor is overwritten by them.
# kube_codegen.sh takes its install directory from `go env GOBIN`.
GOBIN=${CODEGEN_BIN:-"$ROOT/_output/codegen/bin"}
mkdir -p "$GOBIN"
export GOBIN

# Locate kube_codegen.sh in the code-generator module at exactly the version go.mod requires.
go mod download k8s.io/code-generator
CODEGEN_DIR=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
if [[ -z "$CODEGEN_DIR" || ! -f "$CODEGEN_DIR/kube_codegen.sh" ]]; then
  echo "cannot find kube_codegen.sh in k8s.io/code-generator (module dir: '${CODEGEN_DIR}')" >&2
  exit 1
fi

# shellcheck source=/dev/null
source "$CODEGEN_DIR/kube_codegen.sh"

# The sourced script may reset shell options; keep ours.
set -euo pipefail

# Deepcopy functions, written next to the types as zz_generated.deepcopy.go.
kube::codegen::gen_helpers \
  --boilerplate "$BOILERPLATE" \
  "$ROOT/pkg/apis"

# The generators clear their previous output before writing; create the directories so that
# a first run does not print grep errors about them.
mkdir -p "$ROOT/generated/clientset" "$ROOT/generated/listers" "$ROOT/generated/informers"

# Typed clientset (clientset/versioned and its fake), listers and informers. Deliberately
# without --with-applyconfig: without generated OpenAPI models the fake clientset it produces
# cannot serve UpdateStatus.
kube::codegen::gen_client \
  --with-watch \
  --output-dir "$ROOT/generated" \
  --output-pkg "$MODULE/generated" \
  --boilerplate "$BOILERPLATE" \
  "$ROOT/pkg/apis"
