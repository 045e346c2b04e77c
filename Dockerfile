# AgentOwl: one static binary on a distroless base, run as a non-root user,
# its data directory a volume. docs/operating.md explains the settings.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#                --build-arg COMMIT=$(git rev-parse HEAD) -t agentowl .
#   docker run -p 8470:8470 -v agentowl-data:/var/lib/agentowl agentowl
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The image is built without the repository's .git: the version and commit
# come in as build arguments (`agentowl version`, /healthz).
ARG VERSION=devel
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/agentowl/agentowl/internal/buildinfo.version=${VERSION} -X github.com/agentowl/agentowl/internal/buildinfo.commit=${COMMIT}" \
      -o /out/agentowl ./cmd/agentowl \
 && mkdir -p /out/data

# distroless/static: CA certificates and /etc/passwd, no shell, no package
# manager. SQLite is pure Go (modernc.org/sqlite), so no libc is needed.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/agentowl /usr/local/bin/agentowl
# The data directory belongs to the nonroot user (65532) so a fresh named
# volume mounted there is writable: the SQLite database, the generated
# secret key and the first-start operator token live in it.
COPY --from=build --chown=65532:65532 /out/data /var/lib/agentowl
USER 65532:65532
ENV AGENTOWL_DATA_DIR=/var/lib/agentowl \
    AGENTOWL_LISTEN=0.0.0.0:8470
VOLUME /var/lib/agentowl
EXPOSE 8470
ENTRYPOINT ["/usr/local/bin/agentowl"]
CMD ["serve"]
