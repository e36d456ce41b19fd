"""What a plugin is and serves: its name, version and offers."""

from __future__ import annotations

from dataclasses import dataclass, field

from kplug._proto import types_pb2
from kplug.errors import StartupError
from kplug.protocol import PROTOCOL, validate_name

__all__ = ["PROTOCOL", "GroupKind", "Offer", "PluginInfo", "validate_name"]


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
