# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The spire-registrar image: one static binary (no cgo, no libc) on an empty base. Build it with
# hack/build-image.sh (make image), which compiles _output/image/linux_<arch>/spire-registrar
# with the release flags and then builds this file with podman, buildah or docker buildx; the
# release workflow and test/image build it the same way, so the tested image is the shipped one.
#
# The settings below are what the official SPIRE Helm chart relies on:
#   WORKDIR /      the chart passes --config=controller-manager-config.yaml, a relative path, and
#                  mounts the file at /controller-manager-config.yaml (spire-controller-manager's
#                  image also sets WORKDIR /);
#   USER 65532     a non-root default; the chart and OpenShift may run it as any other uid, so
#                  nothing in the image is owned by or private to this user;
#   no /tmp        nothing is written to the root filesystem, which may be read-only; the chart
#                  mounts an emptyDir at /tmp all the same.
FROM scratch
ARG TARGETARCH
COPY _output/image/linux_${TARGETARCH}/spire-registrar /spire-registrar
WORKDIR /
USER 65532:65532
ENTRYPOINT ["/spire-registrar"]
