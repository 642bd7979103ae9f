#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs the Debian packages the tests use when they are missing: PostgreSQL (SPIRE's
# datastore as production runs it; the test harness initdb's a private cluster on loopback, it
# never uses a system service), Prometheus (its promtool checks and unit-tests the alerts of
# manifests/monitoring; test/monitoring runs a private prometheus on loopback, never the
# package's service) and podman with runc (test/image builds the image and runs it as the Helm
# chart does, with a storage of its own). Needs root (or sudo) and apt-get; a machine that has the packages already
# needs neither. Says what it installs.
set -euo pipefail

missing=()
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  missing+=(prometheus)
fi
if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
  missing+=(podman runc)
fi
if ((${#missing[@]} == 0)); then
  echo "install-deps: nothing to install (PostgreSQL: $(ls -d /usr/lib/postgresql/*/bin | tail -n1); Prometheus: $(command -v prometheus); podman: $(command -v podman))"
  exit 0
fi

sudo=()
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
command -v apt-get >/dev/null || { echo "install-deps: ${missing[*]} missing and no apt-get: install it yourself" >&2; exit 1; }
echo "install-deps: installing ${missing[*]} from Debian's packages"
"${sudo[@]}" apt-get update -qq
# The packages' own cluster and services are not used; keep them from starting one.
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
  # The tests start their own prometheus; the package's service would only hold port 9090.
  "${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
echo "install-deps: installed ${missing[*]}"
