"""What a plugin is and serves: its name, version and offers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kplug._proto import types_pb2
from kplug.errors import InvalidNameError, StartupError

PROTOCOL = "kplug.v1"
"""The protocol this SDK speaks, sent in heartbeats and GetInfo."""

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_NAME_LENGTH = 63


@dataclass(frozen=True)
class GroupKind:
    """A Kubernetes kind independently of its version, e.g. ``GroupKind("myorg.org", "Table")``.

    ``group`` is empty for the core group.
    """

    group: str
    kind: str

    def to_proto(self) -> types_pb2.GroupKind:
        return types_pb2.GroupKind(group=self.group, kind=self.kind)


@dataclass
class Offer:
    """One implementation the plugin provides for one base kind.

    ``implementation`` is the name users put in ``spec.preferredImplementation``
    (e.g. ``"PostgreSQL"``); ``extensions`` are the extension kinds the plugin
    understands for this base: only extensions of these kinds are sent to it.
    """

    base: GroupKind
    implementation: str
    extensions: list[GroupKind] = field(default_factory=list)

    def to_proto(self) -> types_pb2.Offer:
        return types_pb2.Offer(
            base=self.base.to_proto(),
            implementation=self.implementation,
            extensions=[e.to_proto() for e in self.extensions],
        )


@dataclass
class PluginInfo:
    """Describes a plugin; sent in every heartbeat and answered by GetInfo.

    ``finalize`` decides whether the plugin advertises the FINALIZE capability
    (the operator then adds a finalizer and calls ``Plugin.finalize`` before
    deletion). Left at ``None``, it is advertised when the plugin class
    overrides ``finalize``.
    """

    name: str
    version: str
    offers: list[Offer] = field(default_factory=list)
    description: str = ""
    finalize: bool | None = None

    def validate(self) -> None:
        """Raise :class:`StartupError` if the operator would refuse this plugin."""
        validate_name(self.name)
        if not self.version:
            raise StartupError(
                f"plugin {self.name!r}: version is empty; set a version, e.g. '1.0.0'"
            )
        if not self.offers:
            raise StartupError(
                f"plugin {self.name!r} offers nothing: add at least one "
                "Offer(base=GroupKind(group, kind), implementation=...) to PluginInfo.offers"
            )
        for offer in self.offers:
            if not offer.base.kind or not offer.implementation:
                raise StartupError(
                    f"plugin {self.name!r}: every offer needs a base kind and an implementation "
                    f"name, got {offer!r}"
                )


def validate_name(name: str) -> None:
    """Raise :class:`InvalidNameError` unless ``name`` is a DNS label (as the operator demands)."""
    if len(name) > _MAX_NAME_LENGTH or not _DNS_LABEL.fullmatch(name):
        raise InvalidNameError(
            f"invalid plugin name {name!r}: it must be a DNS label (lowercase letters, digits "
            f"and '-', starting and ending with a letter or digit, at most {_MAX_NAME_LENGTH} "
            "characters), e.g. 'postgresql'"
        )
