#!/usr/bin/env bash
# The Docker engine for `make images` and the container tests.
#
#   deploy/images/engine.sh start   use the running engine, or start dockerd
#   deploy/images/engine.sh stop    stop dockerd if this script started it
#   deploy/images/engine.sh status
#
# A fresh machine has Debian's docker.io installed (by .ci/run or by hand:
# apt-get install docker.io) but no dockerd running. `start` runs dockerd in
# the background with its log in target/docker/dockerd.log and remembers its
# pid, so `stop` ends only an engine it started. DOCKER names the docker CLI.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
docker=${DOCKER:-docker}
state=$root/target/docker
pidfile=$state/dockerd.pid

say() { printf '[engine] %s\n' "$*" >&2; }

up() { "$docker" info >/dev/null 2>&1; }

ours() { [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case ${1:-} in
  start)
    if up; then
      say "using the running Docker engine ($("$docker" version -f '{{.Server.Version}}'))"
      exit 0
    fi
    command -v dockerd >/dev/null \
      || { say "no Docker engine runs and dockerd is missing: apt-get install docker.io"; exit 1; }
    mkdir -p "$state"
    say "starting dockerd (log: $state/dockerd.log)..."
    setsid dockerd >"$state/dockerd.log" 2>&1 </dev/null &
    echo $! >"$pidfile"
    for _ in $(seq 1 120); do
      if up; then
        say "dockerd $("$docker" version -f '{{.Server.Version}}') is up"
        exit 0
      fi
      ours || { say "dockerd exited; the end of its log:"; tail -20 "$state/dockerd.log" >&2; exit 1; }
      sleep 0.5
    done
    say "dockerd did not answer within 60s; see $state/dockerd.log"
    exit 1
    ;;
  stop)
    if ! ours; then
      say "no dockerd started by this script runs; nothing to stop"
      rm -f "$pidfile"
      exit 0
    fi
    pid=$(cat "$pidfile")
    say "stopping dockerd (pid $pid)..."
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || { rm -f "$pidfile"; say "stopped"; exit 0; }
      sleep 0.5
    done
    say "dockerd (pid $pid) did not stop within 30s; killing it"
    kill -KILL "$pid" || true
    rm -f "$pidfile"
    ;;
  status)
    if up; then
      echo "up ($("$docker" version -f '{{.Server.Version}}'))$(ours && echo ', started by engine.sh')"
    else
      echo down
      exit 1
    fi
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
