# replayctl image: a static binary on a distroless base, running as non-root.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t replayctl .
# The build command below is the one TestDockerfileBuildCommand runs.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
ARG COMMIT=unknown
ARG BUILD_DATE=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/replayctl/replayctl/internal/buildinfo.version=${VERSION} -X github.com/replayctl/replayctl/internal/buildinfo.commit=${COMMIT} -X github.com/replayctl/replayctl/internal/buildinfo.date=${BUILD_DATE}" -o /out/replayctl ./cmd/replayctl

# distroless/static: no shell, no package manager, CA certificates and
# tzdata only; the nonroot tag runs as uid 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/replayctl /usr/local/bin/replayctl
COPY --chown=65532:65532 rules.yaml /etc/replayctl/rules.yaml
COPY --chown=65532:65532 policies/ /etc/replayctl/policies/
# State (the bbolt file, tokens.json) lives on a volume owned by nonroot.
WORKDIR /var/lib/replayctl
VOLUME ["/var/lib/replayctl"]
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/replayctl"]
CMD ["serve", "--addr", "0.0.0.0:8080", "--rules", "/etc/replayctl/rules.yaml", "--policies", "/etc/replayctl/policies", "--approvers", "/etc/replayctl/approvers.yaml", "--db", "/var/lib/replayctl/replayctl.db", "--tokens", "/var/lib/replayctl/tokens.json"]
