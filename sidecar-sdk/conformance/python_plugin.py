"""The conformance plugin, written with the Python SDK.

Its behaviour is driven by the base object's ``spec.conformance``, exactly as
README.md in this directory specifies, so that every SDK's conformance plugin
answers the cases in cases.json identically. Run it as a plugin process:

    KPLUG_SOCKET_DIR=/tmp/kc python sidecar-sdk/conformance/python_plugin.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kplug

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
        response = _outcome(c)
        if "status" in c:
            response.with_status(c["status"])
        if c.get("echo"):
            response.with_status({"echo": _echo(request)})
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
        response = _outcome(c)
        _add_events(response, request, c)
        return response

    async def ready(self) -> kplug.Readiness:
        return self.readiness


def _directives(request: kplug.Request) -> dict[str, Any]:
    directives = request.spec.get("conformance", {})
    return directives if isinstance(directives, dict) else {}


def _outcome(c: dict[str, Any]) -> kplug.Response:
    action, message = c.get("action", "ok"), c.get("message", "")
    if action == "ok":
        return kplug.Response.ok(message)
    if action == "retry":
        if "retryAfterSeconds" in c:
            return kplug.Response.retry(c["retryAfterSeconds"], message)
        return kplug.Response.retry(message=message)
    if action == "fail":
        return kplug.Response.failed(message)
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
        regarding = event.get("regarding")
        target = (
            None
            if regarding is None
            else request.object
            if regarding == "base"
            else request.extensions[regarding]
        )
        response.event(
            event["reason"], event["message"], warning=event.get("warning", False), regarding=target
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
            )
            for o in plugin["offers"]
        ],
    )


if __name__ == "__main__":
    kplug.run(Conformance(), info())
