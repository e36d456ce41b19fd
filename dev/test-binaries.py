#!/usr/bin/env python3
"""Runs the workspace's test binaries, several at once.

    dev/test-binaries.py [--jobs N] [--group all|shared|alone] [--only PKG/TARGET]... [--list]
                         [-- TEST ARGS...]

`cargo test` runs one test binary after another. Most of kplug's binaries
spend their time waiting: on their own kube-apiserver (each binary starts one,
shared by its tests), on plugin processes, on heartbeats and TTLs. So this
builds them with `cargo test --no-run` (the same build, the same profile) and
runs up to N of them at once (default 2), each as `cargo test` would: in its
package's directory, with the same `CARGO_*` variables, and TEST ARGS (for
example `--nocapture`) passed on.

Binaries that use something the whole machine has one of run one at a time
(ALONE below): the real node (one network bridge and iptables chain per
machine), Docker Compose's project and published ports. They run beside the
others, not after them: a node test spends its minutes waiting on the
kubelet and its pods, and what the others run (API servers, operators and
plugins on loopback) touches nothing of a node's or the engine's state and
sends nothing off the machine, which the node tests' leak and egress checks
would see. The suites that bound the time things take run last, with
nothing beside them (QUIET: the chaos run). A binary's output is printed
whole when it ends, so lines of two binaries never interleave; a line says
when each starts. The exit status is non-zero if any binary failed, and the
end lists each one and its result, with the failed ones' names.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

# package/target of the binaries that run one at a time, beside the rest,
# and why (the QUIET ones after everything else, with nothing beside them).
ALONE = {
    # One node per machine (the cni0 bridge, an iptables chain, containerd's
    # /run/containerd/s), and both take minutes of image unpacking.
    "kplug-deploy-tests/node": "a real node",
    "kplug-deploy-tests/node_server": "a real node",
    "kplug-testenv/node": "a real node",
    # compose.yaml's project name and published ports, and Docker itself.
    "kplug-deploy-tests/compose_up": "docker compose up",
    "kplug-deploy-tests/images": "the Docker engine",
    # Convergence under plugin and leader kills, API server restarts: it
    # bounds the time each takes.
    "kplug-operator/chaos": "chaos, time-bound",
}
QUIET = {"kplug-operator/chaos"}
# Shared binaries that reach the network: never beside the node tests, whose
# egress check counts every packet that leaves the machine. They run before
# the one-at-a-time lane starts (`make test` runs them in its phase 2).
NETWORK = {
    # pip installs the Python image's requirements from PyPI.
    "kplug-deploy-tests/dockerfiles",
}


# Seconds each of the longest binaries took in one CI run (2 cores, 27 Nov
# 2026), only to start the longest first: with two at a time, a long one
# started last would run on alone at the end.
EXPECTED_SECONDS = {
    "kplug-operator/delegation": 90,
    "kplug-deploy-tests/dockerfiles": 52,
    "kplug-conformance/broken": 41,
    "kplug-operator/bad_input": 39,
    "kplug-operator/api_server_restart": 29,
    "kplug-operator/database_table": 22,
    "kubectl-kplug/kubectl_kplug": 21,
    "kplug-deploy-tests/rbac": 19,
    "kplug-testenv/kube_testenv": 15,
    "kplug-operator/high_availability": 15,
    "kplug-exec/exec": 15,
    "kplug-operator/admission": 13,
}


@dataclass
class Binary:
    """A test binary, as `cargo test --no-run` built it."""

    package: str
    target: str
    kind: str
    executable: str
    manifest_dir: str
    version: str
    result: str = "not run"
    seconds: float = 0.0
    summary: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.package}/{self.target}"

    @property
    def label(self) -> str:
        return f"{self.package} {self.kind} {self.target}"


def build(cargo: str, cargo_args: list[str]) -> list[Binary]:
    """`cargo test --no-run`, its progress on stderr; the test executables."""
    cmd = [cargo, "test", *cargo_args, "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"[tests] {' '.join(cmd)} failed (exit {proc.returncode})")
    binaries = []
    for line in proc.stdout.splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact":
            continue
        target = message["target"]
        manifest = Path(message["manifest_path"])
        package = message["package_id"]
        # "path+file:///dir#name@0.1.0" or "...#0.1.0" (name = dir's name)
        version = package.rsplit("@", 1)[-1].rsplit("#", 1)[-1]
        if message.get("profile", {}).get("test") and message.get("executable"):
            binaries.append(
                Binary(
                    package=package_name(manifest),
                    target=target["name"],
                    kind=target["kind"][0],
                    executable=message["executable"],
                    manifest_dir=str(manifest.parent),
                    version=version,
                )
            )
    return binaries


def package_name(manifest: Path) -> str:
    """The `name` of a Cargo.toml's [package]."""
    in_package = False
    for line in manifest.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            in_package = stripped == "[package]"
        elif in_package and stripped.startswith("name"):
            return stripped.split("=", 1)[1].strip().strip('"')
    sys.exit(f"[tests] {manifest} has no package name")


print_lock = threading.Lock()


