# syntax=docker/dockerfile:1
#
# walrelay container image: a static binary on distroless, running as a
# non-root user (65532). Build:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t walrelay .
#
# test/compose builds the binary with this file's go build flags from the
# context .dockerignore leaves, and checks the user, port and entrypoint.

# N.B. the build stage runs on the builder's platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64)
# needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/walrelay ./cmd/walrelay

# N.B. distroless/static has CA certificates (Kafka TLS, PostgreSQL
# sslmode=verify-full against public CAs) and time zone data, and no shell:
# the compose health check runs `walrelay health`, Kubernetes probes use
# httpGet.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/walrelay /usr/local/bin/walrelay
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/walrelay"]
CMD ["run"]
