#!/usr/bin/env bash
# Local stand-ins for the public base images kplug's Dockerfiles name, for
# machines that reach Debian's package mirror but no container registry.
#
#   deploy/images/standins.sh                   build the stand-ins that are missing
#   deploy/images/standins.sh --except-kubectl  the same, but for kubectl's (which
#                                               needs `make node-binaries` first;
#                                               `make images` builds the others
#                                               while those build)
#   deploy/images/standins.sh --list            print each base image and its state
#
# One run at a time on a machine (two `make images` at once: the one `make
# test` runs in the background and one typed meanwhile): a second run waits
# for the first (a lock in KPLUG_STANDIN_WORK), then finds its images there.
#
# Each stand-in is built from Debian packages (debootstrap, `docker import`,
# then small Dockerfiles in deploy/images/standins/), tagged with the exact
# public name the Dockerfiles use, so those stay what a user with internet
# builds, and labelled `org.kplug.stand-in=true` with what it really is.
# They trust this machine's extra CA certificates
# (/usr/local/share/ca-certificates), as the machine itself does.
# An image already present under a tag (the real one, pulled) is left alone;
# nothing is ever pulled from here.
#
# Two stand-ins are older releases than their tags say (Debian bookworm's
# PostgreSQL 15 for postgres:17, MariaDB 10.11 for mariadb:11.8); the Go one is
# this machine's Go if it is at least the tag's release; the kubectl one is
# the kubectl `make node-binaries` builds, if its version is the tag's. Each
# says what it really is in its description label.
#
# Environment: DOCKER (the docker CLI), GO (the go command), KUBECTL (default
# target/testenv/kubectl), KPLUG_STANDIN_WORK (scratch space, default
# target/standins), DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
docker=${DOCKER:-docker}
work=${KPLUG_STANDIN_WORK:-$root/target/standins}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
label=org.kplug.stand-in
# shellcheck source=lock.sh
. "$here/lock.sh"

# Tag -> how it is made. Order matters: later ones build FROM debian.
bases=(
  "debian:bookworm-slim"
  "rust:1.95.0-slim-bookworm"
  "python:3.11-slim-bookworm"
  "gcr.io/distroless/cc-debian12:nonroot"
  # compose.yaml's (docker compose up) and kube-testenv.Dockerfile's.
  "golang:1.25-bookworm"
  "registry.k8s.io/kubectl:v1.35.4"
  "postgres:17-bookworm"
  "mariadb:11.8"
)

say() { printf '[standins] %s\n' "$*" >&2; }

present() { "$docker" image inspect "$1" >/dev/null 2>&1; }

