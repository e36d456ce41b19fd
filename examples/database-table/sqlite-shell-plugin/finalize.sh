#!/bin/sh
# Finalize: drop the table when spec.deletionPolicy is Delete; keep it
# (the default, Retain) otherwise.
set -eu
. "$(dirname "$0")/lib.sh"

if [ "$(field '.object.spec.deletionPolicy')" != "Delete" ]; then
    jq -n --arg t "$table" '{message: "deletionPolicy Retain: table \($t) kept"}'
    exit 0
fi
if ! usable || [ ! -f "$db" ]; then
    jq -n '{message: "nothing to drop: the spec never made a table"}'
    exit 0
fi
sql "DROP TABLE IF EXISTS \"$table\";" >&2
jq -n --arg t "$table" --arg db "$db" '{message: "deletionPolicy Delete: table \($t) dropped from \($db)"}'
