"""Claiming the plugin's socket: stale sockets are removed, live ones and other files never."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import kplug
from kplug.socket import SocketFile, claim

INFO = kplug.PluginInfo(
    name="demo", version="1", offers=[kplug.Offer(kplug.GroupKind("x.org", "Thing"), "Impl")]
)


class Noop(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok()


@pytest.fixture
def sock_path(socket_dir: Path) -> Path:
    return socket_dir / "plugins" / "demo" / "plugin.sock"


def bind(path: Path, *, listen: bool) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.fspath(path))
    if listen:
        sock.listen()
    return sock


@pytest.fixture
def stale(sock_path: Path) -> Path:
    # A socket file nobody listens on: what a SIGKILLed plugin leaves behind.
    bind(sock_path, listen=False).close()
    return sock_path


def test_free_path_creates_the_plugins_dir(sock_path: Path) -> None:
    claim(sock_path, "demo")
    assert sock_path.parent.is_dir()
    assert not sock_path.exists()
    # plugins/ is open to all and sticky; the plugin's own directory is not.
    assert sock_path.parent.parent.stat().st_mode & 0o7777 == 0o1777
    assert sock_path.parent.stat().st_mode & 0o7777 == 0o755


def test_a_directory_of_another_uid_is_refused_with_the_reason(
    sock_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sock_path.parent.mkdir(parents=True)
    # As an unprivileged container would see a directory another UID owns.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(kplug.StartupError, match="Another container holds this plugin's name"):
        claim(sock_path, "demo")


def test_stale_socket_is_removed(stale: Path) -> None:
    claim(stale, "demo")
    assert not stale.exists()


def test_live_socket_is_refused(sock_path: Path) -> None:
    with bind(sock_path, listen=True):
        with pytest.raises(kplug.SocketInUseError, match=f"{sock_path} is served by another"):
            claim(sock_path, "demo")
        assert sock_path.exists()


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_non_socket_is_refused_and_kept(sock_path: Path, kind: str) -> None:
    sock_path.parent.mkdir(parents=True)
    if kind == "file":
        sock_path.write_text("precious")
    elif kind == "directory":
        sock_path.mkdir()
    else:
        sock_path.symlink_to("/etc/hostname")
    with pytest.raises(kplug.NotASocketError, match=f"plugin demo: {sock_path} exists and is not"):
        claim(sock_path, "demo")
    assert sock_path.exists() or sock_path.is_symlink()
    if kind == "file":
        assert sock_path.read_text() == "precious"


def test_too_long_path_is_refused(socket_dir: Path) -> None:
    long_path = socket_dir / ("d" * 120) / "x.sock"
    with pytest.raises(kplug.StartupError, match=r"longer than 107 bytes.*KPLUG_SOCKET_DIR"):
        claim(long_path, "demo")


def test_remove_only_our_own_socket(sock_path: Path) -> None:
    with bind(sock_path, listen=True):  # a successor serves on our old path
        # The kernel often gives the successor's file the inode number ours
        # had, so its identity then matches what we recorded. Whether it does
        # depends on what else the machine is doing: take the successor's
        # identity as ours, which is the case to prove.
        ours = SocketFile.bound_at(sock_path)
        assert not ours.remove()
        assert sock_path.exists()
    assert ours.remove()  # the successor is gone too: the file is stale
    assert not sock_path.exists()
    assert not ours.remove()


@pytest.mark.parametrize(
    "name", ["", "Demo", "-demo", "demo-", "de_mo", "de.mo", "a" * 64, "dé", "demo\n"]
)
def test_invalid_names_are_refused_at_start(name: str, socket_dir: Path) -> None:
    info = kplug.PluginInfo(name=name, version="1", offers=INFO.offers)
    with pytest.raises(kplug.InvalidNameError, match="must be a DNS label"):
        kplug.PluginServer(Noop(), info, socket_dir=socket_dir)


@pytest.mark.parametrize("name", ["a", "0", "postgresql", "my-plugin-2", "a" * 63])
def test_valid_names(name: str, socket_dir: Path) -> None:
    info = kplug.PluginInfo(name=name, version="1", offers=INFO.offers)
    server = kplug.PluginServer(Noop(), info, socket_dir=socket_dir)
    assert server.socket_path == socket_dir / "plugins" / name / "plugin.sock"


async def test_second_instance_does_not_steal_a_live_socket(socket_dir: Path) -> None:
    first = kplug.PluginServer(Noop(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await first.start()
    try:
        second = kplug.PluginServer(Noop(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
        with pytest.raises(kplug.SocketInUseError):
            await second.start()
        assert first.socket_path.exists()
    finally:
        await first.stop(grace=0)
    assert not first.socket_path.exists()


async def test_server_starts_over_a_stale_socket(stale: Path, socket_dir: Path) -> None:
    server = kplug.PluginServer(Noop(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    try:
        assert stale.exists()
        assert kplug.socket.is_live(stale, "demo")
    finally:
        await server.stop(grace=0)
