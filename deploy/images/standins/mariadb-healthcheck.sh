#!/bin/sh
# healthcheck.sh of the mariadb stand-in, as in the public image (the two
# checks compose files use): --connect (the server answers a query) and
# --innodb_initialized (InnoDB is up). Exit 0 only if every check passes.
set -eu
q() {
  mariadb --defaults-extra-file=/var/lib/mysql/.my-healthcheck.cnf --skip-column-names -e "$1"
}
[ $# -gt 0 ] || set -- --connect
for check; do
  case $check in
    --connect) q 'SELECT 1' >/dev/null ;;
    --innodb_initialized)
      [ "$(q "SELECT COUNT(*) FROM information_schema.ENGINES WHERE ENGINE = 'InnoDB' AND SUPPORT IN ('YES', 'DEFAULT')")" = 1 ] ;;
    *) echo "healthcheck.sh (stand-in): unsupported check $check" >&2; exit 2 ;;
  esac
done