state() {
  if ! present "$1"; then
    echo missing
  elif [ "$("$docker" image inspect -f "{{ index .Config.Labels \"$label\" }}" "$1")" = true ]; then
    echo stand-in
  else
    echo "real image"
  fi
}

labels() {
  printf -- '--label\n%s=true\n--label\norg.opencontainers.image.description=kplug stand-in for %s: %s\n' \
    "$label" "$1" "$2"
}

debian_slim() {
  local tag=$1 rootfs=$work/debian-bookworm
  command -v debootstrap >/dev/null \
    || { say "debootstrap is missing: apt-get install debootstrap"; exit 1; }
  rm -rf "$rootfs"
  mkdir -p "$work"
  say "debootstrap bookworm (minbase) from $mirror, about a minute..."
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { say "debootstrap failed; see $work/debootstrap.log"; tail -5 "$work/debootstrap.log" >&2; exit 1; }
  # This machine's own CA certificates (a TLS-inspecting egress proxy's,
  # say): images built FROM the stand-ins reach crates.io and PyPI through
  # it. They become trusted where ca-certificates gets installed.
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    install -d "$rootfs/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
  fi
  # What the public slim image drops: documentation, man pages, apt lists.
  rm -rf "$rootfs"/usr/share/{doc,man,info}/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log
  tar -C "$rootfs" --numeric-owner -c . | "$docker" import \
    --change 'CMD ["bash"]' \
    --change "LABEL $label=true" \
    --change "LABEL org.opencontainers.image.description=\"kplug stand-in for $tag: debootstrap --variant=minbase bookworm\"" \
    - "$tag" >/dev/null
  rm -rf "$rootfs"
}

# A Dockerfile of standins/ with a context of its own; the files named after
# the context (entrypoints, from standins/ too) are copied into it.
from_dockerfile() {
  local tag=$1 file=$2 what=$3 context=$4 extra_file
  shift 4
  cp "$here/standins/$file" "$context/Dockerfile"
  for extra_file; do cp -p "$here/standins/$extra_file" "$context/"; done
  mapfile -t extra < <(labels "$tag" "$what")
  DOCKER_BUILDKIT=1 "$docker" build --quiet "${extra[@]}" -t "$tag" "$context" >/dev/null
}

rust_slim() {
  local tag=$1 context=$work/rust version
  version=$(rustc --version | awk '{ print $2 }')
  [ "$tag" = "rust:$version-slim-bookworm" ] \
    || { say "$tag needs Rust ${tag#rust:}; this machine has $version (rustup toolchain install ${tag#rust:})"; exit 1; }
  rm -rf "$context" && mkdir -p "$context/toolchain"
  local sysroot
  sysroot=$(rustc --print sysroot)
  # The compiler and cargo, without the documentation (over half the size).
  cp -a "$sysroot/bin" "$sysroot/lib" "$context/toolchain/"
  rm -f "$context"/toolchain/bin/{rust-gdb*,rust-lldb,rustup}
  from_dockerfile "$tag" rust.Dockerfile "Debian slim + this machine's Rust $version" "$context"
  rm -rf "$context"
}

python_slim() {
  local tag=$1 context=$work/python
  rm -rf "$context" && mkdir -p "$context"
  from_dockerfile "$tag" python.Dockerfile "Debian slim + Debian's Python 3.11" "$context"
  rm -rf "$context"
}

distroless_cc() {
  local tag=$1 context=$work/distroless
  rm -rf "$context" && mkdir -p "$context"
  from_dockerfile "$tag" distroless-cc.Dockerfile "glibc, libgcc, libstdc++, libssl, CA certificates from Debian" "$context"
  rm -rf "$context"
}

golang() {
  local tag=$1 context=$work/golang want have goroot
  want=${tag#golang:}; want=${want%-bookworm}
  have=$("${GO:-go}" env GOVERSION); have=${have#go}
  # Go is backwards compatible: a newer release builds what the tag's does.
  [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ] \
    || { say "$tag needs Go $want or newer; this machine has $have"; exit 1; }
  goroot=$("${GO:-go}" env GOROOT)
  rm -rf "$context" && mkdir -p "$context/go"
  # The toolchain without its tests and documentation.
  cp -a "$goroot"/{bin,pkg,src,lib,go.env,VERSION} "$context/go/"
  rm -rf "$context/go/pkg/obj" "$context/go/pkg/bootstrap"
  from_dockerfile "$tag" golang.Dockerfile "Debian slim + this machine's Go $have" "$context"
  rm -rf "$context"
}

kubectl_image() {
  local tag=$1 context=$work/kubectl kubectl=${KUBECTL:-$root/target/testenv/kubectl} have
  [ -x "$kubectl" ] || { say "$tag is made from $kubectl, which is missing: make node-binaries"; exit 1; }
  have=$("$kubectl" version --client -o json | sed -n 's/^ *"gitVersion": "\(.*\)",$/\1/p')
  [ "$have" = "${tag##*:}" ] \
    || { say "$tag needs kubectl ${tag##*:}; $kubectl is $have"; exit 1; }
  rm -rf "$context" && mkdir -p "$context"
  cp "$kubectl" "$context/kubectl"
  from_dockerfile "$tag" kubectl.Dockerfile "kubectl $have built from k8s.io/kubernetes on distroless cc" "$context"
  rm -rf "$context"
}

postgres() {
  local tag=$1 context=$work/postgres
  rm -rf "$context" && mkdir -p "$context"
  from_dockerfile "$tag" postgres.Dockerfile "Debian bookworm's PostgreSQL 15 (not 17)" "$context" \
    postgres-entrypoint.sh
  rm -rf "$context"
}

mariadb() {
  local tag=$1 context=$work/mariadb
  rm -rf "$context" && mkdir -p "$context"
  from_dockerfile "$tag" mariadb.Dockerfile "Debian bookworm's MariaDB 10.11 (not 11.8)" "$context" \
    mariadb-entrypoint.sh mariadb-healthcheck.sh
  rm -rf "$context"
}

except=
case ${1:-} in
  "") ;;
  --list)
    for tag in "${bases[@]}"; do printf '%-42s %s\n' "$tag" "$(state "$tag")"; done
    exit 0 ;;
  --except-kubectl) except=registry.k8s.io/kubectl ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2 ;;
esac

"$docker" info >/dev/null 2>&1 \
  || { say "no Docker engine answers; start one: deploy/images/engine.sh start"; exit 1; }

# Two runs at once would both build what is missing, into the same scratch
# directories: the second waits (lock.sh), then finds the images the first
# made.
take_lock 9 "$work/.lock" "stand-ins"

for tag in "${bases[@]}"; do
  if [ -n "$except" ] && [ "${tag%%:*}" = "$except" ]; then
    say "$tag: left for later ($1)"
    continue
  fi
  if present "$tag"; then
    say "$tag: present ($(state "$tag"))"
    continue
  fi
  start=$(date +%s)
  say "$tag: building a local stand-in (no registry here)..."
  case $tag in
    debian:*) debian_slim "$tag" ;;
    rust:*) rust_slim "$tag" ;;
    python:*) python_slim "$tag" ;;
    gcr.io/distroless/cc-*) distroless_cc "$tag" ;;
    golang:*) golang "$tag" ;;
    registry.k8s.io/kubectl:*) kubectl_image "$tag" ;;
    postgres:*) postgres "$tag" ;;
    mariadb:*) mariadb "$tag" ;;
    *) say "no recipe for a stand-in of $tag"; exit 1 ;;
  esac
  say "$tag: stand-in built in $(( $(date +%s) - start ))s"
done