def run(binary: Binary, test_args: list[str]) -> None:
    """Runs one binary as `cargo test` would, then prints its whole output."""
    env = dict(os.environ)
    major, minor, patch = (binary.version.split("-")[0].split(".") + ["0", "0"])[:3]
    env.update(
        CARGO_MANIFEST_DIR=binary.manifest_dir,
        CARGO_PKG_NAME=binary.package,
        CARGO_PKG_VERSION=binary.version,
        CARGO_PKG_VERSION_MAJOR=major,
        CARGO_PKG_VERSION_MINOR=minor,
        CARGO_PKG_VERSION_PATCH=patch,
        CARGO_CRATE_NAME=binary.target.replace("-", "_"),
    )
    with print_lock:
        print(f"[tests] {binary.name}: started", flush=True)
    start = time.monotonic()
    proc = subprocess.run(
        [binary.executable, *test_args],
        cwd=binary.manifest_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )
    binary.seconds = time.monotonic() - start
    output = proc.stdout.decode(errors="replace")
    binary.summary = [line for line in output.splitlines() if line.startswith("test result:")]
    binary.result = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode})"
    with print_lock:
        print(f"\n     Running {binary.label} ({binary.executable})", flush=True)
        sys.stdout.write(output)
        print(f"[tests] {binary.name}: {binary.result} in {binary.seconds:.0f}s", flush=True)


def run_each(binaries: list[Binary], test_args: list[str]) -> None:
    """Runs the binaries one after another."""
    for binary in binaries:
        run(binary, test_args)


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Build the workspace's test binaries and run several at once.",
        epilog="Arguments after -- go to every test binary (e.g. --nocapture).",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("KPLUG_TEST_JOBS", "2")),
        help="binaries at once (default 2, or KPLUG_TEST_JOBS)",
    )
    parser.add_argument(
        "--group",
        choices=["all", "shared", "alone", "beside", "quiet", "network"],
        default="all",
        help="all (the default): the network ones, then the alone ones one at a time beside the "
        "shared ones, then the quiet ones; shared or alone: only those (shared: the network ones "
        "first; alone: the quiet ones last); beside: all but the network and quiet ones; quiet, "
        "network: only those",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="PACKAGE/TARGET",
        help="run only this binary (repeatable), e.g. kplug-sidecar/polyglot; the build is the "
        "same, so it rebuilds nothing that a run of every binary built",
    )
    parser.add_argument(
        "--list", action="store_true", help="build, list the binaries and their group, run none"
    )
    parser.add_argument(
        "--cargo-args",
        default="--workspace --all-targets",
        help="what to build (default: --workspace --all-targets)",
    )
    parser.add_argument("test_args", nargs="*", help="arguments for every test binary")
    args = parser.parse_args()

    binaries = build(os.environ.get("CARGO", "cargo"), args.cargo_args.split())
    unknown = (set(ALONE) | NETWORK) - {b.name for b in binaries}
    if unknown:
        sys.exit(f"[tests] ALONE or NETWORK names binaries that were not built: {sorted(unknown)}")
    if args.only:
        missing = set(args.only) - {b.name for b in binaries}
        if missing:
            sys.exit(f"[tests] --only names binaries that were not built: {sorted(missing)}")
        binaries = [b for b in binaries if b.name in args.only]
    binaries.sort(key=lambda b: -EXPECTED_SECONDS.get(b.name, 0))
    groups = {
        "all": ("network", "shared", "beside", "quiet"),
        "shared": ("network", "shared"),
        "alone": ("beside", "quiet"),
        "beside": ("shared", "beside"),
        "quiet": ("quiet",),
        "network": ("network",),
    }[args.group]
    network = [b for b in binaries if b.name in NETWORK and "network" in groups]
    shared = [b for b in binaries if b.name not in ALONE.keys() | NETWORK and "shared" in groups]
    beside = [b for b in binaries if b.name in ALONE and b.name not in QUIET and "beside" in groups]
    quiet = [b for b in binaries if b.name in QUIET and "quiet" in groups]
    alone = beside + quiet
    binaries = network + shared + alone
    if args.list:
        for b in network:
            print(f"{b.name:50} first, {args.jobs} at once (it reaches the network)")
        for b in shared:
            print(f"{b.name:50} {args.jobs} at once")
        for b in beside:
            print(f"{b.name:50} one at a time, beside those ({ALONE[b.name]})")
        for b in quiet:
            print(f"{b.name:50} last, alone ({ALONE[b.name]})")
        return 0

    print(
        f"[tests] {len(network)} test binaries that reach the network, then {len(shared)}, "
        f"{args.jobs} at once, beside {len(beside)} one at a time; then {len(quiet)} alone",
        flush=True,
    )
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda b: run(b, args.test_args), network))
    with (
        ThreadPoolExecutor(max_workers=1) as lane,
        ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool,
    ):
        one_at_a_time = lane.submit(run_each, beside, args.test_args)
        list(pool.map(lambda b: run(b, args.test_args), shared))
        one_at_a_time.result()
    for b in quiet:
        run(b, args.test_args)
    wall = time.monotonic() - start

    failed = [b for b in binaries if b.result != "ok"]
    print(
        f"\n[tests] {len(binaries)} binaries in {wall:.0f}s ({sum(b.seconds for b in binaries):.0f}s one after another):"
    )
    for b in sorted(binaries, key=lambda b: -b.seconds):
        counts = "; ".join(s.removeprefix("test result: ") for s in b.summary)
        print(f"  {b.seconds:6.0f}s  {b.name:45} {b.result}  {counts}")
    if failed:
        print(f"[tests] failed: {', '.join(b.name for b in failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
