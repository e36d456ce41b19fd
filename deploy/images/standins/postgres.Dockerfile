# Stand-in for postgres:17-bookworm, built by deploy/images/standins.sh where
# no registry can be reached. It is Debian bookworm's PostgreSQL 15, not 17,
# with an entrypoint that honours the public image's basics:
# POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB and PGDATA on the first start,
# listening on every address with password authentication; pg_isready and
# psql on the PATH. It runs as the postgres user from the start.
FROM debian:bookworm-slim
# The user first, with the public image's fixed ids (999), so volumes and
# USER name the same ids on every build.
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 postgres \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/postgresql --shell /bin/bash postgres \
    && apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
    && install -d -o postgres -g postgres -m 2775 /var/run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
USER 999:999
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
