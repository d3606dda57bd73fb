# syntax=docker/dockerfile:1
#
# walrelay container image: a static binary on distroless, running as a
# non-root user (65532). Build:
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t walrelay .
#
# `make image` builds the same image without Docker (an OCI tar, on an empty
# base laid out by tools/image). test/compose builds the binary with this
# file's go build flags from the context .dockerignore leaves, and checks that
# the final stage's USER, ENTRYPOINT, CMD, EXPOSE, ENV, WORKDIR and LABEL are
# the config make image writes.
#
# N.B. base images are pinned by digest, with the tag beside it for the
# reader: a tag moves, a digest does not. Update both together (for example
# `crane digest gcr.io/distroless/static-debian12:nonroot`) in a commit of its
# own.

# N.B. the build stage runs on the builder's platform and cross-compiles, so a
# multi-platform build (docker buildx --platform linux/amd64,linux/arm64)
# needs no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
# N.B. the Go the Makefile builds with (its GOTOOLCHAIN): the image's Go
# fetches it from the module proxy; the standard library of the image's own
# 1.26 has known vulnerabilities reachable from walrelay (make vuln).
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/walrelay ./cmd/walrelay

# N.B. distroless/static has CA certificates (Kafka TLS, PostgreSQL
# sslmode=verify-full against public CAs), the nonroot user (65532) and /tmp,
# which is what make image lays out on scratch too, and no shell: the compose
# health check runs `walrelay health`, Kubernetes probes use httpGet. (Its time
# zone data make image leaves out: walrelay loads no time zone.)
FROM gcr.io/distroless/static-debian12:nonroot@sha256:d093aa3e30dbadd3efe1310db061a14da60299baff8450a17fe0ccc514a16639
ARG VERSION=dev
COPY --from=build /out/walrelay /usr/local/bin/walrelay
# The base sets these already; stated here so that this stage says the whole
# config, which make image (scratch) must reproduce.
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /home/nonroot
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080
LABEL org.opencontainers.image.title=walrelay \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.source=https://github.com/walrelay/walrelay
ENTRYPOINT ["/usr/local/bin/walrelay"]
CMD ["run"]
