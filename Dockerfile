# The operator image, for `make docker-build IMG=...` with docker, podman or
# buildah; `--target wrapper` builds the bao-wrapper image. `make release`
# builds the released images with Go instead (internal/release:
# reproducible, multi-arch, signed); both hold the same binaries built with
# the same flags, run as the same numeric user, with no shell and no CA
# bundle on disk (the manager compiles the Mozilla roots in).
FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH}
RUN go build -trimpath -buildvcs=false -ldflags "-s -w -buildid= -X main.version=${VERSION}" -o /out/manager ./cmd/openbao-operator \
 && go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o /out/bao-wrapper ./cmd/bao-wrapper

FROM gcr.io/distroless/static-debian12:nonroot AS wrapper
LABEL org.opencontainers.image.title="bao-wrapper, PID 1 of OpenBao pods" \
      org.opencontainers.image.source="https://github.com/openbao/operator" \
      org.opencontainers.image.licenses="MPL-2.0"
COPY --from=builder /out/bao-wrapper /bao-wrapper
USER 65532:65532
ENTRYPOINT ["/bao-wrapper"]

FROM gcr.io/distroless/static-debian12:nonroot AS operator
LABEL org.opencontainers.image.title="The OpenBao operator" \
      org.opencontainers.image.source="https://github.com/openbao/operator" \
      org.opencontainers.image.licenses="MPL-2.0"
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
