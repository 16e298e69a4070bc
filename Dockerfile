# replayctl image: a static binary on a distroless base, running as non-root.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t replayctl:$(git describe --tags --always) .
# The build command below is the one TestDockerfileBuildCommand runs, and
# TestDockerCmdServes runs the default command (CMD, ENV, COPY) against it.
#
# Base images are pinned by digest (the tag stays beside it, for people:
# with a digest, docker ignores the tag). The two digests were taken from
# public repositories pinning these tags, as of 2026-08-26: no registry was
# reachable from where this file was written, so they are not verified
# here. Refresh both (and check them) with crane before a release build:
#   crane digest golang:1.26-bookworm
#   crane digest gcr.io/distroless/static-debian12:nonroot
# (or docker buildx imagetools inspect IMAGE) and replace the sha256 below.
# TestDockerfilePinsBaseImages (deploy/pin_test.go) refuses a FROM without
# a digest and any :latest.
#
# golang:1.26-bookworm, pinned 2026-08-26
FROM golang:1.26-bookworm@sha256:116d58cbd88c1297624acc6e967a060012422bacf9930927e23fb719189c6f36 AS build
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
# gcr.io/distroless/static-debian12:nonroot, pinned 2026-08-26
FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/replayctl /usr/local/bin/replayctl
COPY --chown=65532:65532 rules.yaml /etc/replayctl/rules.yaml
COPY --chown=65532:65532 policies/ /etc/replayctl/policies/
# A template: list each approver group's members (mount your own over it).
COPY --chown=65532:65532 approvers.yaml /etc/replayctl/approvers.yaml
# Three sample DLQs, so that `docker run` serves something to look at; set
# REPLAYCTL_SOURCE to your own DLQs (a comma list). No replay target is
# configured: the samples are decided and recorded, never sent anywhere.
COPY --chown=65532:65532 testdata/jsonl/entries.jsonl testdata/cordum/dlq.jsonl testdata/nexora/dead-letters.json /usr/share/replayctl/samples/
ENV REPLAYCTL_SOURCE=jsonl:/usr/share/replayctl/samples/entries.jsonl,cordum:/usr/share/replayctl/samples/dlq.jsonl,nexora:/usr/share/replayctl/samples/dead-letters.json
# State (the bbolt file, tokens.json) lives on a volume owned by nonroot.
WORKDIR /var/lib/replayctl
VOLUME ["/var/lib/replayctl"]
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/replayctl"]
# serve: the console and API on :8080, /metrics, a reconcile every 5 minutes
# over REPLAYCTL_SOURCE. Log in with a token:
#   docker run --rm -v replayctl:/var/lib/replayctl IMAGE tokens create --user alice --role admin --tokens /var/lib/replayctl/tokens.json
CMD ["serve", "--addr", "0.0.0.0:8080", "--rules", "/etc/replayctl/rules.yaml", "--policies", "/etc/replayctl/policies", "--approvers", "/etc/replayctl/approvers.yaml", "--db", "/var/lib/replayctl/replayctl.db", "--tokens", "/var/lib/replayctl/tokens.json"]
