#!/usr/bin/env bash
# Reconcile: create the table, add and drop columns, keep the indexes the
# DatabaseTableSqliteExtension lists. A column whose type changed is refused
# (the Rust SQLite plugin rebuilds the table; this one stays short).
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
check_names

# The spec's columns, and the table's as they are (name -> declared type).
declare -A wanted=() spec_type=() existing=()
wanted_names=()
while IFS=$'\t' read -r name type; do
    [[ -n $name ]] || continue
    is_identifier "$name" || fail "column \"$name\" is not a SQL identifier; use lower-case letters, digits and '_'"
    declared=$(sql_type "$type") \
        || fail "column $name has type \"$type\"; use one of $(type_names | jq -r 'join(", ")')"
    wanted[$name]=$declared
    spec_type[$name]=$type
    wanted_names+=("$name")
done < <(spec_columns)
((${#wanted_names[@]} > 0)) || fail "a table needs at least one column"
while IFS=$'\t' read -r name type; do
    [[ -n $name ]] && existing[$name]=$type
done < <(table_columns)

statements="" columns="" changes=""
for name in "${wanted_names[@]}"; do
    declared=${wanted[$name]}
    columns="$columns${columns:+, }\"$name\" $declared"
    if ((${#existing[@]} > 0)); then
        if [[ -z ${existing[$name]+set} ]]; then
            statements="$statements ALTER TABLE \"$table\" ADD COLUMN \"$name\" $declared;"
            changes="$changes added $name;"
        elif [[ ${existing[$name]} != "$declared" ]]; then
            fail "column $name is ${existing[$name]} in $db, the spec says ${spec_type[$name]}; the shell plugin does not retype columns" Unsupported
        fi
    fi
done
if ((${#existing[@]} == 0)); then
    statements="CREATE TABLE \"$table\" ($columns);"
else
    for name in "${!existing[@]}"; do
        [[ -n ${wanted[$name]+set} ]] && continue
        statements="$statements ALTER TABLE \"$table\" DROP COLUMN \"$name\";"
        changes="$changes dropped $name;"
    done
fi

# Indexes: the plugin owns kplug_sh_ix_<table>_<column>, and leaves others alone.
prefix="kplug_sh_ix_${table}_"
declare -A indexed=()
indexes=()
while read -r column; do
    [[ -n $column ]] || continue
    [[ -n ${wanted[$column]+set} ]] \
        || fail "the extension indexes column $column, which the table does not have" InvalidExtension
    indexed[$column]=1
    indexes+=("$column")
    statements="$statements CREATE INDEX IF NOT EXISTS \"$prefix$column\" ON \"$table\" (\"$column\");"
done < <(field '.extensions[]? | select(.kind == "DatabaseTableSqliteExtension") | .spec.indexes[]?')
if [[ -f $db ]]; then
    while read -r index; do
        [[ -n $index && -z ${indexed[${index#"$prefix"}]+set} ]] || continue
        statements="$statements DROP INDEX \"$index\";"
    done < <(query "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '$table' AND name LIKE '${prefix}%';")
fi

error=$(sql "$statements" 2>&1) || fail "sqlite3 refused the change to $table in $db: $error" SqliteError
rows=$(query "SELECT count(*) FROM \"$table\";")
event=""
if ((${#existing[@]} == 0)); then event="TableCreated"; elif [[ -n $changes ]]; then event="TableAltered"; fi
jq -n --arg table "$table" --arg db "$db" --argjson columns "${#wanted_names[@]}" --argjson rows "$rows" \
    --arg event "$event" --arg changes "${changes:- created}" \
    --arg extension "$(field '.extensions[]? | select(.kind == "DatabaseTableSqliteExtension") | .metadata.name')" \
    --args '
    {
      outcome: "OK",
      message: "table \($table) in \($db): \($columns) columns",
      status: {table: $table, database: $db, columns: $columns, rows: $rows},
      conditions: [{type: "TableReady", status: "True", reason: "UpToDate", message: "\($columns) columns"}],
      events: (if $event == "" then [] else [{reason: $event, message: "table \($table):\($changes)"}] end),
      extensionStatuses: (if $extension == "" then [] else
        [{target: {kind: "DatabaseTableSqliteExtension", name: $extension},
          status: {table: $table, indexes: $ARGS.positional}}] end)
    }' "${indexes[@]}"
