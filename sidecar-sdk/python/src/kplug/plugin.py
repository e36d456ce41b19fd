"""The class plugin authors subclass."""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from dataclasses import dataclass

from kplug.request import Request
from kplug.response import Response


@dataclass(frozen=True)
class Readiness:
    """Whether the plugin can take work now; ``message`` says why not, for humans."""

    ready: bool = True
    message: str = ""


class Plugin(abc.ABC):
    """A kplug plugin: override :meth:`reconcile`, and :meth:`finalize` and :meth:`ready` if
    needed.

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

    def ready(self) -> Readiness | bool | Awaitable[Readiness | bool]:
        """Answer the operator's Probe; while not ready, no work is routed to the plugin.

        The default is always ready.
        """
        return Readiness()


def overrides_finalize(plugin: Plugin) -> bool:
    """Whether the plugin's class implements its own :meth:`Plugin.finalize`."""
    return getattr(type(plugin), "finalize", Plugin.finalize) is not Plugin.finalize
