#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Installs the Debian packages the tests use when they are missing: PostgreSQL (SPIRE's
# datastore as production runs it; the test harness initdb's a private cluster on loopback, it
# never uses a system service). Needs root (or sudo) and apt-get; a machine that has the
# packages already needs neither. Says what it installs.
set -euo pipefail

missing=()
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if ((${#missing[@]} == 0)); then
  echo "install-deps: nothing to install (PostgreSQL: $(ls -d /usr/lib/postgresql/*/bin | tail -n1))"
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
# The package's own cluster and service are not used; keep it from starting one.
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: installed ${missing[*]}"
