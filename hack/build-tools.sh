#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds the real components the tests, `make run` and `make bench` use from the Go modules
# pinned under hack/tools, into a per-user cache shared by every clone on the machine
# (${XDG_CACHE_HOME:-~/.cache}/spire-registrar/bin, or $SPIRE_REGISTRAR_TOOLS_BIN):
#
#   hack/tools/kube        etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl
#   hack/tools/spire       spire-server, spire-agent (SPIRE 1.15.3, what the Helm chart runs;
#                          test/mtls runs the agent)
#   hack/tools/kwok        kwok (plays the kubelet for fake nodes)
#   hack/tools/scm         spire-controller-manager (v0.7.0, the drop-in anchor)
#
# With no arguments it builds what `make test` needs (kubectl is left out: no test needs it).
# Each binary is rebuilt only when its pinned module files or the Go version change: a stamp
# beside the binary records what it was built from. A cold build takes tens of minutes on two
# cores; a warm call returns at once.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${SPIRE_REGISTRAR_TOOLS_BIN:-"${XDG_CACHE_HOME:-$HOME/.cache}/spire-registrar/bin"}
mkdir -p "$BIN"

# stamp_of prints what a tool module's binaries depend on: its module files and the toolchain.
stamp_of() {
  local dir=$1
  { cat "$dir/go.mod" "$dir/go.sum"; find "$dir" -name '*.go' -print0 | sort -z | xargs -0 cat; go version; } |
    sha256sum | cut -d' ' -f1
}

# build NAME MODULE_DIR PACKAGE: go build PACKAGE inside MODULE_DIR unless the stamp matches.
build() {
  local name=$1 dir=$2 pkg=$3
  local want have=""
  want=$(stamp_of "$dir")
  [[ -f "$BIN/$name.stamp" ]] && have=$(cat "$BIN/$name.stamp")
  if [[ -x "$BIN/$name" && "$have" == "$want" ]]; then
    echo "build-tools: $name is up to date ($BIN/$name)"
    return
  fi
  echo "build-tools: building $name from $(basename "$dir") pinned modules (first time takes minutes)..."
  local start=$SECONDS
  # go build prints nothing until it is done; say every 30s that it is still going, so that
  # neither a person nor a CI log watchdog takes minutes of silence for a hang.
  (cd "$dir" && CGO_ENABLED=${CGO_ENABLED_FOR:-0} GOFLAGS=-mod=mod go build -trimpath -o "$BIN/$name.tmp" "$pkg") &
  local pid=$! status=0 next=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= next)); then
      echo "build-tools: still building $name ($((SECONDS - start))s so far)"
      next=$((next + 30))
    fi
    sleep 1
  done
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "build-tools: building $name failed (exit $status)" >&2
    exit "$status"
  fi
  mv "$BIN/$name.tmp" "$BIN/$name"
  echo "$want" > "$BIN/$name.stamp"
  echo "build-tools: built $name in $((SECONDS - start))s"
}

TOOLS=$ROOT/hack/tools
want=${*:-etcd kube-apiserver spire-server spire-agent kube-scheduler kube-controller-manager kwok spire-controller-manager}
for tool in $want; do
  case $tool in
    etcd)                    build etcd "$TOOLS/kube" ./etcd ;;
    kube-apiserver)          build kube-apiserver "$TOOLS/kube" k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-scheduler)          build kube-scheduler "$TOOLS/kube" k8s.io/kubernetes/cmd/kube-scheduler ;;
    kube-controller-manager) build kube-controller-manager "$TOOLS/kube" k8s.io/kubernetes/cmd/kube-controller-manager ;;
    kubectl)                 build kubectl "$TOOLS/kube" k8s.io/kubernetes/cmd/kubectl ;;
    # spire-server's sqlite datastore needs cgo; spire-agent is built with cgo too so that it
    # reuses every package the server's build compiled (a cgo setting of its own would compile
    # them all again).
    spire-server)            CGO_ENABLED_FOR=1 build spire-server "$TOOLS/spire" github.com/spiffe/spire/cmd/spire-server ;;
    spire-agent)             CGO_ENABLED_FOR=1 build spire-agent "$TOOLS/spire" github.com/spiffe/spire/cmd/spire-agent ;;
    kwok)                    build kwok "$TOOLS/kwok" sigs.k8s.io/kwok/cmd/kwok ;;
    spire-controller-manager) build spire-controller-manager "$TOOLS/scm" github.com/spiffe/spire-controller-manager/cmd ;;
    *) echo "build-tools: unknown tool $tool" >&2; exit 2 ;;
  esac
done
