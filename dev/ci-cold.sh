#!/usr/bin/env bash
# What CI costs on a new machine: wipes every cache that a new machine of
# this project's kind lacks, then runs `.ci/run` on a fresh clone of HEAD,
# as CI does (CI=true, no standard input), and prints its closing table.
#
#   dev/ci-cold.sh           wipe the caches, clone, run .ci/run
#   dev/ci-cold.sh --warm    the same clone and run, caches kept
#   dev/ci-cold.sh --list    say what would be wiped, and how big it is
#   (make ci-cold / make ci-warm)
#
# Wiped (this is destructive: your next build downloads and compiles
# everything again, as a new machine does):
#   - Cargo's registry and git caches (CARGO_HOME/registry, CARGO_HOME/git)
#   - Go's module and build caches (go clean -modcache -cache), and the
#     Kubernetes builds' own (K8S_GOCACHE, the Makefile's)
#   - the npm and pip caches, and Maven's repository (~/.m2/repository)
#   - the nightly Rust toolchain
#   - the Cargo build (target/debug) .ci/run keeps between runs
#     (KPLUG_CI_CACHE, default ~/.cache/kplug-ci)
#   - the Docker CLI plugins built from Go modules (~/.docker/cli-plugins),
#     and every Docker image, container, volume and the build cache: the
#     engine's whole data root, when no engine runs
#
# Not wiped: the Debian packages `.ci/run` and `make test` install
# (docker.io, containerd, PostgreSQL, MariaDB...): reinstalling them is a
# minute or two of a new machine's run, and purging them would also remove
# what the machine image came with.
#
# The clone is made from this repository's HEAD (commit first) in
# KPLUG_CI_DIR (default: a new directory under /tmp) and is kept, with the
# whole log in ci.log next to it.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
mode=cold
case ${1:-} in
  "") ;;
  --warm) mode=warm ;;
  --list) mode=list ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

say() { printf '[ci-cold] %s\n' "$*" >&2; }

cargo_home=${CARGO_HOME:-$HOME/.cargo}
docker_root=/var/lib/docker
caches=(
  "$cargo_home/registry"
  "$cargo_home/git"
  "$(go env GOMODCACHE 2>/dev/null || echo "$HOME/go/pkg/mod")"
  "$(go env GOCACHE 2>/dev/null || echo "$HOME/.cache/go-build")"
  "${K8S_GOCACHE:-$HOME/.cache/kplug-k8s-go-build}"
  "$(npm config get cache 2>/dev/null || echo "$HOME/.npm")"
  "$(python3 -m pip cache dir 2>/dev/null || echo "$HOME/.cache/pip")"
  "$HOME/.m2/repository"
  "${KPLUG_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kplug-ci}"
  "${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  "$docker_root"
)

size() { du -sh "$1" 2>/dev/null | cut -f1; }

if [ "$mode" = list ]; then
  for c in "${caches[@]}"; do printf '%-50s %s\n' "$c" "$(size "$c" || echo -)"; done
  rustup toolchain list | grep -q '^nightly' && echo "the nightly toolchain (rustup)"
  exit 0
fi

if [ "$mode" = cold ]; then
  if docker info >/dev/null 2>&1; then
    if [ -s "$repo/target/docker/dockerd.pid" ]; then
      "$repo/deploy/images/engine.sh" stop
    else
      say "a Docker engine runs that this repository's scripts did not start: stop it first (its images would survive)"
      exit 1
    fi
  fi
  # go clean makes the module cache's read-only files removable first.
  say "go clean -modcache -cache"
  go clean -modcache -cache
  for c in "${caches[@]}"; do
    [ -e "$c" ] || continue
    say "removing $c ($(size "$c"))"
    rm -rf "$c"
  done
  if rustup toolchain list | grep -q '^nightly'; then
    say "rustup toolchain uninstall nightly"
    rustup toolchain uninstall nightly
  fi
fi

# The clone's `make test` starts the example's databases on their fixed
# loopback ports: this checkout's, if they run, would hold them.
if [ -x "$repo/examples/database-table/dev/databases.sh" ]; then
  "$repo/examples/database-table/dev/databases.sh" stop >/dev/null 2>&1 || true
fi

dir=${KPLUG_CI_DIR:-$(mktemp -d -t kplug-ci-$mode.XXXXXX)}
mkdir -p "$dir"
# mktemp makes it 0700; the databases run as their own users
# (examples/database-table/dev/databases.sh), and their data lives in the
# clone's target/: every directory on the way must be searchable, as a CI
# checkout's is.
chmod 755 "$dir"
say "cloning $(git -C "$repo" rev-parse --short HEAD) into $dir/kplug"
git clone --quiet "$repo" "$dir/kplug"
say "running .ci/run ($mode); the whole log: $dir/ci.log"
start=$(date +%s)
status=0
(cd "$dir/kplug" && CI=true bash .ci/run </dev/null) >"$dir/ci.log" 2>&1 || status=$?
say ".ci/run ($mode) exited $status after $(( ($(date +%s) - start) / 60 )) min; its closing table:"
sed -n '/^=== CI summary/,$p' "$dir/ci.log"
exit "$status"
