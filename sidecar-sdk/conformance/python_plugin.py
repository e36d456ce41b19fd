"""The conformance plugin, written with the Python SDK.

Its behaviour is driven by the base object's ``spec.conformance``, exactly as
README.md in this directory specifies, so that every SDK's conformance plugin
answers the cases in cases.json identically. Run it as a plugin process:

    KPLUG_SOCKET_DIR=/tmp/kc python sidecar-sdk/conformance/python_plugin.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import kplug

Answer = TypeVar("Answer", kplug.Response, kplug.HookResponse)
"""A Reconcile/Finalize response or a hook's: both have ok, retry and failed."""

CASES = Path(__file__).with_name("cases.json")


class ConformanceError(Exception):
    """What the "raise" action raises."""


class Conformance(kplug.Plugin):
    def __init__(self) -> None:
        self.readiness = kplug.Readiness(True, "")

    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        c = _directives(request)
        if c.get("action") == "setReadiness":
            self.readiness = kplug.Readiness(bool(c["ready"]), c.get("message", ""))
            return kplug.Response.ok("readiness set")
        response = _outcome(c, kplug.Response)
        if "status" in c:
            response.with_status(c["status"])
        if c.get("echo"):
            response.with_status({"echo": _echo(request)})
        if c.get("echoChildren"):
            response.with_status(
                {
                    "observedChildren": [
                        f"{child.get('kind', '')}/{_name(child)}" for child in request.children
                    ]
                }
            )
        if isinstance(c.get("children"), list):
            response.with_children(c["children"])
        if "extensionStatus" in c:
            for extension in request.extensions:
                response.extension_status(extension, c["extensionStatus"])
        for condition in c.get("conditions", []):
            response.condition(
                condition["type"],
                condition["status"],
                condition.get("reason", ""),
                condition.get("message", ""),
            )
        _add_events(response, request, c)
        return response

    async def finalize(self, request: kplug.Request) -> kplug.Response:
        c = _directives(request)
        response = _outcome(c, kplug.Response)
        _add_events(response, request, c)
        return response

    async def validate(self, request: kplug.AdmissionRequest) -> kplug.Validation:
        c = _spec_directives(request.spec)
        if c.get("action") == "raise":
            raise ConformanceError(c.get("message", ""))
        verdict = kplug.Validation.allowed()
        for error in c.get("errors", []):
            if "value" in error:
                verdict.error(error["path"], error["value"], error["message"])
            else:
                verdict.error_at(error["path"], error["message"])
        for warning in c.get("warnings", []):
            verdict.warning(warning)
        if c.get("echo"):
            old = request.old_object
            old_text = "none" if old is None else f"{old.get('kind', '')}/{_name(old)}"
            verdict.warning(
                f"{request.operation.name} {request.implementation} "
                f"{request.kind}/{request.name} old={old_text}"
            )
        return verdict

    async def default(self, request: kplug.AdmissionRequest) -> kplug.Defaults:
        c = _spec_directives(request.spec)
        if c.get("action") == "raise":
            raise ConformanceError(c.get("message", ""))
        defaults = kplug.Defaults.none()
        for op in c.get("patch", []):
            if op["op"] == "add":
                defaults.add(op["path"], op.get("value"))
            elif op["op"] == "replace":
                defaults.replace(op["path"], op.get("value"))
            else:
                defaults.remove(op["path"])
        for warning in c.get("warnings", []):
            defaults.warning(warning)
        return defaults

    async def mutate(self, call: kplug.MutateCall) -> kplug.Mutation:
        # The README's Mutate: c is the *base* object's spec.conformance (the object is the
        # child being mutated, whose spec is not the case's).
        c = _base_directives(call.base)
        if c.get("action") == "raise":
            raise ConformanceError(c.get("message", ""))
        mutation = kplug.Mutation.none()
        for op in c.get("patch", []):
            if op["op"] == "add":
                mutation.add(op["path"], op.get("value"))
            elif op["op"] == "replace":
                mutation.replace(op["path"], op.get("value"))
            else:
                mutation.remove(op["path"])
        for warning in c.get("warnings", []):
            mutation.warning(warning)
        if c.get("echo"):
            live = "none" if call.live is None else _name(call.live)
            mutation.warning(f"{call.implementation} {call.kind}/{call.name} live={live}")
        return mutation

    async def hook(self, call: kplug.HookCall) -> kplug.HookResponse:
        request = call.request
        c = _directives(request)
        response = _outcome(c, kplug.HookResponse)
        if "status" in c:
            response.with_status(c["status"])
        if c.get("echo"):
            response.with_status(
                {
                    "echo": {
                        "hook": call.hook,
                        "phase": None if call.phase is None else call.phase.name,
                        "implementation": request.implementation,
                        "name": request.name,
                        "namespace": request.namespace,
                        "extensions": [
                            f"{e.get('kind', '')}/{_name(e)}" for e in request.extensions
                        ],
                        "outcome": None if call.outcome is None else call.outcome.name,
                        "message": call.message,
                    }
                }
            )
        for event in c.get("events", []):
            response.event(
                event["reason"],
                event["message"],
                warning=event.get("warning", False),
                regarding=_regarding(request, event.get("regarding")),
            )
        return response

    async def ready(self) -> kplug.Readiness:
        return self.readiness


