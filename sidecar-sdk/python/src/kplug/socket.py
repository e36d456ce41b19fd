"""The plugin's socket file: claiming the path safely, and removing only our own.

gRPC itself unlinks any socket file at the address it binds, which would
silently steal the socket of a live instance; so the path is checked here
first, by the protocol's rules:

- nothing there: bind;
- a socket nobody answers on (connect refused): a crashed instance left it;
  remove it and bind;
- a socket something answers on: another live instance; refuse;
- anything else (a file, a directory, a symlink): refuse, never delete it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from kplug.errors import NotASocketError, SocketInUseError, StartupError
from kplug.protocol import SocketDirOrigin, socket_dir_missing_message

# sockaddr_un.sun_path holds 108 bytes on Linux, including the final NUL.
MAX_PATH_BYTES = 107

_CONNECT_TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True)
class SocketFile:
    """The identity of a socket file we bound, to tell it from a successor's."""

    path: Path
    device: int
    inode: int

    @classmethod
    def bound_at(cls, path: Path) -> SocketFile:
        st = os.lstat(path)
        return cls(path, st.st_dev, st.st_ino)

    def remove(self) -> bool:
        """Remove the file if it is still the one we bound (call it once our server is
        stopped); True if removed."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False  # gRPC removes it on shutdown already
        if (st.st_dev, st.st_ino) != (self.device, self.inode):
            return False  # a newer instance bound the path since: not ours
        # Inode numbers are reused at once, so the same number does not prove
        # it is still our file: a live server on it is a successor's.
        if is_live(self.path, ""):
            return False
        self.path.unlink(missing_ok=True)
        return True


def plugin_socket(socket_dir: Path, name: str) -> Path:
    """``<socket dir>/plugins/<name>/plugin.sock``: a directory per plugin, so that in
    Kubernetes it can be a volume only that plugin's container may write."""
    return socket_dir / "plugins" / name / "plugin.sock"


def remove_plugin_dir(path: Path) -> bool:
    """Remove the plugin's own directory, ``<socket dir>/plugins/<name>/``, the parent of its
    socket ``path``, once the socket is gone, if that left it empty; True if removed. One that
    holds anything (a newer instance's socket, a file) stays, and so does one that cannot be
    removed (a volume mounted there, in Kubernetes)."""
    if os.path.lexists(path):
        return False  # not ours to remove, or not removed: the directory stays with it
    try:
        path.parent.rmdir()  # only an empty directory, atomically: nothing in it is ever lost
    except OSError:
        return False
    return True


def _make_dir(path: Path, mode: int, plugin: str) -> None:
    """Create ``path`` (its parent exists) with ``mode`` if it is missing."""
    try:
        path.mkdir()
    except FileExistsError:
        return
    except OSError as e:
        raise StartupError(
            f"plugin {plugin}: cannot create the socket directory {path}: {e}; check "
            "KPLUG_SOCKET_DIR and that the shared volume is mounted and writable"
        ) from e
    # Only its owner can change its mode, and that is us.
    with contextlib.suppress(OSError):
        os.chmod(path, mode)


def claim(path: Path, plugin: str, origin: SocketDirOrigin = "program") -> None:
    """Make ``path`` free to bind for ``plugin``, or raise :class:`StartupError` saying why not.

    The socket dir (``path``'s grandparent's parent) must exist: it is the volume shared with the
    operator, so a missing one is a wrong setting, reported with where it came from
    (``origin``), and never created.
    """
    if len(os.fsencode(path)) > MAX_PATH_BYTES:
        raise StartupError(
            f"plugin {plugin}: socket path {path} is longer than {MAX_PATH_BYTES} bytes, the "
            "limit of Unix sockets; set KPLUG_SOCKET_DIR to a shorter directory"
        )
    # plugins/ is open to all and sticky (like /tmp): plugins of one pod run
    # as different UIDs, each adds its own directory and can remove only its
    # own. The plugin's directory is writable by this UID only. In
    # Kubernetes both exist already (the plugin's is a volume of its own).
    socket_dir = path.parent.parent.parent
    if not socket_dir.exists():
        raise StartupError(f"plugin {plugin}: {socket_dir_missing_message(socket_dir, origin)}")
    _make_dir(path.parent.parent, 0o1777, plugin)
    _make_dir(path.parent, 0o755, plugin)
    if not os.access(path.parent, os.W_OK | os.X_OK):
        owner = path.parent.stat().st_uid
        raise StartupError(
            f"plugin {plugin}: cannot create a socket in {path.parent}: it belongs to UID "
            f"{owner} and this process (UID {os.geteuid()}) may not write to it. Another "
            "container holds this plugin's name: give each plugin a volume of its own at "
            f"{path.parent} (see docs/security.md)"
        )
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise NotASocketError(
            f"plugin {plugin}: {path} exists and is not a socket; refusing to delete it. "
            "Remove it by hand if it is not needed, or pick another plugin name"
        )
    if is_live(path, plugin):
        raise SocketInUseError(
            f"plugin {plugin}: {path} is served by another live process; refusing to take it "
            "over. Stop the other instance, or give this plugin another name"
        )
    path.unlink(missing_ok=True)  # stale: left behind by a crashed instance


def is_live(path: Path, plugin: str) -> bool:
    """Whether something accepts connections on the socket at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(_CONNECT_TIMEOUT_SECONDS)
        try:
            probe.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except TimeoutError:
            return True  # a full backlog: alive, just busy
        except OSError as e:
            if e.errno == errno.EAGAIN:
                return True  # same as a timeout on a non-blocking connect
            raise StartupError(
                f"plugin {plugin}: cannot tell whether {path} is in use: {e}; "
                "check the permissions of the socket directory"
            ) from e
        return True
