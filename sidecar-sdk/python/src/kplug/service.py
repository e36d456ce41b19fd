"""The kplug.v1.Plugin gRPC service: decodes requests, calls the plugin, encodes responses.

In Reconcile, Finalize and Hook nothing a plugin does turns into a gRPC error: invalid input,
a handler exception or an invalid response all become ``OUTCOME_FAILED`` with a message,
because the operator shows that message on the resource, where the user looks, while a gRPC
error would only be retried.

Validate and Default are the exception (docs/protocol.md, "Admission: Validate and Default"):
a handler exception or an invalid answer is a gRPC ``INTERNAL`` error with its message, and an
object that is not JSON ``INVALID_ARGUMENT``, so that the failure policy decides; the operator
shows the message to the client. Mutate answers alike (docs/protocol.md, "Mutate"): there is no
resource to show a message on, and an error makes the operator hold the object until a call
succeeds, rather than apply it unmutated. A call the plugin does not implement is
``UNIMPLEMENTED``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import grpc

from kplug import tracing
from kplug._proto import plugin_pb2, plugin_pb2_grpc, types_pb2
from kplug.admission import AdmissionRequest, Defaults, Validation
from kplug.errors import InvalidRequestError
from kplug.hooks import HookCall, HookResponse
from kplug.info import PROTOCOL, PluginInfo
from kplug.mutate import MutateCall, Mutation
from kplug.plugin import Plugin, Readiness, overrides, overrides_finalize
from kplug.request import ObjectRef, Request
from kplug.response import Response

logger = logging.getLogger(__name__)

T = TypeVar("T")


def capabilities(plugin: Plugin, info: PluginInfo) -> list[types_pb2.Capability]:
    """RECONCILE always; FINALIZE when asked for, or when the plugin overrides finalize;
    VALIDATE, DEFAULT and HOOKS when it overrides validate, default and hook; CHILDREN when an
    offer declares child kinds; MUTATE when it overrides mutate (in that order, as every SDK
    sends them)."""
    finalize = overrides_finalize(plugin) if info.finalize is None else info.finalize
    optional = [
        (finalize, types_pb2.CAPABILITY_FINALIZE),
        (overrides(plugin, "validate"), types_pb2.CAPABILITY_VALIDATE),
        (overrides(plugin, "default"), types_pb2.CAPABILITY_DEFAULT),
        (overrides(plugin, "hook"), types_pb2.CAPABILITY_HOOKS),
        (any(offer.children for offer in info.offers), types_pb2.CAPABILITY_CHILDREN),
        (overrides(plugin, "mutate"), types_pb2.CAPABILITY_MUTATE),
    ]
    return [types_pb2.CAPABILITY_RECONCILE] + [c for wanted, c in optional if wanted]


def describe_exception(error: BaseException) -> str:
    """``"<ExceptionType>: <message>"``, the text the user sees on the resource."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def call_handler(handler: Callable[..., Any], *args: Any) -> Any:
    """Await an async handler; run a plain one in a worker thread so it may block. What it
    returns is the caller's to check."""
    if _is_async(handler):
        result = await handler(*args)
    elif getattr(handler, "__func__", None) in _INLINE_DEFAULTS:
        result = handler(*args)  # the SDK's own trivial defaults need no thread
    else:
        result = await asyncio.to_thread(handler, *args)
    # An answer is never awaitable: the common case skips the slower general check.
    if not isinstance(result, _ANSWERS) and inspect.isawaitable(result):
        result = await result
    return result


def _is_async(handler: Callable[..., Any]) -> bool:
    """``inspect.iscoroutinefunction(handler)``, remembered for the function of a bound method
    (a new object each time it is looked up), since it is asked on every call."""
    function = getattr(handler, "__func__", handler)
    try:
        return _is_async_function(function)
    except TypeError:  # an unhashable callable object: asked every time
        return inspect.iscoroutinefunction(function)


@functools.lru_cache(maxsize=256)
def _is_async_function(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function)


_INLINE_DEFAULTS = {Plugin.finalize, Plugin.ready}
_ANSWERS = (Response, HookResponse, Validation, Defaults, Mutation, Readiness, bool)