def _directives(request: kplug.Request) -> dict[str, Any]:
    return _spec_directives(request.spec)


def _spec_directives(spec: dict[str, Any]) -> dict[str, Any]:
    directives = spec.get("conformance", {})
    return directives if isinstance(directives, dict) else {}


def _base_directives(base: dict[str, Any] | None) -> dict[str, Any]:
    """The base object's spec.conformance; empty without a base object."""
    spec = (base or {}).get("spec")
    return _spec_directives(spec if isinstance(spec, dict) else {})


def _name(obj: dict[str, Any]) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def _regarding(request: kplug.Request, regarding: Any) -> dict[str, Any] | None:
    if regarding is None:
        return None
    return request.object if regarding == "base" else request.extensions[regarding]


def _outcome(c: dict[str, Any], answer: type[Answer]) -> Answer:
    """The answer a case's directives ask for: a Reconcile/Finalize response or a hook's,
    which are built alike."""
    action, message = c.get("action", "ok"), c.get("message", "")
    if action == "ok":
        return answer.ok(message)
    if action == "retry":
        if "retryAfterSeconds" in c:
            return answer.retry(c["retryAfterSeconds"], message)
        return answer.retry(message=message)
    if action == "fail":
        return answer.failed(message)
    if action == "raise":
        raise ConformanceError(message)
    raise ValueError(f"unknown conformance action {action!r}")


def _echo(request: kplug.Request) -> dict[str, Any]:
    return {
        "implementation": request.implementation,
        "name": request.name,
        "namespace": request.namespace,
        "generation": request.generation,
        "extensions": [
            f"{e.get('kind', '')}/{e.get('metadata', {}).get('name', '')}"
            for e in request.extensions
        ],
        "data": request.spec.get("data"),
    }


def _add_events(response: kplug.Response, request: kplug.Request, c: dict[str, Any]) -> None:
    for event in c.get("events", []):
        response.event(
            event["reason"],
            event["message"],
            warning=event.get("warning", False),
            regarding=_regarding(request, event.get("regarding")),
        )


def info() -> kplug.PluginInfo:
    """The plugin's description, as cases.json's "plugin" gives it."""
    plugin = json.loads(CASES.read_text())["plugin"]
    return kplug.PluginInfo(
        name=plugin["name"],
        version=plugin["version"],
        description=plugin["description"],
        offers=[
            kplug.Offer(
                base=kplug.GroupKind(o["base"]["group"], o["base"]["kind"]),
                implementation=o["implementation"],
                extensions=[kplug.GroupKind(e["group"], e["kind"]) for e in o["extensions"]],
                children=[kplug.ChildKind(_api_version(c), c["kind"]) for c in o["children"]],
            )
            for o in plugin["offers"]
        ],
        hooks=[
            kplug.Hook(
                h["name"],
                kplug.GroupKind(h["base"]["group"], h["base"]["kind"]),
                kplug.Phase[h["phase"]],
                kplug.Behaviour[h["behaviour"]],
                h["order"],
            )
            for h in plugin["hooks"]
        ],
        call_policies=[
            kplug.CallPolicy(
                kplug.Call[p["call"]],
                p["deadline_seconds"],
                None
                if p["failure_policy"] == "UNSPECIFIED"
                else kplug.FailurePolicy[p["failure_policy"]],
            )
            for p in plugin["call_policies"]
        ],
        mutations=[kplug.MutationKind(_api_version(m), m["kind"]) for m in plugin["mutations"]],
    )


def _api_version(kind: dict[str, str]) -> str:
    """``<group>/<version>``, or ``<version>`` for the core group."""
    return f"{kind['group']}/{kind['version']}" if kind["group"] else kind["version"]


if __name__ == "__main__":
    kplug.run(Conformance(), info())
