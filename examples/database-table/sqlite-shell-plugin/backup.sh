#!/usr/bin/env bash
# Hook "backup" (before-reconcile, sync-enforce): before reconcile.sh
# changes a table's columns, copy its SQLite file to
# $KPLUG_SQLITE_DATA_DIR/backups/<serverName>/<table>/<time>.db, and keep the
# newest $BACKUP_KEEP (default 5) of that table. Nothing is copied when the
# table does not exist yet or the spec keeps its columns. A failed backup
# stops the reconcile (sync-enforce) until one succeeds.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
need_data_dir

keep=${BACKUP_KEEP:-5}
if ! [[ $keep =~ ^[1-9][0-9]*$ ]]; then
    echo "BACKUP_KEEP is \"$keep\"; set it to how many backups of a table to keep (1 or more)" >&2
    exit 1
fi
if ! usable || [[ ! -f $db ]]; then
    exit 0 # reconcile.sh refuses the names, or has made nothing yet
fi
current=$(table_columns | sort)
[[ -n $current ]] || exit 0 # no table yet: nothing to lose

# The columns reconcile.sh would leave, as it declares them; a type it does
# not know makes it refuse the spec, which changes nothing.
wanted=""
while IFS=$'\t' read -r name type; do
    [[ -n $name ]] || continue
    declared=$(sql_type "$type") || exit 0
    wanted+="$name"$'\t'"$declared"$'\n'
done < <(spec_columns)
if [[ $(sort <<<"${wanted%$'\n'}") == "$current" ]]; then
    exit 0 # the columns stay as they are
fi

dir="$data_dir/backups/$server/$table"
mkdir -p "$dir"
now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
backup="$dir/${now//[-:]/}.db"
# VACUUM INTO: a consistent copy, even while other tables of the file change.
sqlite3 -bail -cmd '.timeout 5000' "$db" "VACUUM INTO '${backup//\'/\'\'}';"
backups=("$dir"/*.db) # oldest first: the names are UTC times
excess=$((${#backups[@]} - keep))
if ((excess > 0)); then
    rm -f -- "${backups[@]:0:excess}"
fi
kept=$((excess > 0 ? keep : ${#backups[@]}))
jq -n --arg db "$db" --arg backup "$backup" --arg time "${now%.*}Z" --argjson kept "$kept" --arg table "$table" '
    {
      message: "copied \($db) to \($backup) before changing the columns of \($table)",
      status: {backup: {lastBackup: $backup, time: $time, kept: $kept}},
      events: [{reason: "TableBackedUp", message: "\($db) copied to \($backup)"}]
    }'
