"""kplug: write plugins for kplug operators in Python.

A plugin subclasses :class:`Plugin`, describes itself with :class:`PluginInfo`
and calls :func:`run`; the SDK serves it on its Unix socket, registers it with
the operator by heartbeat, answers probes, and drains on SIGTERM::

    import kplug

    class Hello(kplug.Plugin):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            return kplug.Response.ok(status={"greeting": f"hello, {request.name}"})

    kplug.run(Hello(), kplug.PluginInfo(
        name="hello", version="0.1.0",
        offers=[kplug.Offer(kplug.GroupKind("example.com", "Greeting"), "Hello")],
    ))

See docs/protocol.md in the kplug repository for the protocol behind it.
"""

from kplug.admission import AdmissionRequest, Defaults, FieldError, Operation, Validation
from kplug.errors import (
    InvalidNameError,
    InvalidRequestError,
    KplugError,
    NotASocketError,
    SocketInUseError,
    StartupError,
)
from kplug.hooks import (
    Behaviour,
    Call,
    CallPolicy,
    FailurePolicy,
    Hook,
    HookCall,
    HookResponse,
    Phase,
)
from kplug.info import ChildKind, GroupKind, MutationKind, Offer, PluginInfo
from kplug.mutate import MutateCall, Mutation
from kplug.plugin import Plugin, Readiness
from kplug.protocol import PROTOCOL, RESERVED_CONDITION_TYPES, RESERVED_STATUS_KEYS
from kplug.request import JsonObject, ObjectRef, Request
from kplug.response import (
    Condition,
    Event,
    ObjectStatus,
    Outcome,
    Response,
)
from kplug.server import PluginServer, run, serve

__all__ = [
    "PROTOCOL",
    "RESERVED_CONDITION_TYPES",
    "RESERVED_STATUS_KEYS",
    "AdmissionRequest",
    "Behaviour",
    "Call",
    "CallPolicy",
    "ChildKind",
    "Condition",
    "Defaults",
    "Event",
    "FailurePolicy",
    "FieldError",
    "GroupKind",
    "Hook",
    "HookCall",
    "HookResponse",
    "InvalidNameError",
    "InvalidRequestError",
    "JsonObject",
    "KplugError",
    "MutateCall",
    "Mutation",
    "MutationKind",
    "NotASocketError",
    "ObjectRef",
    "ObjectStatus",
    "Offer",
    "Operation",
    "Outcome",
    "Phase",
    "Plugin",
    "PluginInfo",
    "PluginServer",
    "Readiness",
    "Request",
    "Response",
    "SocketInUseError",
    "StartupError",
    "Validation",
    "run",
    "serve",
]
