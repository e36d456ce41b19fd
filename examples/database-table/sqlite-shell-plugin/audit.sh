#!/usr/bin/env bash
# Hook "audit" (after-reconcile, async): append one line per reconcile to
# the audit log, $AUDIT_LOG (default $KPLUG_SQLITE_DATA_DIR/audit.log):
# time, namespace/name, generation, implementation, outcome and message,
# separated by tabs. The operator does not wait for it; a failure is a
# Warning Event on the table.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

log=${AUDIT_LOG:-}
if [[ -z $log ]]; then
    need_data_dir
    log="$data_dir/audit.log"
fi
line=$(jq -r --arg time "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg ns "${KPLUG_NAMESPACE:-}" '
    [$time, (if $ns == "" then "" else "\($ns)/" end) + .object.metadata.name,
     (.object.metadata.generation // 0 | tostring), .implementation,
     (.outcome // "UNKNOWN"), (.message // "" | gsub("[\t\n]"; " "))] | join("\t")
' <<<"$request")
mkdir -p "$(dirname "$log")"
# Runs for different tables may end at once: one line at a time.
exec 9>>"$log"
flock 9
printf '%s\n' "$line" >&9
