# Shared by every script of the plugin: the request, the column types, the
# database file, and answers. Bash; needs jq and sqlite3.
# shellcheck shell=bash

request=$(cat)

# field JQ_PATH: a field of the request, raw ("" when absent).
field() { jq -r "$1 // empty" <<<"$request"; }

# The model's column types, each with the type SQLite declares for it: the
# one list reconcile.sh creates columns from and validate.sh checks against.
readonly COLUMN_TYPES=(
    int32=INTEGER int64=BIGINT "uint64=UNSIGNED BIGINT" string=TEXT
    bool=BOOLEAN float64=DOUBLE timestamp=TIMESTAMP
)

# sql_type TYPE: the SQLite declaration of a column type; fails for an
# unknown one.
sql_type() {
    local pair
    for pair in "${COLUMN_TYPES[@]}"; do
        if [[ ${pair%%=*} == "$1" ]]; then
            printf '%s\n' "${pair#*=}"
            return 0
        fi
    done
    return 1
}

# type_names: the column types, as a JSON array.
type_names() {
    local pair
    for pair in "${COLUMN_TYPES[@]}"; do printf '%s\n' "${pair%%=*}"; done | jq -R . | jq -sc .
}

# fail MESSAGE [REASON]: answer FAILED with a TableReady=False condition.
fail() {
    jq -n --arg m "$1" --arg r "${2:-InvalidSpec}" \
        '{outcome: "FAILED", message: $m, conditions: [{type: "TableReady", status: "False", reason: $r, message: $m}]}'
    exit 0
}

# is_identifier NAME: a lower-case SQL identifier, as the model requires.
is_identifier() {
    [[ $1 =~ ^[a-z_][a-z0-9_]*$ && ${#1} -le 63 ]]
}

server=$(field '.object.spec.serverName')
table=${KPLUG_NAME//-/_}
data_dir=${KPLUG_SQLITE_DATA_DIR:-}
db="$data_dir/$server.db"

# need_data_dir: stop, saying what to set, without KPLUG_SQLITE_DATA_DIR.
need_data_dir() {
    if [[ -z $data_dir ]]; then
        echo "set KPLUG_SQLITE_DATA_DIR (the directory of the SQLite files) in the plugin container" >&2
        exit 1
    fi
}

# usable: whether the server and table names can be a file and a table
# (a spec refused by reconcile.sh never made either).
usable() {
    [[ $server =~ ^[A-Za-z0-9_-]+$ ]] && is_identifier "$table"
}

# check_names: fail, saying why, unless usable.
check_names() {
    need_data_dir
    [[ $server =~ ^[A-Za-z0-9_-]+$ ]] \
        || fail "serverName \"$server\" cannot be a file name; use letters, digits, '-' and '_'"
    is_identifier "$table" \
        || fail "the resource name $KPLUG_NAME is not a table name; use lower-case letters, digits and '-'"
    mkdir -p "$data_dir"
}

# sql STATEMENTS: run them in one transaction, waiting up to 5 s for the lock
# another run holds on the same file.
sql() { sqlite3 -bail -cmd '.timeout 5000' "$db" "BEGIN IMMEDIATE; $1 COMMIT;"; }
# query SELECT: rows as tab-separated lines.
query() { sqlite3 -bail -cmd '.timeout 5000' -separator $'\t' "$db" "$1"; }

# spec_columns: the spec's columns, one "name<TAB>type" line each.
spec_columns() { field '.object.spec.columns[]? | "\(.name)\t\(.type)"'; }

# table_columns: the table's columns in the file, one "name<TAB>declared
# type" line each; nothing when the file or the table does not exist.
table_columns() {
    [[ -f $db ]] || return 0
    query "SELECT name, type FROM pragma_table_info('$table');"
}
