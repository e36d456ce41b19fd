#!/usr/bin/env bash
# Docker CLI plugins kplug's builds need, built from their Go modules where
# they are missing (no download site but the Go module proxy is reachable):
#
#   deploy/images/cli-plugins.sh [buildx] [compose]
#       install those plugins (both when none is named)
#
# Versions are pinned in deploy/tool-versions.env. A plugin that already
# works (`docker buildx version`, `docker compose version`, e.g. from Docker
# Desktop or a distribution package) is left alone. Installed into
# ${DOCKER_CONFIG:-~/.docker}/cli-plugins, where the docker CLI looks, so
# the commands in the docs work as typed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
deploy=$(cd "$here/.." && pwd)
# shellcheck source=../tool-versions.env
. "$deploy/tool-versions.env"
# shellcheck source=lock.sh
. "$here/lock.sh"
docker=${DOCKER:-docker}
go=${GO:-go}
plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
work=$deploy/.tools/cli-plugins

say() { printf '[cli-plugins] %s\n' "$*" >&2; }

# build <plugin> <module> <version> <package> <version variable>
# In a subshell of its own: it holds the plugin's lock until it returns.
# One build of a plugin at a time on a machine (lock.sh): the second waits
# for the first, then finds the plugin there.
build() (
  local plugin=$1 module=$2 version=$3 package=$4 variable=$5 dir start current ours
  take_lock 8 "$work/.lock-$plugin" "$plugin"
  current=$("$docker" "${plugin#docker-}" version 2>/dev/null | head -1 || true)
  # A stamp marks a plugin this script built, so a new pinned version
  # replaces it; a working plugin without one is the user's own.
  ours=$plugins/.kplug-$plugin
  if [ -n "$current" ] && { [ ! -e "$ours" ] || [ "$(cat "$ours")" = "$version" ]; }; then
    say "$plugin: present ($current)"
    return
  fi
  start=$(date +%s)
  say "$plugin: building $module@$version from the Go module proxy (a few minutes)..."
  # The module's own go.mod (its replace and exclude directives) must apply,
  # which `go install module@version` refuses: build inside a copy of it.
  dir=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" mod download -json "$module@$version" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { say "go mod download $module@$version failed"; exit 1; }
  rm -rf "$work/$plugin" && mkdir -p "$work" "$plugins"
  cp -r "$dir" "$work/$plugin" && chmod -R u+w "$work/$plugin"
  (cd "$work/$plugin" && GOTOOLCHAIN=local GOFLAGS=-mod=mod "$go" build -trimpath \
    -ldflags "-s -w -X $variable=$version" -o "$plugins/$plugin.tmp" "$package")
  mv "$plugins/$plugin.tmp" "$plugins/$plugin"
  echo "$version" >"$ours"
  rm -rf "$work/$plugin"
  say "$plugin: $("$docker" "${plugin#docker-}" version | head -1), built in $(( $(date +%s) - start ))s"
)

for plugin in "${@:-buildx compose}"; do
  for plugin in $plugin; do
    case $plugin in
      buildx)
        build docker-buildx github.com/docker/buildx "$BUILDX_VERSION" ./cmd/buildx \
          github.com/docker/buildx/version.Version ;;
      compose)
        build docker-compose github.com/docker/compose/v2 "$COMPOSE_VERSION" ./cmd \
          github.com/docker/compose/v2/internal.Version ;;
      *) say "unknown plugin $plugin (buildx or compose)"; exit 2 ;;
    esac
  done
done
