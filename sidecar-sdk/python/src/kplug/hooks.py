"""Hooks and call policies: what a plugin declares in :class:`kplug.PluginInfo` beyond its
offers, the call a hook gets and the answer it gives.

A hook runs at one phase of the lifecycle of every object of one base kind, whichever
implementation reconciles it (a plugin may hook into a kind it does not offer)::

    info = kplug.PluginInfo(
        name="backup",
        version="1.0.0",
        hooks=[
            kplug.Hook(
                "snapshot",
                kplug.GroupKind("myorg.org", "DatabaseTable"),
                kplug.Phase.BEFORE_FINALIZE,
                kplug.Behaviour.SYNC_ENFORCE,
            )
        ],
        call_policies=[kplug.CallPolicy(kplug.Call.HOOK, deadline_seconds=120)],
    )

    class Backup(kplug.Plugin):
        async def hook(self, call: kplug.HookCall) -> kplug.HookResponse:
            await snapshot(call.request.name)
            return kplug.HookResponse.ok("snapshot taken", status={"lastSnapshot": now()})
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from kplug._proto import plugin_pb2, types_pb2
from kplug.request import JsonObject, ObjectRef, Request
from kplug.response import (
    DEFAULT_RETRY_AFTER_SECONDS,
    Event,
    Outcome,
    check_retry_delay,
    encode_json,
    events_proto,
    regarding_ref,
    seconds_to_duration,
    set_retry_after,
)

if TYPE_CHECKING:
    from kplug.info import GroupKind


class Phase(enum.Enum):
    """Where in an object's lifecycle a hook runs."""

    BEFORE_RECONCILE = types_pb2.HOOK_PHASE_BEFORE_RECONCILE
    """Before the implementation's Reconcile."""
    AFTER_RECONCILE = types_pb2.HOOK_PHASE_AFTER_RECONCILE
    """After the implementation's Reconcile answered (whatever its outcome)."""
    BEFORE_FINALIZE = types_pb2.HOOK_PHASE_BEFORE_FINALIZE
    """Before the implementation's Finalize."""
    AFTER_FINALIZE = types_pb2.HOOK_PHASE_AFTER_FINALIZE
    """After the implementation's Finalize answered."""


class Behaviour(enum.Enum):
    """How a hook's result affects the step it surrounds."""

    SYNC_ENFORCE = types_pb2.HOOK_BEHAVIOUR_SYNC_ENFORCE
    """The operator waits; anything but OK stops the step, and a condition names the hook."""
    SYNC_BYPASS = types_pb2.HOOK_BEHAVIOUR_SYNC_BYPASS
    """The operator waits; a failure becomes a Warning Event, and the step goes on."""
    ASYNC = types_pb2.HOOK_BEHAVIOUR_ASYNC
    """Queued, never waited for; a failure becomes a Warning Event."""


@dataclass(frozen=True)
class Hook:
    """A hook the plugin declares: the operator calls :meth:`kplug.Plugin.hook` at ``phase``
    for every object of the ``base`` kind. ``name`` is a DNS label, unique within the plugin;
    hooks of one phase and kind run by increasing ``order``, then plugin name, then hook name.
    """

    name: str
    base: GroupKind
    phase: Phase
    behaviour: Behaviour
    order: int = 0

    def to_proto(self) -> types_pb2.Hook:
        return types_pb2.Hook(
            name=self.name,
            base=self.base.to_proto(),
            phase=self.phase.value,
            behaviour=self.behaviour.value,
            order=self.order,
        )


class Call(enum.Enum):
    """A call of the Plugin service, for :class:`CallPolicy`."""

    RECONCILE = types_pb2.CALL_RECONCILE
    FINALIZE = types_pb2.CALL_FINALIZE
    VALIDATE = types_pb2.CALL_VALIDATE
    DEFAULT = types_pb2.CALL_DEFAULT
    HOOK = types_pb2.CALL_HOOK
    """Every hook of the plugin."""
    MUTATE = types_pb2.CALL_MUTATE


class FailurePolicy(enum.Enum):
    """What admission does when a Validate or Default call fails (an error, a timeout, the
    plugin gone)."""

    FAIL = types_pb2.FAILURE_POLICY_FAIL
    """Refuse the object."""
    IGNORE = types_pb2.FAILURE_POLICY_IGNORE
    """Admit it, with a warning."""


