"""The class plugin authors subclass."""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kplug.request import Request
from kplug.response import Response

if TYPE_CHECKING:
    from kplug.admission import AdmissionRequest, Defaults, Validation
    from kplug.hooks import HookCall, HookResponse
    from kplug.mutate import MutateCall, Mutation


@dataclass(frozen=True)
class Readiness:
    """Whether the plugin can take work now; ``message`` says why not, for humans."""

    ready: bool = True
    message: str = ""


class Plugin(abc.ABC):
    """A kplug plugin: override :meth:`reconcile`, and :meth:`finalize`, :meth:`validate`,
    :meth:`default`, :meth:`hook`, :meth:`mutate` and :meth:`ready` if needed. Overriding
    ``finalize``, ``validate``, ``default``, ``hook`` or ``mutate`` is what advertises the
    FINALIZE, VALIDATE, DEFAULT, HOOKS or MUTATE capability; the operator calls only what is
    advertised.

    Handlers may be ``async def`` (run on the event loop) or plain ``def``
    (run in a worker thread, so blocking database drivers are fine). Several
    calls can run at once, for different objects. An exception raised by a
    handler becomes an ``OUTCOME_FAILED`` response with the exception's type
    and message, shown on the resource; it does not stop the plugin.
    """

    @abc.abstractmethod
    def reconcile(self, request: Request) -> Response | Awaitable[Response]:
        """Drive the real world towards ``request.spec``; return what was achieved.

        Must be idempotent: the operator calls it again after every change,
        on resync, and after a retry.
        """

    def finalize(self, request: Request) -> Response | Awaitable[Response]:
        """Clean up before the base object is deleted (or moved to another
        implementation: the annotation ``kplug.io/reselect``); ``Response.ok()`` lets it go.

        Overriding it makes the plugin advertise the FINALIZE capability (see
        :class:`kplug.PluginInfo`). The default says done at once.
        """
        return Response.ok()

    def validate(self, request: AdmissionRequest) -> Validation | Awaitable[Validation]:
        """Decide, at admission, whether an object may be created or changed: an object of a
        base kind this plugin offers (reconciled, or to be, by its implementation), or an
        extension of a kind one of its offers declares (``request.implementation`` says which
        offer). Field errors refuse it, and ``kubectl apply`` prints them.

        Overriding it advertises the VALIDATE capability. An exception raised here means the
        plugin could not decide: the SDK answers with a gRPC ``INTERNAL`` error carrying
        ``"<ExceptionType>: <message>"``, and the failure policy (the plugin's
        :class:`kplug.CallPolicy`, else the operator's) refuses or admits the object. To
        refuse, return field errors.
        """
        raise NotImplementedError("validate")  # never called unless overridden

    def default(self, request: AdmissionRequest) -> Defaults | Awaitable[Defaults]:
        """Fill in defaults, at admission, of the same objects as :meth:`validate` (which then
        sees the defaulted object): a JSON Patch built with :class:`kplug.Defaults`, limited to
        ``/spec``, ``/metadata/labels`` and ``/metadata/annotations``.

        Overriding it advertises the DEFAULT capability. An exception raised here (a path
        outside those, too) is answered with a gRPC ``INTERNAL`` error carrying its message, so
        the failure policy decides.
        """
        raise NotImplementedError("default")  # never called unless overridden

    def hook(self, call: HookCall) -> HookResponse | Awaitable[HookResponse]:
        """Run one of the hooks declared in :attr:`kplug.PluginInfo.hooks` (``call.hook`` names
        it). The answer's outcome, message, retry delay, status (written under
        ``status.hooks.<plugin>``) and events count. An exception becomes an ``OUTCOME_FAILED``
        answer with its message, as for :meth:`reconcile`.

        Overriding it advertises the HOOKS capability; declaring hooks without it is a start-up
        error.
        """
        raise NotImplementedError("hook")  # never called unless overridden

    def mutate(self, call: MutateCall) -> Mutation | Awaitable[Mutation]:
        """Patch an object of a kind declared in :attr:`kplug.PluginInfo.mutations` before the
        operator applies it: a child another plugin desires (when the operator's ``--mutators``
        allows this plugin for its kind), or an embedding operator's own object. Return a
        :class:`kplug.Mutation`, a JSON Patch against ``call.object`` limited to ``/spec`` and
        single labels and annotations.

        The answer must be deterministic, the same call the same patch: the operator judges
        drift by the mutated object. Overriding it advertises the MUTATE capability; declaring
        mutations without it, or overriding it without declaring any, is a start-up error. An
        exception raised here (a path outside those, too) is answered with a gRPC ``INTERNAL``
        error carrying its message, and the operator holds the object until a call succeeds.
        """
        raise NotImplementedError("mutate")  # never called unless overridden

    def ready(self) -> Readiness | bool | Awaitable[Readiness | bool]:
        """Answer the operator's Probe; while not ready, no work is routed to the plugin.

        The default is always ready.
        """
        return Readiness()


def overrides(plugin: Plugin, method: str) -> bool:
    """Whether the plugin's class implements its own ``method`` (e.g. ``"finalize"``)."""
    default = getattr(Plugin, method)
    return getattr(type(plugin), method, default) is not default


def overrides_finalize(plugin: Plugin) -> bool:
    """Whether the plugin's class implements its own :meth:`Plugin.finalize`."""
    return overrides(plugin, "finalize")