def _sent(request: Request) -> Callable[[], tuple[ObjectRef, list[ObjectRef]]]:
    """The references to the objects ``request`` sent the plugin, built when called: only an
    answer that targets one (an extension status, an event) needs them."""
    return lambda: (request.ref(), [request.ref(e) for e in request.extensions])


def _encode_reconcile(response: Response, request: Request) -> plugin_pb2.ReconcileResponse:
    return response._reconcile_wire(_sent(request))


def _encode_finalize(response: Response, request: Request) -> plugin_pb2.FinalizeResponse:
    return response._finalize_wire(_sent(request))


class PluginService(plugin_pb2_grpc.PluginServicer):
    """Serves one plugin instance."""

    def __init__(self, plugin: Plugin, info: PluginInfo) -> None:
        self._plugin = plugin
        self._info = info
        self._capabilities = capabilities(plugin, info)

    async def GetInfo(  # noqa: N802 (the gRPC method name)
        self, request: plugin_pb2.GetInfoRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.GetInfoResponse:
        return plugin_pb2.GetInfoResponse(
            name=self._info.name,
            version=self._info.version,
            protocol=PROTOCOL,
            offers=[offer.to_proto() for offer in self._info.offers],
            capabilities=self._capabilities,
            description=self._info.description,
            hooks=self._info.hooks_proto(),
            call_policies=self._info.call_policies_proto(),
            mutations=self._info.mutations_proto(),
        )

    async def Probe(  # noqa: N802
        self, request: plugin_pb2.ProbeRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.ProbeResponse:
        try:
            readiness = await call_handler(self._plugin.ready)
        except Exception as e:
            logger.exception("plugin %s: ready() raised; answering not ready", self._info.name)
            return plugin_pb2.ProbeResponse(ready=False, message=describe_exception(e))
        if isinstance(readiness, bool):
            readiness = Readiness(readiness)
        if not isinstance(readiness, Readiness):
            message = f"ready() must return kplug.Readiness or bool, got {readiness!r}"
            logger.error("plugin %s: %s", self._info.name, message)
            return plugin_pb2.ProbeResponse(ready=False, message=message)
        return plugin_pb2.ProbeResponse(ready=readiness.ready, message=readiness.message)

    async def Reconcile(  # noqa: N802
        self, request: plugin_pb2.ReconcileRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.ReconcileResponse:
        with tracing.handler_span(self._info.name, "Reconcile", context):
            return await self._handle(
                "reconcile",
                request,
                self._plugin.reconcile,
                _encode_reconcile,
                plugin_pb2.ReconcileResponse,
            )

    async def Finalize(  # noqa: N802
        self, request: plugin_pb2.FinalizeRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.FinalizeResponse:
        with tracing.handler_span(self._info.name, "Finalize", context):
            return await self._handle(
                "finalize",
                request,
                self._plugin.finalize,
                _encode_finalize,
                plugin_pb2.FinalizeResponse,
            )

    async def _handle(
        self,
        call: str,
        request: plugin_pb2.ReconcileRequest | plugin_pb2.FinalizeRequest,
        handler: Callable[[Request], Response | Awaitable[Response]],
        encode: Callable[[Response, Request], T],
        wire_type: Callable[..., T],
    ) -> T:
        try:
            decoded = Request.decode(
                request.implementation, request.object, request.extensions, request.children
            )
        except InvalidRequestError as e:
            logger.error("plugin %s: %s; %s not called", self._info.name, e, call)
            return wire_type(outcome=types_pb2.OUTCOME_FAILED, message=str(e))
        logger.debug("plugin %s: %s %s", self._info.name, call, decoded)
        try:
            response = await call_handler(handler, decoded)
            if not isinstance(response, Response):
                raise TypeError(
                    f"{call}() must return a kplug.Response, got {type(response).__name__}"
                )
            return encode(response, decoded)
        except Exception as e:
            logger.exception("plugin %s: %s of %s failed", self._info.name, call, decoded)
            return wire_type(outcome=types_pb2.OUTCOME_FAILED, message=describe_exception(e))

    async def Validate(  # noqa: N802
        self, request: plugin_pb2.ValidateRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.ValidateResponse:
        with tracing.handler_span(self._info.name, "Validate", context):
            return await self._admit(
                "validate",
                request,
                context,
                Validation,
                lambda verdict: cast(Validation, verdict).to_proto(),
            )

    async def Default(  # noqa: N802
        self, request: plugin_pb2.DefaultRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.DefaultResponse:
        with tracing.handler_span(self._info.name, "Default", context):
            return await self._admit(
                "default",
                request,
                context,
                Defaults,
                lambda defaults: cast(Defaults, defaults).to_proto(),
            )

    async def Hook(  # noqa: N802
        self, request: plugin_pb2.HookRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.HookResponse:
        if not overrides(self._plugin, "hook"):
            await self._unimplemented(context, "Hook")
        with tracing.handler_span(self._info.name, "Hook", context):
            try:
                call = HookCall.decode(request)
            except InvalidRequestError as e:
                logger.error("plugin %s: %s; hook not called", self._info.name, e)
                return plugin_pb2.HookResponse(outcome=types_pb2.OUTCOME_FAILED, message=str(e))
            decoded = call.request
            try:
                response = await call_handler(self._plugin.hook, call)
                if not isinstance(response, HookResponse):
                    raise TypeError(
                        f"hook() must return a kplug.HookResponse, got {type(response).__name__}"
                    )
                return response.to_proto(
                    decoded.ref(), [decoded.ref(e) for e in decoded.extensions]
                )
            except Exception as e:
                logger.exception(
                    "plugin %s: hook %s of %s failed", self._info.name, call.hook, decoded
                )
                return plugin_pb2.HookResponse(
                    outcome=types_pb2.OUTCOME_FAILED, message=describe_exception(e)
                )

    async def Mutate(  # noqa: N802
        self, request: plugin_pb2.MutateRequest, context: grpc.aio.ServicerContext
    ) -> plugin_pb2.MutateResponse:
        if not overrides(self._plugin, "mutate"):
            await self._unimplemented(context, "Mutate")
        with tracing.handler_span(self._info.name, "Mutate", context):
            try:
                call = MutateCall.decode(request)
            except InvalidRequestError as e:
                logger.error("plugin %s: %s; mutate not called", self._info.name, e)
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
                raise  # abort raises; this keeps type checkers informed
            problem: str | None = None
            try:
                mutation = await call_handler(self._plugin.mutate, call)
                if not isinstance(mutation, Mutation):
                    raise TypeError(
                        f"mutate() must return a kplug.Mutation, got {type(mutation).__name__}"
                    )
                return mutation.to_proto()
            except Exception as e:
                logger.exception("plugin %s: mutate of %s failed", self._info.name, call)
                problem = describe_exception(e)
            await context.abort(grpc.StatusCode.INTERNAL, problem)
            raise AssertionError("unreachable: abort raises")

    async def _admit(
        self,
        call: str,
        request: plugin_pb2.ValidateRequest | plugin_pb2.DefaultRequest,
        context: grpc.aio.ServicerContext,
        answer_type: type,
        encode: Callable[[Any], T],
    ) -> T:
        """Decode, run the handler, encode; an error is a gRPC error (see the module's doc)."""
        rpc = call.capitalize()
        if not overrides(self._plugin, call):
            await self._unimplemented(context, rpc)
        try:
            decoded = AdmissionRequest.decode(
                request.implementation, request.operation, request.object, request.old_object
            )
        except InvalidRequestError as e:
            logger.error("plugin %s: %s; %s not called", self._info.name, e, call)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise  # abort raises; this keeps type checkers informed
        handler = getattr(self._plugin, call)
        problem: str | None = None
        try:
            answer = await call_handler(handler, decoded)
            if not isinstance(answer, answer_type):
                raise TypeError(
                    f"{call}() must return a kplug.{answer_type.__name__}, got "
                    f"{type(answer).__name__}"
                )
            return encode(answer)
        except Exception as e:
            logger.exception(
                "plugin %s: %s of %s %s failed", self._info.name, call, decoded.kind, decoded.name
            )
            problem = describe_exception(e)
        await context.abort(grpc.StatusCode.INTERNAL, problem)
        raise AssertionError("unreachable: abort raises")

    async def _unimplemented(self, context: grpc.aio.ServicerContext, rpc: str) -> None:
        # The operator calls only what is advertised: this is a client's mistake.
        await context.abort(
            grpc.StatusCode.UNIMPLEMENTED, f"plugin {self._info.name} does not implement {rpc}"
        )