@dataclass(frozen=True)
class CallPolicy:
    """How the plugin asks to be called for one call: how long the operator waits
    (``deadline_seconds``, positive; ``None`` for the operator's default) and, for Validate and
    Default, what a failed call does (``None`` for the operator's ``--webhook-failure-policy``).

    The operator clamps the deadline to its bounds (at least 1 s, at most 10 min, and at most
    10 s for Validate and Default); a call past it is a timeout, and the plugin stays
    registered.
    """

    call: Call
    deadline_seconds: float | None = None
    failure_policy: FailurePolicy | None = None

    def to_proto(self) -> types_pb2.CallPolicy:
        policy = types_pb2.CallPolicy(
            call=self.call.value,
            failure_policy=(
                types_pb2.FAILURE_POLICY_UNSPECIFIED
                if self.failure_policy is None
                else self.failure_policy.value
            ),
        )
        if self.deadline_seconds is not None:
            policy.deadline.CopyFrom(seconds_to_duration(self.deadline_seconds))
        return policy


@dataclass
class HookCall:
    """A Hook call: which hook runs, at which phase, and the objects the implementation is
    (or was) sent.

    ``phase`` is ``None`` for a phase this SDK does not know (a newer operator). In after-*
    phases, ``outcome`` and ``message`` are those of the implementation's call (FAILED too when
    the call itself failed); before, ``outcome`` is ``None`` and ``message`` empty.
    """

    hook: str
    phase: Phase | None
    request: Request
    outcome: Outcome | None = None
    message: str = ""

    @classmethod
    def decode(cls, wire: plugin_pb2.HookRequest) -> HookCall:
        """Decode the call the operator sent; raise :class:`kplug.InvalidRequestError` when an
        object is not a JSON object."""
        request = Request.decode(wire.implementation, wire.object, wire.extensions)
        try:
            phase: Phase | None = Phase(wire.phase)
        except ValueError:
            phase = None
        try:
            outcome: Outcome | None = Outcome(wire.outcome)
        except ValueError:
            outcome = None
        return cls(wire.hook, phase, request, outcome, wire.message)


@dataclass
class HookResponse:
    """A hook's answer: an outcome, a message, a status (a JSON object the operator writes
    under ``status.hooks.<plugin>`` of the base object, where the operator's reserved keys may
    be used) and events. With RETRY from a sync-enforce hook, ``retry_after_seconds`` says when
    to try the step again."""

    outcome: Outcome
    message: str = ""
    retry_after_seconds: float | None = None
    status: JsonObject | None = None
    events: list[Event] = field(default_factory=list)

    @classmethod
    def ok(cls, message: str = "", *, status: Mapping[str, Any] | None = None) -> HookResponse:
        """Done: the step may go on."""
        return cls(Outcome.OK, message)._with_optional_status(status)

    @classmethod
    def retry(
        cls,
        after_seconds: float = DEFAULT_RETRY_AFTER_SECONDS,
        message: str = "",
        *,
        status: Mapping[str, Any] | None = None,
    ) -> HookResponse:
        """Not done yet: a sync-enforce hook's step is tried again after ``after_seconds``."""
        check_retry_delay(after_seconds)
        return cls(Outcome.RETRY, message, after_seconds)._with_optional_status(status)

    @classmethod
    def failed(cls, message: str, *, status: Mapping[str, Any] | None = None) -> HookResponse:
        """Failed: ``message`` says why; the hook's behaviour says what follows."""
        return cls(Outcome.FAILED, message)._with_optional_status(status)

    def with_status(self, status: Mapping[str, Any]) -> Self:
        """Merge ``status`` (top-level keys) into the hook's status."""
        if not isinstance(status, Mapping):
            raise ValueError(f"status must be a JSON object (a dict), got {type(status).__name__}")
        self.status = {**(self.status or {}), **status}
        return self

    def event(
        self,
        reason: str,
        message: str,
        *,
        warning: bool = False,
        regarding: Mapping[str, Any] | ObjectRef | None = None,
    ) -> Self:
        """Record a Kubernetes Event on the base object, or on ``regarding`` (an object the
        plugin was sent)."""
        self.events.append(Event(reason, message, warning, regarding_ref(regarding)))
        return self

    def to_proto(self, base: ObjectRef, extensions: Sequence[ObjectRef]) -> plugin_pb2.HookResponse:
        """The wire form; raise ValueError where the operator would refuse it."""
        response = plugin_pb2.HookResponse(outcome=self.outcome.value, message=self.message)
        set_retry_after(response, self.outcome, self.retry_after_seconds)
        if self.status is not None:
            response.status = encode_json(self.status, "status")
        response.events.extend(events_proto(self.events, base, extensions))
        return response

    def _with_optional_status(self, status: Mapping[str, Any] | None) -> HookResponse:
        return self if status is None else self.with_status(status)
