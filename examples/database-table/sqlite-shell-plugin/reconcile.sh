#!/bin/sh
# Reconcile: create the table, add and drop columns, keep the indexes the
# DatabaseTableSqliteExtension lists. A column whose type changed is refused
# (the Rust SQLite plugin rebuilds the table; this one stays short).
set -eu
. "$(dirname "$0")/lib.sh"
check_names

sql_type() {
    case "$1" in
        int32) echo INTEGER ;; int64) echo BIGINT ;; uint64) echo 'UNSIGNED BIGINT' ;;
        string) echo TEXT ;; bool) echo BOOLEAN ;; float64) echo DOUBLE ;; timestamp) echo TIMESTAMP ;;
        *) return 1 ;;
    esac
}

wanted=$(field '.object.spec.columns[]? | "\(.name)\t\(.type)"')
[ -n "$wanted" ] || fail "a table needs at least one column"
tab=$(printf '\t')
existing=$(query "SELECT name, type FROM pragma_table_info('$table');")
statements="" columns="" count=0 changes=""
while IFS="$tab" read -r name type; do
    is_identifier "$name" || fail "column \"$name\" is not a SQL identifier; use lower-case letters, digits and '_'"
    declared=$(sql_type "$type") || fail "column $name has type \"$type\"; use int32, int64, uint64, string, bool, float64 or timestamp"
    count=$((count + 1))
    columns="$columns${columns:+, }\"$name\" $declared"
    current=$(printf '%s\n' "$existing" | awk -F "$tab" -v n="$name" '$1 == n { print $2 }')
    if [ -n "$existing" ] && [ -z "$current" ]; then
        statements="$statements ALTER TABLE \"$table\" ADD COLUMN \"$name\" $declared;"
        changes="$changes added $name;"
    elif [ -n "$current" ] && [ "$current" != "$declared" ]; then
        fail "column $name is $current in $db, the spec says $type; the shell plugin does not retype columns" Unsupported
    fi
done <<COLUMNS
$wanted
COLUMNS
if [ -z "$existing" ]; then
    statements="CREATE TABLE \"$table\" ($columns);"
else
    for name in $(printf '%s\n' "$existing" | cut -f1); do
        printf '%s\n' "$wanted" | cut -f1 | grep -qx "$name" && continue
        statements="$statements ALTER TABLE \"$table\" DROP COLUMN \"$name\";"
        changes="$changes dropped $name;"
    done
fi

# Indexes: the plugin owns kplug_sh_ix_<table>_<column>, and leaves others alone.
prefix="kplug_sh_ix_${table}_"
indexes=$(field '.extensions[]? | select(.kind == "DatabaseTableSqliteExtension") | .spec.indexes[]?')
for column in $indexes; do
    printf '%s\n' "$wanted" | cut -f1 | grep -qx "$column" \
        || fail "the extension indexes column $column, which the table does not have" InvalidExtension
    statements="$statements CREATE INDEX IF NOT EXISTS \"$prefix$column\" ON \"$table\" (\"$column\");"
done
for index in $(query "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '$table' AND name LIKE '${prefix}%';"); do
    printf '%s\n' $indexes | grep -qx "${index#"$prefix"}" && continue
    statements="$statements DROP INDEX \"$index\";"
done

error=$(sql "$statements" 2>&1) || fail "sqlite3 refused the change to $table in $db: $error" SqliteError
rows=$(query "SELECT count(*) FROM \"$table\";")
event=""
if [ -z "$existing" ]; then event="TableCreated"; elif [ -n "$changes" ]; then event="TableAltered"; fi
jq -n --arg table "$table" --arg db "$db" --argjson columns "$count" --argjson rows "$rows" \
    --arg event "$event" --arg changes "${changes:- created}" \
    --arg extension "$(field '.extensions[]? | select(.kind == "DatabaseTableSqliteExtension") | .metadata.name')" \
    --arg indexes "$indexes" '
    {
      outcome: "OK",
      message: "table \($table) in \($db): \($columns) columns",
      status: {table: $table, database: $db, columns: $columns, rows: $rows},
      conditions: [{type: "TableReady", status: "True", reason: "UpToDate", message: "\($columns) columns"}],
      events: (if $event == "" then [] else [{reason: $event, message: "table \($table):\($changes)"}] end),
      extensionStatuses: (if $extension == "" then [] else
        [{target: {kind: "DatabaseTableSqliteExtension", name: $extension},
          status: {table: $table, indexes: ($indexes | split("\n") | map(select(. != "")))}}] end)
    }'
