#!/bin/bash
# Entrypoint of the mariadb stand-in (mariadb.Dockerfile): on the first start,
# create the system tables, then let the server run the environment's
# database, user and passwords as an --init-file before it accepts
# connections; then run it on every address.
set -euo pipefail
datadir=/var/lib/mysql
init=()
if [ ! -d "$datadir/mysql" ]; then
  mariadb-install-db --datadir="$datadir" --auth-root-authentication-method=socket \
    --skip-test-db >/dev/null
  # SQL string literals and identifiers, quoted.
  lit() { printf "'%s'" "${1//\'/\'\'}"; }
  ident() { printf '`%s`' "${1//\`/\`\`}"; }
  health=$(head -c 18 /dev/urandom | base64)
  sql=$(mktemp)
  {
    echo "CREATE USER 'healthcheck'@'localhost' IDENTIFIED BY $(lit "$health");"
    if [ -n "${MARIADB_DATABASE:-}" ]; then
      echo "CREATE DATABASE IF NOT EXISTS $(ident "$MARIADB_DATABASE");"
    fi
    if [ -n "${MARIADB_USER:-}" ]; then
      echo "CREATE USER $(lit "$MARIADB_USER")@'%' IDENTIFIED BY $(lit "${MARIADB_PASSWORD:?MARIADB_PASSWORD must be set with MARIADB_USER}");"
      if [ -n "${MARIADB_DATABASE:-}" ]; then
        echo "GRANT ALL ON $(ident "$MARIADB_DATABASE").* TO $(lit "$MARIADB_USER")@'%';"
      fi
    fi
    if [ -n "${MARIADB_RANDOM_ROOT_PASSWORD:-}" ]; then
      root=$(head -c 24 /dev/urandom | base64)
      echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(lit "$root");"
      echo "mariadb stand-in: GENERATED ROOT PASSWORD: $root" >&2
    fi
  } >"$sql"
  printf '[client]\nuser=healthcheck\npassword=%s\nsocket=/run/mysqld/mysqld.sock\n' "$health" \
    >"$datadir/.my-healthcheck.cnf"
  chmod 0600 "$datadir/.my-healthcheck.cnf"
  init=(--init-file="$sql")
  echo "mariadb stand-in: initialised $datadir" >&2
fi
if [ "${1:-}" = mariadbd ]; then
  shift
  exec mariadbd --datadir="$datadir" --bind-address='*' --port=3306 \
    --socket=/run/mysqld/mysqld.sock "${init[@]}" "$@"
fi
exec "$@"
