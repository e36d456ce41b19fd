"""What a plugin is and serves: its name, version, offers, hooks and call policies."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from kplug._proto import types_pb2
from kplug.errors import StartupError
from kplug.hooks import Behaviour, Call, CallPolicy, FailurePolicy, Hook, Phase
from kplug.protocol import (
    MAX_CALL_POLICIES,
    MAX_CHILD_KINDS_PER_OFFER,
    MAX_HOOKS,
    MAX_MUTATIONS,
    MAX_NAME_LENGTH,
    PROTOCOL,
    is_dns_label,
    validate_name,
)

__all__ = [
    "PROTOCOL",
    "ChildKind",
    "GroupKind",
    "MutationKind",
    "Offer",
    "PluginInfo",
    "validate_name",
]


@dataclass(frozen=True)
class GroupKind:
    """A Kubernetes kind independently of its version, e.g. ``GroupKind("myorg.org", "Table")``.

    ``group`` is empty for the core group.
    """

    group: str
    kind: str

    def to_proto(self) -> types_pb2.GroupKind:
        return types_pb2.GroupKind(group=self.group, kind=self.kind)


@dataclass(frozen=True)
class _VersionedKind:
    """A kind by ``apiVersion`` and kind, as the objects themselves say it."""

    api_version: str
    kind: str

    @property
    def group(self) -> str:
        """The API group, e.g. ``"apps"``; empty for the core group (``"v1"``)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """The version, e.g. ``"v1"``."""
        return self.api_version.rpartition("/")[2]

    def to_proto(self) -> types_pb2.GroupVersionKind:
        return types_pb2.GroupVersionKind(group=self.group, version=self.version, kind=self.kind)


@dataclass(frozen=True)
class ChildKind(_VersionedKind):
    """A kind of Kubernetes object a plugin manages for each base object (its children), by
    ``apiVersion`` and kind, as the objects themselves say it: ``ChildKind("apps/v1",
    "Deployment")``, ``ChildKind("v1", "ConfigMap")``.

    The operator sends and reads the children in this version.
    """


@dataclass(frozen=True)
class MutationKind(_VersionedKind):
    """A kind of object the plugin patches before the operator applies it
    (:meth:`kplug.Plugin.mutate`), by ``apiVersion`` and kind: ``MutationKind("apps/v1",
    "Deployment")``.

    The operator sends objects of this kind in this version, and only when its admin allows
    this plugin for the kind (``--mutators <plugin>=apps/v1/Deployment``).
    """

    def to_mutation_proto(self) -> types_pb2.Mutation:
        return types_pb2.Mutation(kind=self.to_proto())


@dataclass
class Offer:
    """One implementation the plugin provides for one base kind.

    ``implementation`` is the name users put in ``spec.preferredImplementation``
    (e.g. ``"PostgreSQL"``); ``extensions`` are the extension kinds the plugin
    understands for this base: only extensions of these kinds are sent to it.

    ``children`` are the kinds of the Kubernetes objects the implementation manages for each
    base object: its answers carry the desired ones (:meth:`kplug.Response.child`), its
    requests the observed ones (:attr:`kplug.Request.children`), and the operator applies,
    owns, watches and prunes them (only the kinds its ``--child-kinds`` allows). Declaring one
    makes the plugin advertise the CHILDREN capability::

        kplug.Offer(
            kplug.GroupKind("myorg.org", "DatabaseServer"),
            "PostgreSQL",
            children=[kplug.ChildKind("apps/v1", "Deployment"), kplug.ChildKind("v1", "Service")],
        )
    """

    base: GroupKind
    implementation: str
    extensions: list[GroupKind] = field(default_factory=list)
    children: list[ChildKind] = field(default_factory=list)

    def to_proto(self) -> types_pb2.Offer:
        return types_pb2.Offer(
            base=self.base.to_proto(),
            implementation=self.implementation,
            extensions=[e.to_proto() for e in self.extensions],
            children=[c.to_proto() for c in self.children],
        )


