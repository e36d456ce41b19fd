"""The protocol's rules, as every kplug SDK and the operator apply them.

Their source is the Rust crate ``kplug-proto`` (``proto/src/rules.rs``,
``limits.rs`` and ``lib.rs`` in the kplug repository). This module holds the
same values; ``tests/test_rules.py`` checks them, and the functions below,
against ``sidecar-sdk/conformance/rules.json``, which a test of
``kplug-proto`` keeps equal to the Rust code.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Literal

from kplug.errors import InvalidNameError

PROTOCOL = "kplug.v1"
"""The protocol this SDK speaks, sent in heartbeats and GetInfo."""

SOCKET_DIR_ENV = "KPLUG_SOCKET_DIR"
"""Environment variable naming the socket dir shared with the operator."""

DEFAULT_SOCKET_DIR = "/var/run/kplug"
"""The socket dir when ``$KPLUG_SOCKET_DIR`` is unset or empty."""

REGISTRY_SOCKET = "registry.sock"
"""The operator's socket, relative to the socket dir."""

SocketDirOrigin = Literal["default", "environment", "program"]
"""Where a plugin's socket dir came from, which its messages about it name: ``default``
(``$KPLUG_SOCKET_DIR`` unset or empty), ``environment`` (``$KPLUG_SOCKET_DIR``) or
``program`` (the ``socket_dir`` argument; the variable is not read)."""

HEARTBEAT_INTERVAL_ENV = "KPLUG_HEARTBEAT_INTERVAL"
"""Environment variable holding the heartbeat interval, in seconds."""

DEFAULT_HEARTBEAT_INTERVAL_SECONDS = 5.0
"""The heartbeat interval when ``$KPLUG_HEARTBEAT_INTERVAL`` is unset or empty."""

HEARTBEAT_TIMEOUT_SECONDS = 2.0
"""Deadline of one Heartbeat call."""

