# syntax=docker/dockerfile:1
# Copyright 2026 The spire-registrar Authors.
# SPDX-License-Identifier: Apache-2.0
#
# The spire-registrar image: a fully static binary (no cgo, so no libc) on distroless/static,
# running as the distroless nonroot user. Build with: docker build -t spire-registrar .
# The tests in test/image check that the binary built this way is static.

# The builder runs on the build machine's platform and cross-compiles for the target one.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
# Only what the binary is built from (test/image checks the list is complete).
COPY cmd/ cmd/
COPY generated/ generated/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/spire-registrar ./cmd/spire-registrar

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/spire-registrar /spire-registrar
USER 65532:65532
ENTRYPOINT ["/spire-registrar"]