@dataclass
class PluginInfo:
    """Describes a plugin; sent in every heartbeat and answered by GetInfo, hooks and call
    policies included, so the two always agree.

    ``finalize`` decides whether the plugin advertises the FINALIZE capability
    (the operator then adds a finalizer and calls ``Plugin.finalize`` before
    deletion). Left at ``None``, it is advertised when the plugin class
    overrides ``finalize``. (VALIDATE, DEFAULT, HOOKS and MUTATE are advertised exactly when the
    plugin class overrides ``validate``, ``default``, ``hook`` and ``mutate``; CHILDREN exactly
    when an offer declares child kinds, :attr:`Offer.children`.)

    ``hooks`` are the hooks the plugin declares (the plugin must override ``Plugin.hook``);
    ``call_policies`` ask for a deadline, and for admission a failure policy, per call (one per
    call); ``mutations`` are the kinds the plugin patches (the plugin must override
    ``Plugin.mutate``, and one that does must declare at least one). All are checked when the
    plugin starts, as the operator checks them.
    """

    name: str
    version: str
    offers: list[Offer] = field(default_factory=list)
    description: str = ""
    finalize: bool | None = None
    hooks: list[Hook] = field(default_factory=list)
    call_policies: list[CallPolicy] = field(default_factory=list)
    mutations: list[MutationKind] = field(default_factory=list)

    def hooks_proto(self) -> list[types_pb2.Hook]:
        """The hooks as GetInfo and heartbeats carry them."""
        return [hook.to_proto() for hook in self.hooks]

    def call_policies_proto(self) -> list[types_pb2.CallPolicy]:
        """The call policies as GetInfo and heartbeats carry them."""
        return [policy.to_proto() for policy in self.call_policies]

    def mutations_proto(self) -> list[types_pb2.Mutation]:
        """The mutated kinds as GetInfo and heartbeats carry them."""
        return [kind.to_mutation_proto() for kind in self.mutations]

    def validate(self) -> None:
        """Raise :class:`StartupError` if the operator would refuse this plugin."""
        validate_name(self.name)
        if not self.version:
            raise StartupError(
                f"plugin {self.name!r}: version is empty; set a version, e.g. '1.0.0'"
            )
        if not self.offers and not self.hooks and not self.mutations:
            raise StartupError(
                f"plugin {self.name!r} offers nothing: add at least one "
                "Offer(base=GroupKind(group, kind), implementation=...) to PluginInfo.offers "
                "(or declare hooks or mutations)"
            )
        for offer in self.offers:
            if not offer.base.kind or not offer.implementation:
                raise StartupError(
                    f"plugin {self.name!r}: every offer needs a base kind and an implementation "
                    f"name, got {offer!r}"
                )
            self._validate_children(offer)
        self._validate_hooks()
        self._validate_call_policies()
        self._validate_mutations()

    def _check_at_most(self, declared: int, what: str, limit: int) -> None:
        """Refuse to start with more than ``limit`` of ``what`` (the operator's own limit)."""
        if declared > limit:
            raise StartupError(
                f"plugin {self.name} cannot start: {declared} {what} are declared; at most "
                f"{limit} are accepted"
            )

    def _validate_children(self, offer: Offer) -> None:
        # Checked here, as the operator checks them, so that a mistake stops the plugin with a
        # message instead of every heartbeat being refused (or a kind never being applied).
        self._check_at_most(
            len(offer.children),
            f"child kinds in offer {offer.implementation!r}",
            MAX_CHILD_KINDS_PER_OFFER,
        )
        for child in offer.children:
            if not isinstance(child, ChildKind):
                problem = (
                    f"{child!r} is not a kplug.ChildKind; use ChildKind(api_version, kind), e.g. "
                    'ChildKind("apps/v1", "Deployment")'
                )
            elif not child.kind or not _is_api_version(child.api_version):
                problem = f'{child!r} needs an apiVersion ("v1" or "<group>/<version>") and a kind'
            else:
                continue
            raise StartupError(
                f"plugin {self.name} cannot start: offer {offer.implementation!r}: child kind "
                f"{problem}"
            )

    def _validate_hooks(self) -> None:
        self._check_at_most(len(self.hooks), "hooks", MAX_HOOKS)
        seen: set[str] = set()
        for hook in self.hooks:
            name = getattr(hook, "name", hook)
            if not isinstance(name, str) or not is_dns_label(name):
                problem = (
                    "its name must be a DNS label: lowercase letters, digits and '-', starting "
                    f"and ending with a letter or digit, at most {MAX_NAME_LENGTH} characters"
                )
            elif name in seen:
                problem = "it is declared twice; hook names are unique within a plugin"
            elif not isinstance(hook.base, GroupKind) or not hook.base.kind:
                problem = "it names no base kind; use base=GroupKind(group, kind)"
            elif not isinstance(hook.phase, Phase):
                problem = f"its phase must be a kplug.Phase, got {hook.phase!r}"
            elif not isinstance(hook.behaviour, Behaviour):
                problem = f"its behaviour must be a kplug.Behaviour, got {hook.behaviour!r}"
            elif not isinstance(hook.order, int) or not -(2**31) <= hook.order < 2**31:
                problem = f"its order must be a 32-bit integer, got {hook.order!r}"
            else:
                seen.add(name)
                continue
            raise StartupError(
                f"plugin {self.name} cannot start: hook {json.dumps(str(name))}: {problem}"
            )

    def _validate_call_policies(self) -> None:
        self._check_at_most(len(self.call_policies), "call policies", MAX_CALL_POLICIES)
        seen: set[Call] = set()
        for policy in self.call_policies:
            call = policy.call
            deadline = policy.deadline_seconds
            if not isinstance(call, Call):
                problem = f"the call must be a kplug.Call, got {call!r}"
            elif call in seen:
                problem = "declared twice; one policy per call"
            elif deadline is not None and (
                isinstance(deadline, bool)
                or not isinstance(deadline, int | float)
                or not math.isfinite(deadline)
                or deadline <= 0
            ):
                problem = (
                    f"the deadline must be a positive number of seconds, got {deadline!r} (leave "
                    "it None for the operator's default)"
                )
            elif policy.failure_policy is not None and not isinstance(
                policy.failure_policy, FailurePolicy
            ):
                problem = (
                    f"the failure policy must be a kplug.FailurePolicy or None, got "
                    f"{policy.failure_policy!r}"
                )
            else:
                seen.add(call)
                continue
            what = call.name if isinstance(call, Call) else repr(call)
            raise StartupError(
                f"plugin {self.name} cannot start: call policy for {what}: {problem}"
            )

    def _validate_mutations(self) -> None:
        # The operator refuses every heartbeat of a plugin with a mutation it cannot read; this
        # says so once, at start-up, naming the entry.
        self._check_at_most(len(self.mutations), "mutations", MAX_MUTATIONS)
        for kind in self.mutations:
            if not isinstance(kind, MutationKind):
                problem = (
                    f"{kind!r} is not a kplug.MutationKind; use MutationKind(api_version, kind), "
                    'e.g. MutationKind("apps/v1", "Deployment")'
                )
            elif not kind.kind or not _is_api_version(kind.api_version):
                problem = f'{kind!r} needs an apiVersion ("v1" or "<group>/<version>") and a kind'
            else:
                continue
            raise StartupError(f"plugin {self.name} cannot start: mutation {problem}")


def _is_api_version(api_version: str) -> bool:
    """Whether ``api_version`` is ``<version>`` or ``<group>/<version>``, neither part empty."""
    parts = api_version.split("/")
    return len(parts) <= 2 and all(parts)
