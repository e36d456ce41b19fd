# Stand-in for mariadb:11.8, built by deploy/images/standins.sh where no
# registry can be reached. It is Debian bookworm's MariaDB 10.11, not 11.8,
# with an entrypoint that honours the public image's basics on the first
# start: MARIADB_DATABASE, MARIADB_USER, MARIADB_PASSWORD and
# MARIADB_RANDOM_ROOT_PASSWORD, listening on every address; and the public
# image's healthcheck.sh (--connect, --innodb_initialized) on the PATH. It runs
# as the mysql user from the start.
FROM debian:bookworm-slim
# The user first, with the public image's fixed ids (999), so volumes and
# USER name the same ids on every build.
# hadolint ignore=DL3008
RUN groupadd --system --gid 999 mysql \
    && useradd --system --uid 999 --gid 999 --home-dir /var/lib/mysql --shell /bin/bash mysql \
    && apt-get update \
    && apt-get install -y --no-install-recommends mariadb-server mariadb-client \
    && rm -rf /var/lib/apt/lists/* /var/lib/mysql \
    && install -d -o mysql -g mysql -m 0750 /var/lib/mysql \
    && install -d -o mysql -g mysql -m 0755 /run/mysqld
COPY mariadb-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
COPY mariadb-healthcheck.sh /usr/local/bin/healthcheck.sh
USER 999:999
EXPOSE 3306
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["mariadbd"]
