# Sourced by deploy/images/*.sh: one run of a build step at a time on a
# machine (two `make images` at once: the one `make test` runs in the
# background and one typed meanwhile).
#
#   take_lock FD FILE WHAT
#
# Opens FILE on descriptor FD and locks it, saying (through the caller's
# `say`) that it waits, for WHAT, and for how long, when another run holds
# it. The lock is held until FD is closed or the process ends.
take_lock() {
  local fd=$1 file=$2 what=$3 waited
  mkdir -p "$(dirname "$file")"
  eval "exec $fd>\"\$file\""
  flock -n "$fd" && return 0
  say "$what: another run holds $file; waiting for it..."
  waited=$(date +%s)
  flock "$fd"
  say "$what: the other run ended after $(( $(date +%s) - waited ))s"
}
