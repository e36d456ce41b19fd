"""Admission (Validate, Default), hooks and call policies: capabilities inferred from the
methods a plugin overrides, declarations in GetInfo and heartbeats (identical, and checked at
start-up as the operator checks them), and every answer, error and bad input, over a real
socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import kplug
from kplug._proto import plugin_pb2, types_pb2
from kplug.service import capabilities

from .conftest import DialFn, FakeRegistry

WIDGET = kplug.GroupKind("example.com", "Widget")
HOOKS = [
    kplug.Hook("audit", WIDGET, kplug.Phase.BEFORE_RECONCILE, kplug.Behaviour.SYNC_ENFORCE, -1),
    kplug.Hook(
        "notify",
        kplug.GroupKind("", "ConfigMap"),
        kplug.Phase.AFTER_FINALIZE,
        kplug.Behaviour.ASYNC,
    ),
]
POLICIES = [
    kplug.CallPolicy(kplug.Call.VALIDATE, 2, kplug.FailurePolicy.IGNORE),
    kplug.CallPolicy(kplug.Call.HOOK, deadline_seconds=0.25),
    kplug.CallPolicy(kplug.Call.RECONCILE),
]
INFO = kplug.PluginInfo(
    name="tables",
    version="1.0.0",
    offers=[kplug.Offer(WIDGET, "Tables")],
    hooks=HOOKS,
    call_policies=POLICIES,
)


def widget(name: str = "w", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": spec,
    }


class Plain(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok()


class Tables(Plain):
    """Refuses columns that are not text, defaults the engine, runs hooks; an object named
    ``broken`` makes every handler raise."""

    async def validate(self, request: kplug.AdmissionRequest) -> kplug.Validation:
        if request.name == "broken":
            raise RuntimeError("the type catalogue is unreachable")
        verdict = kplug.Validation.allowed()
        for i, column in enumerate(request.spec.get("columns", [])):
            if column != "text":
                verdict.error(f"spec.columns[{i}]", column, "only text")
        if request.operation is kplug.Operation.UPDATE and request.old_object is not None:
            verdict.warning(f"was generation {request.old_object['metadata']['generation']}")
        return verdict

    def default(self, request: kplug.AdmissionRequest) -> kplug.Defaults:  # a plain def
        if request.name == "broken":
            raise RuntimeError("defaults unavailable")
        if request.name == "sneaky":
            return kplug.Defaults.none().add("/status/engine", "InnoDB")
        return kplug.Defaults.none().add("/spec/engine", "InnoDB").warning("engine defaulted")

    async def hook(self, call: kplug.HookCall) -> kplug.HookResponse:
        if call.request.name == "broken":
            raise RuntimeError("backup disk full")
        assert call.phase is kplug.Phase.AFTER_RECONCILE
        return kplug.HookResponse.ok(
            "done", status={"implementation": call.request.implementation, "hook": call.hook}
        ).event("Hooked", f"after {call.outcome and call.outcome.name}: {call.message}")


@pytest.fixture
async def tables(socket_dir: Path, registry: FakeRegistry) -> AsyncIterator[kplug.PluginServer]:
    server = kplug.PluginServer(Tables(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    yield server
    await server.stop(grace=0)


def test_capabilities_follow_the_overridden_methods() -> None:
    info = kplug.PluginInfo(name="p", version="1", offers=[kplug.Offer(WIDGET, "P")])
    assert capabilities(Plain(), info) == [types_pb2.CAPABILITY_RECONCILE]
    assert capabilities(Tables(), info) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_VALIDATE,
        types_pb2.CAPABILITY_DEFAULT,
        types_pb2.CAPABILITY_HOOKS,
    ]


def test_children_capability_follows_the_offers_child_kinds() -> None:
    parent = kplug.Offer(WIDGET, "P", children=[kplug.ChildKind("apps/v1", "Deployment")])
    plain = kplug.Offer(kplug.GroupKind("example.com", "Gadget"), "P")
    # One offer with child kinds is enough; CHILDREN comes last, as in every SDK.
    info = kplug.PluginInfo(name="p", version="1", offers=[plain, parent])
    assert capabilities(Plain(), info) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_CHILDREN,
    ]
    assert capabilities(Tables(), info) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_VALIDATE,
        types_pb2.CAPABILITY_DEFAULT,
        types_pb2.CAPABILITY_HOOKS,
        types_pb2.CAPABILITY_CHILDREN,
    ]
    assert types_pb2.CAPABILITY_MUTATE not in capabilities(Tables(), info)


def test_child_kinds_by_api_version() -> None:
    deployment = kplug.ChildKind("apps/v1", "Deployment")
    config_map = kplug.ChildKind("v1", "ConfigMap")
    assert (deployment.group, deployment.version) == ("apps", "v1")
    assert (config_map.group, config_map.version) == ("", "v1")
    offer = kplug.Offer(WIDGET, "P", children=[config_map, deployment]).to_proto()
    assert [(c.group, c.version, c.kind) for c in offer.children] == [
        ("", "v1", "ConfigMap"),
        ("apps", "v1", "Deployment"),
    ]


@pytest.mark.parametrize(
    ("children", "message"),
    [
        ([kplug.ChildKind("apps/v1", "")], "needs an apiVersion"),
        ([kplug.ChildKind("", "ConfigMap")], "needs an apiVersion"),
        ([kplug.ChildKind("apps/", "Deployment")], "needs an apiVersion"),
        ([kplug.ChildKind("a/b/v1", "Deployment")], "needs an apiVersion"),
        ([("apps/v1", "Deployment")], "is not a kplug.ChildKind"),
        (
            [kplug.ChildKind("v1", f"Kind{i}") for i in range(17)],
            "17 child kinds in offer 'T' are declared; at most 16",
        ),
    ],
)
def test_child_kinds_are_checked_at_startup(children: list[kplug.ChildKind], message: str) -> None:
    info = kplug.PluginInfo(
        name="tables", version="1", offers=[kplug.Offer(WIDGET, "T", children=children)]
    )
    with pytest.raises(kplug.StartupError, match="plugin tables cannot start") as raised:
        kplug.PluginServer(Tables(), info)
    assert message in str(raised.value)


async def test_getinfo_and_heartbeats_declare_the_same_hooks_and_policies(
    tables: kplug.PluginServer, registry: FakeRegistry
) -> None:
    await registry.wait_for("heartbeats")
    heartbeat = registry.heartbeats[0][1]
    handshake = registry.handshakes[heartbeat.instance_id]
    assert handshake.info is not None, handshake.error
    assert list(handshake.info.hooks) == list(heartbeat.hooks)
    assert list(handshake.info.call_policies) == list(heartbeat.call_policies)
    assert list(handshake.info.capabilities) == list(heartbeat.capabilities)
    audit = heartbeat.hooks[0]
    assert (audit.name, audit.base.kind, audit.phase, audit.behaviour, audit.order) == (
        "audit",
        "Widget",
        types_pb2.HOOK_PHASE_BEFORE_RECONCILE,
        types_pb2.HOOK_BEHAVIOUR_SYNC_ENFORCE,
        -1,
    )
    validate, hook, reconcile = heartbeat.call_policies
    assert validate.call == types_pb2.CALL_VALIDATE
    assert validate.deadline.seconds == 2
    assert validate.failure_policy == types_pb2.FAILURE_POLICY_IGNORE
    assert (hook.deadline.seconds, hook.deadline.nanos) == (0, 250_000_000)
    assert not reconcile.HasField("deadline")
    assert reconcile.failure_policy == types_pb2.FAILURE_POLICY_UNSPECIFIED


async def test_validate_answers_refuses_and_fails_as_the_protocol_says(
    tables: kplug.PluginServer, dial: DialFn
) -> None:
    stub = dial(tables.socket_path)
    create, update = types_pb2.OPERATION_CREATE, types_pb2.OPERATION_UPDATE

    def request(obj: bytes, operation: Any = create, old: bytes = b"") -> Any:
        return plugin_pb2.ValidateRequest(
            implementation="Tables", operation=operation, object=obj, old_object=old
        )

    ok = json.dumps(widget(columns=["text"])).encode()
    verdict = await stub.Validate(request(ok, update, ok), timeout=2)
    assert list(verdict.errors) == []
    assert list(verdict.warnings) == ["was generation 2"]
    refused = json.dumps(widget(columns=["text", "värchar"])).encode()
    verdict = await stub.Validate(request(refused), timeout=2)
    assert [(e.path, e.value, e.message) for e in verdict.errors] == [
        ("spec.columns[1]", '"värchar"', "only text")
    ]
    for obj, code, message in [
        (
            json.dumps(widget("broken")).encode(),
            grpc.StatusCode.INTERNAL,
            "RuntimeError: the type catalogue is unreachable",
        ),
        (b"{", grpc.StatusCode.INVALID_ARGUMENT, "kplug: the object is not valid JSON: "),
        (b"[]", grpc.StatusCode.INVALID_ARGUMENT, "kplug: the object is not a JSON object"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Validate(request(obj), timeout=2)
        assert raised.value.code() == code
        assert message in (raised.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.Validate(request(ok, types_pb2.OPERATION_UNSPECIFIED), timeout=2)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "neither CREATE nor UPDATE" in (raised.value.details() or "")


async def test_default_patches_and_refuses_paths_outside_the_allowed_ones(
    tables: kplug.PluginServer, dial: DialFn
) -> None:
    stub = dial(tables.socket_path)

    def request(name: str) -> Any:
        return plugin_pb2.DefaultRequest(
            implementation="Tables",
            operation=types_pb2.OPERATION_CREATE,
            object=json.dumps(widget(name)).encode(),
        )

    defaults = await stub.Default(request("w"), timeout=2)
    assert json.loads(defaults.patch) == [{"op": "add", "path": "/spec/engine", "value": "InnoDB"}]
    assert list(defaults.warnings) == ["engine defaulted"]
    for name, message in [
        ("broken", "RuntimeError: defaults unavailable"),
        ("sneaky", 'add "/status/engine" is outside them'),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Default(request(name), timeout=2)
        assert raised.value.code() == grpc.StatusCode.INTERNAL
        assert message in (raised.value.details() or "")


async def test_hook_answers_and_a_raising_hook_is_failed(
    tables: kplug.PluginServer, dial: DialFn
) -> None:
    stub = dial(tables.socket_path)

    def request(obj: bytes) -> Any:
        return plugin_pb2.HookRequest(
            hook="audit",
            phase=types_pb2.HOOK_PHASE_AFTER_RECONCILE,
            implementation="Other",
            object=obj,
            outcome=types_pb2.OUTCOME_FAILED,
            message="locked",
        )

    answer = await stub.Hook(request(json.dumps(widget()).encode()), timeout=2)
    assert answer.outcome == types_pb2.OUTCOME_OK
    # A hook's status lands under status.hooks.<plugin>: the reserved keys are allowed.
    assert json.loads(answer.status) == {"implementation": "Other", "hook": "audit"}
    assert [e.message for e in answer.events] == ["after FAILED: locked"]
    answer = await stub.Hook(request(json.dumps(widget("broken")).encode()), timeout=2)
    assert (answer.outcome, answer.message) == (
        types_pb2.OUTCOME_FAILED,
        "RuntimeError: backup disk full",
    )
    answer = await stub.Hook(request(b"nope"), timeout=2)
    assert answer.outcome == types_pb2.OUTCOME_FAILED
    assert answer.message.startswith("kplug: the base object is not valid JSON: ")


async def test_a_plugin_without_the_handlers_answers_unimplemented(
    socket_dir: Path, dial: DialFn
) -> None:
    info = kplug.PluginInfo(name="plain", version="1", offers=[kplug.Offer(WIDGET, "P")])
    server = kplug.PluginServer(Plain(), info, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    try:
        stub = dial(server.socket_path)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Default(plugin_pb2.DefaultRequest(object=b"{}"), timeout=2)
        assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert raised.value.details() == "plugin plain does not implement Default"
    finally:
        await server.stop(grace=0)


@pytest.mark.parametrize(
    ("hooks", "policies", "message"),
    [
        (
            [kplug.Hook("Audit", WIDGET, kplug.Phase.AFTER_FINALIZE, kplug.Behaviour.ASYNC)],
            [],
            'hook "Audit": its name must be a DNS label',
        ),
        ([HOOKS[0], HOOKS[0]], [], 'hook "audit": it is declared twice'),
        (
            [
                kplug.Hook(
                    "a", kplug.GroupKind("g", ""), kplug.Phase.AFTER_FINALIZE, kplug.Behaviour.ASYNC
                )
            ],
            [],
            "it names no base kind",
        ),
        (
            [kplug.Hook("a", WIDGET, "BEFORE_RECONCILE", kplug.Behaviour.ASYNC)],  # type: ignore[arg-type]
            [],
            "its phase must be a kplug.Phase",
        ),
        (
            [kplug.Hook("a", WIDGET, kplug.Phase.AFTER_FINALIZE, 1)],  # type: ignore[arg-type]
            [],
            "its behaviour must be a kplug.Behaviour",
        ),
        (
            [
                kplug.Hook(f"h{i}", WIDGET, kplug.Phase.AFTER_FINALIZE, kplug.Behaviour.ASYNC)
                for i in range(17)
            ],
            [],
            "17 hooks are declared; at most 16",
        ),
        (
            [],
            [kplug.CallPolicy(kplug.Call.HOOK), kplug.CallPolicy(kplug.Call.HOOK)],
            "call policy for HOOK: declared twice",
        ),
        ([], [kplug.CallPolicy(kplug.Call.VALIDATE, 0)], "the deadline must be a positive"),
        ([], [kplug.CallPolicy(kplug.Call.VALIDATE, float("nan"))], "the deadline must be"),
        (
            [],
            [kplug.CallPolicy("VALIDATE")],  # type: ignore[arg-type]
            "the call must be a kplug.Call",
        ),
    ],
)
def test_declarations_are_checked_at_startup(
    hooks: list[kplug.Hook], policies: list[kplug.CallPolicy], message: str
) -> None:
    info = kplug.PluginInfo(
        name="tables",
        version="1",
        offers=[kplug.Offer(WIDGET, "T")],
        hooks=hooks,
        call_policies=policies,
    )
    with pytest.raises(kplug.StartupError, match="plugin tables cannot start") as raised:
        kplug.PluginServer(Tables(), info)
    assert message in str(raised.value)


def test_hooks_without_a_hook_method_are_a_startup_error() -> None:
    info = kplug.PluginInfo(name="plain", version="1", hooks=[HOOKS[0]])
    with pytest.raises(kplug.StartupError, match="declares hooks but does not implement"):
        kplug.PluginServer(Plain(), info)
    kplug.PluginServer(Tables(), info)  # a hook-only plugin needs no offer


def test_validation_is_bounded_like_every_sdk() -> None:
    verdict = kplug.Validation.allowed()
    for i in range(100):
        verdict.error(f"spec.x[{i}]", i, "bad")
    for i in range(20):
        verdict.warning(f"w{i} " + "x" * 300)
    verdict.error_at("spec.m", "y" * 2000)
    wire = verdict.to_proto()
    assert len(wire.errors) == 64
    assert wire.errors[-1].message == "and 38 more errors"
    assert len(wire.warnings) == 16
    assert wire.warnings[-1] == "and 5 more warnings"
    assert len(wire.warnings[0]) == 256
    assert wire.warnings[0].endswith("…")
    assert not verdict.is_allowed
    assert kplug.Validation.allowed().warning("fine").is_allowed
    assert len(kplug.Validation().error_at("a", "y" * 2000).to_proto().errors[0].message) == 1024
    # A value JSON cannot carry is sent as no value, as the Rust SDK does.
    assert kplug.Validation().error("a", {1, 2}, "m").errors[0].value == ""


@pytest.mark.parametrize("path", ["/status/x", "/metadata/name", "/specx", "spec/x", ""])
def test_defaults_outside_the_allowed_paths_raise(path: str) -> None:
    with pytest.raises(ValueError, match="a default may only change /spec"):
        kplug.Defaults.none().add("/spec/a", 1).add(path, 2)


def test_defaults_build_a_json_patch() -> None:
    defaults = (
        kplug.Defaults.none()
        .add("/spec", {"a": 1})
        .replace("/metadata/annotations/a~1b", "c")
        .remove("/metadata/labels/old")
    )
    assert json.loads(defaults.to_proto().patch) == [
        {"op": "add", "path": "/spec", "value": {"a": 1}},
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "c"},
        {"op": "remove", "path": "/metadata/labels/old"},
    ]
    assert kplug.Defaults.none().to_proto().patch == b""
    with pytest.raises(ValueError, match="at most 262144"):
        kplug.Defaults.none().add("/spec/blob", "x" * 262144).to_proto()


async def test_admission_request_from_json_for_plugin_tests() -> None:
    request = kplug.AdmissionRequest.from_json(
        "Tables", kplug.Operation.UPDATE, widget(columns=["int"]), widget()
    )
    verdict = await Tables().validate(request)
    assert verdict.to_proto().errors[0].value == '"int"'
    assert verdict.warnings == ["was generation 2"]
