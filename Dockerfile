# kplug's Rust images, from one build of the workspace: the operator and the
# example plugins written in Rust. One build stage compiles every binary
# once; each image is a target of its own.
#
#   docker build --target kplug-operator -t ghcr.io/kplug/kplug-operator:0.1.0 .
#   docker build --target sqlite-plugin  -t ghcr.io/kplug/sqlite-plugin:0.1.0 .
#   docker build --target mariadb-plugin -t ghcr.io/kplug/mariadb-plugin:0.1.0 .
#   docker build --target kplug-exec     -t ghcr.io/kplug/kplug-exec:0.1.0 .
#   docker build --target sqlite-shell-plugin -t ghcr.io/kplug/sqlite-shell-plugin:0.1.0 .
#   docker build --target postgresql-server-plugin -t ghcr.io/kplug/postgresql-server-plugin:0.1.0 .
#   docker build --target backup-plugin  -t ghcr.io/kplug/backup-plugin:0.1.0 .
#
# (`make images` builds them all.) The build context is the repository root:
# cargo loads the whole workspace (and `--locked` checks Cargo.lock against
# all of it) even to build some packages, so every workspace member is copied
# below. `make test` checks that this list matches `cargo metadata`
# (deploy/tests/dockerfiles.rs). BuildKit is needed for the cache mounts.

# Pinned to the toolchain the project is tested with; bookworm so the glibc
# matches the distroless runtime below.
FROM rust:1.95.0-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY proto proto
COPY checks checks
# The operator library, and its binary (operator/cli/, package
# kplug-operator-bin).
COPY operator operator
# A workspace member (kubectl kplug, not in any image): cargo reads every
# member's manifest.
COPY kubectl-kplug kubectl-kplug
COPY sidecar-sdk sidecar-sdk
COPY conformance conformance
COPY exec exec
COPY testenv testenv
COPY deploy deploy
# A workspace member (the benchmarks): cargo reads every member's manifest.
COPY bench bench
# A workspace member too (the fuzz targets' functions); fuzz/'s own
# cargo-fuzz workspace is not needed.
COPY fuzz/lib fuzz/lib
# All of examples/: it holds several workspace members (the example's model,
# plugins and demo), and .dockerignore keeps its build outputs out.
COPY examples examples
# Cache mounts keep the registry and the compiled dependencies between
# builds; the binaries are copied out of the cached target dir in the same
# step. The sources are touched first: cargo decides freshness by mtime, and
# a file edited while an earlier build ran is older than that build's
# outputs, so it would be skipped. The price: when this step runs (only when
# a COPY above changed), all of the workspace's own crates are rebuilt, not
# only the edited ones; dependencies stay cached.
# The directories are created here, owned by the runtime user, because
# distroless has no shell to make them.
RUN --mount=type=cache,id=kplug-cargo-registry,target=/usr/local/cargo/registry \
    --mount=type=cache,id=kplug-target,target=/src/target \
    find . -path ./target -prune -o -type f -exec touch {} + \
    && cargo build --release --locked -p kplug-operator-bin -p sqlite-plugin -p mariadb-plugin -p kplug-exec \
       -p database-server-plugins \
    && install -D -m 0755 -t /out/bin target/release/kplug-operator \
       target/release/sqlite-plugin target/release/mariadb-plugin target/release/kplug-exec \
       target/release/postgresql-server-plugin target/release/backup-plugin \
    && install -d -m 0755 /out/kplug /out/data

# The SQLite example plugin (embedded SQLite): a sidecar of kplug-operator.
# distroless/cc: glibc and libgcc, no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot AS sqlite-plugin
COPY --from=build /out/bin/sqlite-plugin /usr/local/bin/sqlite-plugin
# The socket dir, owned by the runtime user: a Compose named volume mounted
# here starts as a copy of it (an emptyDir in Kubernetes is writable anyway).
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
# The database files; mount a volume here (an emptyDir or a PVC in Kubernetes).
COPY --from=build --chown=65532:65532 /out/data /var/lib/kplug-sqlite
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sqlite-plugin"]
CMD ["--data-dir", "/var/lib/kplug-sqlite"]

# The MariaDB example plugin: a sidecar of kplug-operator. Servers come from
# KPLUG_MARIADB_SERVERS (JSON, serverName -> DSN) or the file named by
# KPLUG_MARIADB_SERVERS_FILE.
FROM gcr.io/distroless/cc-debian12:nonroot AS mariadb-plugin
COPY --from=build /out/bin/mariadb-plugin /usr/local/bin/mariadb-plugin
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/mariadb-plugin"]

# kplug-exec: turns executables into a plugin (docs/shell-plugins.md). A
# Debian base, since the commands need a shell and tools: bash, coreutils and
# jq are here; an image of your own adds its scripts and tools and sets the
# manifest:
#   FROM ghcr.io/kplug/kplug-exec:0.1.0
#   COPY my-plugin/ /opt/my-plugin/
#   CMD ["--manifest", "/opt/my-plugin/plugin.yaml"]
FROM debian:bookworm-slim AS kplug-exec
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends jq \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/kplug-exec /usr/local/bin/kplug-exec
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kplug-exec"]

# The SQLiteShell example plugin: kplug-exec running
# examples/database-table/sqlite-shell-plugin with the sqlite3 tool. Tables
# live in KPLUG_SQLITE_DATA_DIR: mount a volume there.
FROM kplug-exec AS sqlite-shell-plugin
# Root only to install a package; the image runs as 65532 below.
USER 0:0
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends sqlite3 \
    && rm -rf /var/lib/apt/lists/*
COPY examples/database-table/sqlite-shell-plugin/ /opt/sqlite-shell-plugin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/kplug-sqlite
ENV KPLUG_SQLITE_DATA_DIR=/var/lib/kplug-sqlite
USER 65532:65532
CMD ["--manifest", "/opt/sqlite-shell-plugin/plugin.yaml"]

# The DatabaseServer example's plugins (examples/database-table/server-plugins):
# PostgreSQL servers as Kubernetes children, and the backup mutator. Neither
# reaches a database or the API: the operator applies what they answer.
FROM gcr.io/distroless/cc-debian12:nonroot AS postgresql-server-plugin
COPY --from=build /out/bin/postgresql-server-plugin /usr/local/bin/postgresql-server-plugin
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/postgresql-server-plugin"]

FROM gcr.io/distroless/cc-debian12:nonroot AS backup-plugin
COPY --from=build /out/bin/backup-plugin /usr/local/bin/backup-plugin
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/backup-plugin"]

# The generic kplug-operator; last, so a plain `docker build .` makes it.
FROM gcr.io/distroless/cc-debian12:nonroot AS kplug-operator
COPY --from=build /out/bin/kplug-operator /usr/local/bin/kplug-operator
COPY --from=build --chown=65532:65532 /out/kplug /var/run/kplug
ENV KPLUG_SOCKET_DIR=/var/run/kplug
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kplug-operator"]
