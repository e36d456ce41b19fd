"""What a plugin answers: an outcome, statuses, conditions, events and the children it desires.

Build one with :meth:`Response.ok`, :meth:`Response.retry` or
:meth:`Response.failed`, then chain what you have to report::

    return (
        Response.ok("table created", status={"columns": 3})
        .extension_status(request.extension("DatabaseTablePostgreSqlExtension"), {"partitions": 4})
        .condition("TableReady", True, "Created", "the table exists")
        .event("TableCreated", "created table users")
    )

The same rules as the operator's apply, and break early here, with a message
that says what to change: status keys ``implementation``, ``plugin``,
``observedGeneration`` and ``conditions`` and condition types ``Ready``,
``PluginAvailable``, ``ExtensionsResolved`` and ``Reconciled`` belong to the
operator; statuses and events may only target objects the plugin was sent.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Self

from google.protobuf import duration_pb2

from kplug import codec
from kplug._proto import plugin_pb2, types_pb2
from kplug.protocol import RESERVED_CONDITION_TYPES, RESERVED_STATUS_KEYS
from kplug.request import JsonObject, ObjectRef

_SentObjects = Callable[[], tuple[ObjectRef, Sequence[ObjectRef]]]
"""The objects a call sent the plugin, the base object and its extensions, as references:
computed when called (:meth:`Response._reconcile_wire`)."""

DEFAULT_RETRY_AFTER_SECONDS = 10.0
"""How long :meth:`Response.retry` waits when not told (the operator's default too)."""


class Outcome(enum.Enum):
    """What a call achieved."""

    OK = types_pb2.OUTCOME_OK
    RETRY = types_pb2.OUTCOME_RETRY
    FAILED = types_pb2.OUTCOME_FAILED


@dataclass
class Condition:
    """A Kubernetes-style condition on the base object; ``status`` None means Unknown."""

    type: str
    status: bool | None
    reason: str = ""
    message: str = ""

    def to_proto(self) -> types_pb2.Condition:
        status = {
            True: types_pb2.CONDITION_STATUS_TRUE,
            False: types_pb2.CONDITION_STATUS_FALSE,
            None: types_pb2.CONDITION_STATUS_UNKNOWN,
        }[self.status]
        return types_pb2.Condition(
            type=self.type, status=status, reason=self.reason, message=self.message
        )


@dataclass
class Event:
    """A Kubernetes Event; ``regarding`` None means the base object."""

    reason: str
    message: str
    warning: bool = False
    regarding: ObjectRef | None = None

    def to_proto(self) -> types_pb2.Event:
        event = types_pb2.Event(
            type=types_pb2.EVENT_TYPE_WARNING if self.warning else types_pb2.EVENT_TYPE_NORMAL,
            reason=self.reason,
            message=self.message,
        )
        if self.regarding is not None:
            event.regarding.CopyFrom(self.regarding.to_proto())
        return event


@dataclass
class ObjectStatus:
    """A status for one object the plugin was sent, merged into its ``.status``."""

    target: ObjectRef
    status: JsonObject


@dataclass
class Response:
    """A plugin's answer to Reconcile or Finalize.

    Finalize answers carry only the outcome, message, retry delay, events and children: the
    object is going away, so statuses and conditions are refused there.
    """

    outcome: Outcome
    message: str = ""
    retry_after_seconds: float | None = None
    status: JsonObject | None = None
    extension_statuses: list[ObjectStatus] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    children: list[JsonObject] | None = None
    """The desired children (:meth:`child`, :meth:`with_children`): ``None`` leaves them as they
    are, a list (even empty) is the whole set."""

    @classmethod
    def ok(cls, message: str = "", *, status: Mapping[str, Any] | None = None) -> Response:
        """Done: the object is reconciled (for Finalize: cleaned up, it may go)."""
        return cls(Outcome.OK, message)._with_optional_status(status)

    @classmethod
    def retry(
        cls,
        after_seconds: float = DEFAULT_RETRY_AFTER_SECONDS,
        message: str = "",
        *,
        status: Mapping[str, Any] | None = None,
    ) -> Response:
        """Not done yet, nothing is wrong: call again after ``after_seconds``."""
        check_retry_delay(after_seconds)
        return cls(Outcome.RETRY, message, after_seconds)._with_optional_status(status)

    @classmethod
    def failed(cls, message: str, *, status: Mapping[str, Any] | None = None) -> Response:
        """Failed: ``message`` says why (shown on the resource); the operator retries with
        backoff."""
        return cls(Outcome.FAILED, message)._with_optional_status(status)

    def with_status(self, status: Mapping[str, Any]) -> Self:
        """Merge ``status`` (top-level keys) into the base object's status."""
        _check_status_keys(status, "status")
        self.status = {**(self.status or {}), **status}
        return self

    def extension_status(
        self, target: Mapping[str, Any] | ObjectRef | None, status: Mapping[str, Any]
    ) -> Self:
        """Merge ``status`` into the status of ``target``: an extension the plugin was sent
        (the object itself as found in ``request.extensions``, or its :class:`ObjectRef`)."""
        if target is None:
            raise ValueError(
                "extension_status target is None: pass an extension from request.extensions "
                "(request.extension(kind) returns None when none of that kind was sent)"
            )
        ref = target if isinstance(target, ObjectRef) else ObjectRef.of(target)
        _check_status_keys(status, f"status of {ref}")
        for existing in self.extension_statuses:
            if existing.target == ref:
                existing.status = {**existing.status, **status}
                return self
        self.extension_statuses.append(ObjectStatus(ref, dict(status)))
        return self

    def condition(
        self, type: str, status: bool | None, reason: str = "", message: str = ""
    ) -> Self:
        """Report a condition on the base object (status True, False or None for Unknown)."""
        _check_condition_type(type)
        self.conditions.append(Condition(type, status, reason, message))
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

    def child(self, obj: Mapping[str, Any]) -> Self:
        """Add a child: a Kubernetes object the operator applies for this base object, a dict
        with ``apiVersion``, ``kind``, ``metadata.name`` and the fields the plugin manages. Its
        kind must be one the offer declares (:attr:`kplug.Offer.children`); the operator puts it
        in the base object's namespace, owns it and watches it::

            return kplug.Response.ok().child({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{request.name}-greeting"},
                "data": {"greeting": f"hello, {request.name}"},
            })

        An answer that adds a child, or calls :meth:`with_children`, carries the whole set: on
        OK the operator deletes the children no longer listed (on RETRY it only applies them).
        An answer without either leaves the children as they are.

        Raises ValueError when ``obj`` is not a JSON object (a dict).
        """
        checked = _checked_child(obj)
        self.children = [*(self.children or []), checked]
        return self

    def with_children(self, objects: Iterable[Mapping[str, Any]]) -> Self:
        """Set the whole set of desired children (each as for :meth:`child`); an empty set
        deletes every child on OK.

        Raises ValueError when one of ``objects`` is not a JSON object (a dict).
        """
        self.children = [_checked_child(obj) for obj in objects]
        return self

    def to_reconcile_proto(
        self, base: ObjectRef, extensions: Sequence[ObjectRef]
    ) -> plugin_pb2.ReconcileResponse:
        """The wire form; raise ValueError where the operator would refuse the response.

        ``base`` and ``extensions`` are the objects the plugin was sent. Extension
        statuses must target one of ``extensions``; events the base or one of them.
        """
        return self._reconcile_wire(lambda: (base, extensions))

    def _reconcile_wire(self, sent: _SentObjects) -> plugin_pb2.ReconcileResponse:
        """:meth:`to_reconcile_proto`, calling ``sent`` for the objects the plugin was sent
        only when the answer targets one (an extension status, an event): most answers do not,
        and the SDK saves building their references on every call."""
        outcome = self.outcome
        # _value_ rather than .value: the property is slow, and this runs on every call.
        response = plugin_pb2.ReconcileResponse(outcome=outcome._value_, message=self.message)
        if outcome is Outcome.RETRY:
            set_retry_after(response, outcome, self.retry_after_seconds)
        if self.status is not None:
            _check_status_keys(self.status, "status")
            response.status = encode_json(self.status, "status")
        targets = None
        if self.extension_statuses:
            targets = sent()
            base, extensions = targets
            for item in self.extension_statuses:
                if _same_object(item.target, base):
                    raise ValueError(
                        f"extension_status targets the base object {item.target}; set its "
                        "status with with_status() or status="
                    )
                check_sent(item.target, extensions, "a status")
                _check_status_keys(item.status, f"status of {item.target}")
                response.extension_statuses.append(
                    plugin_pb2.ObjectStatus(
                        target=item.target.to_proto(),
                        status=encode_json(item.status, f"status of {item.target}"),
                    )
                )
        for condition in self.conditions:
            _check_condition_type(condition.type)
            response.conditions.append(condition.to_proto())
        if self.events:
            base, extensions = targets or sent()
            response.events.extend(events_proto(self.events, base, extensions))
        if self.children is not None:
            _set_children(response, self.children)
        return response

    def to_finalize_proto(
        self, base: ObjectRef, extensions: Sequence[ObjectRef]
    ) -> plugin_pb2.FinalizeResponse:
        """The wire form of a Finalize answer; raise ValueError if it carries statuses or
        conditions (a Finalize response cannot). Its children are those still wanted while
        clean-up goes on; once the answer is OK, every child goes."""
        return self._finalize_wire(lambda: (base, extensions))

    def _finalize_wire(self, sent: _SentObjects) -> plugin_pb2.FinalizeResponse:
        """:meth:`to_finalize_proto`, calling ``sent`` only for an answer with events (as
        :meth:`_reconcile_wire`)."""
        if self.status is not None or self.extension_statuses or self.conditions:
            raise ValueError(
                "a Finalize response carries no status, extension statuses or conditions (the "
                "object is being deleted); return the outcome, a message and events only"
            )
        outcome = self.outcome
        response = plugin_pb2.FinalizeResponse(outcome=outcome._value_, message=self.message)
        if outcome is Outcome.RETRY:
            set_retry_after(response, outcome, self.retry_after_seconds)
        if self.events:
            base, extensions = sent()
            response.events.extend(events_proto(self.events, base, extensions))
        if self.children is not None:
            _set_children(response, self.children)
        return response

    def _with_optional_status(self, status: Mapping[str, Any] | None) -> Response:
        return self if status is None else self.with_status(status)


def _checked_child(obj: Any) -> JsonObject:
    """A copy of ``obj``, which must be a JSON object (a dict), to be sent as a child."""
    if not isinstance(obj, Mapping):
        # The wording is every SDK's (sidecar-sdk/conformance/README.md, step 4c).
        raise ValueError(
            f"a child must be a JSON object (a dict with apiVersion, kind and metadata.name), got "
            f"{type(obj).__name__}"
        )
    return dict(obj)


def _set_children(
    response: plugin_pb2.ReconcileResponse | plugin_pb2.FinalizeResponse,
    children: Sequence[JsonObject] | None,
) -> None:
    """Put the desired children on the wire: nothing for ``None``, else the ``children``
    message, present even when empty (the empty set deletes every child)."""
    if children is None:
        return
    response.children.SetInParent()
    response.children.objects.extend(
        encode_json(child, f"child #{i}") for i, child in enumerate(children)
    )


def check_retry_delay(after_seconds: float) -> None:
    """Refuse a negative retry delay, for every answer that can ask to be retried."""
    if after_seconds < 0:
        raise ValueError(f"retry delay must not be negative, got {after_seconds}")


def regarding_ref(regarding: Mapping[str, Any] | ObjectRef | None) -> ObjectRef | None:
    """The object an event is about, as given to ``event(regarding=...)``: None for the
    base object, else the object the plugin was sent or its :class:`ObjectRef`."""
    if regarding is None or isinstance(regarding, ObjectRef):
        return regarding
    return ObjectRef.of(regarding)


def set_retry_after(
    response: plugin_pb2.ReconcileResponse | plugin_pb2.FinalizeResponse | plugin_pb2.HookResponse,
    outcome: Outcome,
    retry_after_seconds: float | None,
) -> None:
    """Put the retry delay on the wire for a RETRY answer (the default one when not told);
    other outcomes carry none."""
    if outcome is Outcome.RETRY:
        seconds = (
            DEFAULT_RETRY_AFTER_SECONDS if retry_after_seconds is None else retry_after_seconds
        )
        response.retry_after.CopyFrom(seconds_to_duration(seconds))


def events_proto(
    events: Sequence[Event], base: ObjectRef, extensions: Sequence[ObjectRef]
) -> list[types_pb2.Event]:
    """The wire form of ``events``; raise ValueError for one about an object the plugin was
    not sent (``base`` and ``extensions`` are the objects it was)."""
    for event in events:
        if event.regarding is not None:
            check_sent(event.regarding, [base, *extensions], f"event {event.reason!r}")
    return [event.to_proto() for event in events]


def encode_json(value: Any, what: str) -> bytes:
    """Compact UTF-8 JSON, as every SDK sends it."""
    # The dict first: the check of the abstract Mapping is slower, and statuses are dicts.
    if not isinstance(value, dict) and not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object (a dict), got {type(value).__name__}")
    try:
        return codec.dumps(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} cannot be encoded as JSON: {e}") from e


def seconds_to_duration(seconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromTimedelta(timedelta(seconds=seconds))
    return duration


def _check_status_keys(status: Mapping[str, Any], what: str) -> None:
    if RESERVED_STATUS_KEYS.isdisjoint(status):
        return  # the usual case, checked without a loop in Python
    for key in status:
        if key in RESERVED_STATUS_KEYS:
            raise ValueError(
                f'{what} key "{key}" is reserved for the operator (it owns '
                f"{', '.join(sorted(RESERVED_STATUS_KEYS))}); report it under another key, "
                "or as a condition"
            )


def _check_condition_type(type: str) -> None:
    if not type:
        raise ValueError("condition type is empty; use a CamelCase type such as 'TableReady'")
    if type in RESERVED_CONDITION_TYPES:
        raise ValueError(
            f'condition type "{type}" is reserved for the operator (it owns '
            f"{', '.join(sorted(RESERVED_CONDITION_TYPES))}); use a type of your own, "
            "e.g. 'TableReady'"
        )


def check_sent(target: ObjectRef, sent: Sequence[ObjectRef], what: str) -> None:
    if not any(_same_object(target, candidate) for candidate in sent):
        raise ValueError(
            f"{what} targets {target} ({target.api_version}), which was not sent to this "
            "plugin; target an object from the request"
        )


def _same_object(a: ObjectRef, b: ObjectRef) -> bool:
    # As the operator compares them: the API version may differ, the group may not.
    return (_group(a.api_version), a.kind, a.namespace, a.name) == (
        _group(b.api_version),
        b.kind,
        b.namespace,
        b.name,
    )


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]
