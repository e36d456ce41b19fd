# Shared by reconcile.sh and finalize.sh: the request, the database file, and
# answers. POSIX sh; needs jq and sqlite3.

request=$(cat)
data_dir=${KPLUG_SQLITE_DATA_DIR:?set KPLUG_SQLITE_DATA_DIR (the directory of the SQLite files) in the plugin container}

# field JQ_PATH: a field of the request, raw ("" when absent).
field() { printf '%s' "$request" | jq -r "$1 // empty"; }

# fail MESSAGE [REASON]: answer FAILED with a TableReady=False condition.
fail() {
    jq -n --arg m "$1" --arg r "${2:-InvalidSpec}" \
        '{outcome: "FAILED", message: $m, conditions: [{type: "TableReady", status: "False", reason: $r, message: $m}]}'
    exit 0
}

# is_identifier NAME: a lower-case SQL identifier, as the model requires.
is_identifier() {
    case "$1" in
        '' | [!a-z_]* | *[!a-z0-9_]*) return 1 ;;
    esac
    [ "${#1}" -le 63 ]
}

server=$(field '.object.spec.serverName')
table=$(printf '%s' "$KPLUG_NAME" | tr - _)
db="$data_dir/$server.db"

# usable: whether the server and table names can be a file and a table
# (a spec refused by reconcile.sh never made either).
usable() {
    case "$server" in '' | *[!A-Za-z0-9_-]*) return 1 ;; esac
    is_identifier "$table"
}

# check_names: fail, saying why, unless usable.
check_names() {
    case "$server" in
        '' | *[!A-Za-z0-9_-]*) fail "serverName \"$server\" cannot be a file name; use letters, digits, '-' and '_'" ;;
    esac
    is_identifier "$table" || fail "the resource name $KPLUG_NAME is not a table name; use lower-case letters, digits and '-'"
    mkdir -p "$data_dir"
}

# sql STATEMENTS: run them in one transaction, waiting up to 5 s for the lock
# another run holds on the same file.
sql() { sqlite3 -bail -cmd '.timeout 5000' "$db" "BEGIN IMMEDIATE; $1 COMMIT;"; }
# query SELECT: rows as tab-separated lines.
query() { sqlite3 -bail -cmd '.timeout 5000' -separator '	' "$db" "$1"; }