UNREGISTER_TIMEOUT_SECONDS = 10.0
"""Deadline of the Unregister call at shutdown."""

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest gRPC message a plugin accepts or sends on its socket (64 MiB):
Kubernetes objects can be large, and gRPC's 4 MiB default would turn a big
object into a transport error."""

MAX_NAME_LENGTH = 63
"""The longest plugin name (a DNS label)."""

RESERVED_STATUS_KEYS = frozenset({"implementation", "plugin", "observedGeneration", "conditions"})
"""Status keys the operator owns; a plugin status that sets one is refused."""

RESERVED_CONDITION_TYPES = frozenset(
    {"Ready", "PluginAvailable", "ExtensionsResolved", "Reconciled"}
)
"""Condition types the operator owns; a plugin condition of one of them is refused."""

MAX_MESSAGE_CHARS = 1024
"""The longest message the operator keeps (a field error's message and value are cut to it)."""

MAX_HOOKS = 16
"""The most hooks a plugin may declare."""

MAX_CALL_POLICIES = 16
"""The most call policies a plugin may declare."""

MAX_CHILD_KINDS_PER_OFFER = 16
"""The most child kinds one offer may declare."""

MAX_FIELD_ERRORS = 64
"""The most field errors in one Validate answer; past it, the last says how many more there were."""

MAX_WARNINGS = 16
"""The most warnings in one Validate, Default or Mutate answer; past it, the last says how many
more there were."""

MAX_WARNING_CHARS = 256
"""The longest warning; a longer one is cut, ending with an ellipsis."""

MAX_PATCH_BYTES = 256 * 1024
"""The largest JSON Patch a Default or Mutate answer may carry."""

DEFAULT_PATCH_PREFIXES = ("/spec", "/metadata/labels", "/metadata/annotations")
"""The paths a Default patch may change (each, or anything below it)."""

MAX_MUTATIONS = 16
"""The most kinds a plugin may declare it mutates (``kplug_proto::limits::MAX_MUTATIONS``)."""

KPLUG_KEY_PREFIXES = ("/metadata/labels/kplug.io~1", "/metadata/annotations/kplug.io~1")
"""The kplug.io/ labels and annotations (``~1`` is ``/`` in a JSON Pointer): the operator's own,
which a mutation may not touch."""

BACKOFF_INITIAL_SECONDS = 0.1
"""The first wait after a failed heartbeat."""

BACKOFF_FACTOR = 2
"""Each further failure in a row multiplies the wait by this, up to the cap."""

BACKOFF_JITTER = 0.1
"""A wait is shortened at random by up to this fraction, never lengthened."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# Rust's number grammar without its words (inf, nan): what every SDK reads alike.
_DECIMAL = re.compile(r"[0-9.eE+-]+")


def validate_name(name: str) -> None:
    """Raise :class:`InvalidNameError` unless ``name`` is a DNS label, as the operator demands:
    lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63
    characters."""
    if len(name) > MAX_NAME_LENGTH or not _DNS_LABEL.fullmatch(name):
        raise InvalidNameError(
            f"invalid plugin name {name!r}: it must be a DNS label (lowercase letters, digits "
            f"and '-', starting and ending with a letter or digit, at most {MAX_NAME_LENGTH} "
            "characters), e.g. 'postgresql'"
        )


def is_dns_label(name: str) -> bool:
    """Whether ``name`` is a DNS label: what plugin and hook names must be."""
    return len(name) <= MAX_NAME_LENGTH and _DNS_LABEL.fullmatch(name) is not None


def default_patch_path_allowed(path: str) -> bool:
    """Whether a Default patch may touch ``path``: one of :data:`DEFAULT_PATCH_PREFIXES`, or a
    path below one of them (``/specification`` is neither)."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in DEFAULT_PATCH_PREFIXES)


def mutation_path_allowed(path: str) -> bool:
    """Whether a Mutate patch may touch ``path``, as the operator judges it: a Default path
    (:func:`default_patch_path_allowed`), but never the whole labels or annotations map (kplug's
    own labels are in it) nor a ``kplug.io/`` key."""
    return (
        default_patch_path_allowed(path)
        and path not in ("/metadata/labels", "/metadata/annotations")
        and not path.startswith(KPLUG_KEY_PREFIXES)
    )


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_heartbeat_interval(text: str | None) -> float | None:
    """The heartbeat interval, in seconds, that ``$KPLUG_HEARTBEAT_INTERVAL`` = ``text`` asks for.

    Unset (``None``) or empty gives the default, 5. Otherwise it must be a plain decimal
    number (``5``, ``0.5``, ``.5``, ``1e1``), finite and positive; anything else (spaces,
    units, ``1_0``, hex, ``inf``, ``nan``) gives ``None``: the caller says what is wrong.
    """
    if not text:
        return DEFAULT_HEARTBEAT_INTERVAL_SECONDS
    if not _DECIMAL.fullmatch(text):
        return None
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def backoff_delay(attempt: int, cap: float, unit: float) -> float:
    """The wait, in seconds, after the ``attempt``-th failed heartbeat in a row (from 1;
    0 counts as 1), for ``unit`` drawn uniformly from [0, 1)::

        base  = min(cap, 0.1 * 2 ** (attempt - 1))
        delay = base * (1 - 0.1 * unit)

    The jitter only shortens the wait, so it never exceeds ``cap``: the heartbeat interval
    in force. ``unit`` outside [0, 1] is clamped.
    """
    exponent = min(max(attempt - 1, 0), 64)
    base = min(cap, BACKOFF_INITIAL_SECONDS * float(BACKOFF_FACTOR) ** exponent)
    unit = 0.0 if math.isnan(unit) else min(max(unit, 0.0), 1.0)
    return base * (1 - BACKOFF_JITTER * unit)


def _origin_said(origin: SocketDirOrigin) -> str:
    if origin == "default":
        return f"{SOCKET_DIR_ENV} is not set; the default is {DEFAULT_SOCKET_DIR}"
    if origin == "environment":
        return f"from {SOCKET_DIR_ENV}"
    return f"set by the program; {SOCKET_DIR_ENV} is not read"


def _origin_fix(origin: SocketDirOrigin) -> str:
    if origin == "program":
        return "have the program use the directory shared with the operator"
    return f"set {SOCKET_DIR_ENV} to the directory shared with the operator"


def registry_waiting_message(socket_dir: str | os.PathLike[str], origin: SocketDirOrigin) -> str:
    """What a plugin logs, once at warning level, while ``registry.sock`` in its socket dir is
    missing or refuses connections: where it looked, where that came from, what to do."""
    return (
        f"no operator registry at {Path(socket_dir) / REGISTRY_SOCKET} yet "
        f"({_origin_said(origin)}): {_origin_fix(origin)}, unless the operator is still "
        "starting; retrying with backoff"
    )


def socket_dir_missing_message(socket_dir: str | os.PathLike[str], origin: SocketDirOrigin) -> str:
    """The start-up error of a plugin whose socket dir does not exist: a plugin never creates it,
    since it is the volume shared with the operator."""
    return (
        f"the socket dir {Path(socket_dir)} does not exist ({_origin_said(origin)}): "
        f"{_origin_fix(origin)} (a plugin does not create the socket dir: it is a volume shared "
        "with the operator)"
    )
