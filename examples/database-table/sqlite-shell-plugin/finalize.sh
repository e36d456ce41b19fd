#!/usr/bin/env bash
# Finalize: drop the table when spec.deletionPolicy is Delete; keep it
# (the default, Retain) otherwise.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need_data_dir

if [[ $(field '.object.spec.deletionPolicy') != "Delete" ]]; then
    jq -n --arg t "$table" '{message: "deletionPolicy Retain: table \($t) kept"}'
    exit 0
fi
if ! usable || [[ ! -f $db ]]; then
    jq -n '{message: "nothing to drop: the spec never made a table"}'
    exit 0
fi
sql "DROP TABLE IF EXISTS \"$table\";" >&2
jq -n --arg t "$table" --arg db "$db" '{message: "deletionPolicy Delete: table \($t) dropped from \($db)"}'
