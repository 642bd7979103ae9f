#!/usr/bin/env bash
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds the spire-registrar image: `make image`, the release workflow and test/image all call
# this script, so the image a test runs is built exactly as the one a release ships.
#
#   1. for each platform, a static binary (CGO_ENABLED=0, -trimpath, -s -w) into
#      _output/image/linux_<arch>/spire-registrar;
#   2. the Dockerfile (FROM scratch: the binary, WORKDIR /, USER 65532) with a container tool.
#
# Environment (all optional):
#   IMAGE                the reference to tag (default localhost/spire-registrar:dev)
#   PLATFORMS            comma-separated linux/<arch> list (default: this machine's)
#   CONTAINER_TOOL       podman, buildah or docker (default: the first found); docker builds
#                        with buildx, which can build several platforms into one manifest list
#   CONTAINER_TOOL_FLAGS global flags for the tool, e.g. "--storage-driver vfs --runtime runc"
#   BUILD_FLAGS          flags for the build command itself, e.g. "--push" for docker buildx
#   BINARIES_ONLY=1      stop after step 1 (the release workflow builds the image itself, and
#                        the tests that run the binary build it this way, so that they run the
#                        binary the image ships)
#   BIN_DIR              where step 1 writes linux_<arch>/spire-registrar (default
#                        _output/image, which is what the Dockerfile copies)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

IMAGE=${IMAGE:-localhost/spire-registrar:dev}
PLATFORMS=${PLATFORMS:-linux/$(go env GOARCH)}
read -r -a tool_flags <<<"${CONTAINER_TOOL_FLAGS:-}"
read -r -a build_flags <<<"${BUILD_FLAGS:-}"

IFS=, read -r -a platforms <<<"$PLATFORMS"
for platform in "${platforms[@]}"; do
  os=${platform%%/*} arch=${platform#*/}
  if [[ $os != linux || -z $arch || $arch == */* ]]; then
    echo "build-image: platform $platform is not linux/<arch>" >&2
    exit 2
  fi
  out=${BIN_DIR:-_output/image}/linux_$arch/spire-registrar
  echo "build-image: building $out"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags='-s -w' -o "$out" ./cmd/spire-registrar
done
[[ ${BINARIES_ONLY:-} == 1 ]] && exit 0

tool=${CONTAINER_TOOL:-}
if [[ -z $tool ]]; then
  for candidate in podman buildah docker; do
    if command -v "$candidate" >/dev/null; then
      tool=$candidate
      break
    fi
  done
fi
[[ -n $tool ]] || { echo "build-image: no podman, buildah or docker found; set CONTAINER_TOOL" >&2; exit 1; }

echo "build-image: building $IMAGE for $PLATFORMS with $tool"
case $tool in
  docker)
    # buildx sets TARGETARCH for each platform itself.
    docker "${tool_flags[@]}" buildx build --platform "$PLATFORMS" -t "$IMAGE" "${build_flags[@]}" .
    ;;
  podman | buildah)
    if ((${#platforms[@]} != 1)); then
      echo "build-image: $tool builds one platform at a time here; use docker buildx for $PLATFORMS" >&2
      exit 2
    fi
    verb=build
    [[ $tool == buildah ]] && verb=bud
    "$tool" "${tool_flags[@]}" "$verb" --platform "${platforms[0]}" --build-arg "TARGETARCH=${platforms[0]#*/}" \
      -t "$IMAGE" "${build_flags[@]}" -f Dockerfile .
    ;;
  *)
    echo "build-image: unknown CONTAINER_TOOL $tool (podman, buildah or docker)" >&2
    exit 2
    ;;
esac
