"""Mutate: the Mutation builder and its path rule, MutateCall, the MUTATE capability and the
declared kinds (GetInfo and heartbeats alike, checked at start-up), and every answer, error and
bad input over a real socket."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import kplug
from kplug._proto import plugin_pb2, types_pb2
from kplug.protocol import MAX_PATCH_BYTES, mutation_path_allowed
from kplug.service import capabilities

from .conftest import DialFn, FakeRegistry

DEPLOYMENT = kplug.MutationKind("apps/v1", "Deployment")
SIDECAR = {"name": "backup", "image": "backup:1"}


def deployment(name: str = "db", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns", "labels": {"kplug.io/plugin": "db"}},
        "spec": {"template": {"spec": {"containers": [{"name": "db"}]}}, **spec},
    }


class Plain(kplug.Plugin):
    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok()


class Backup(Plain):
    """Adds a sidecar; the object's name picks a mistake instead."""

    def mutate(self, call: kplug.MutateCall) -> kplug.Mutation:  # a plain def: a worker thread
        if call.name == "broken":
            raise RuntimeError("backup store unreachable")
        if call.name == "sneaky":
            return kplug.Mutation.none().add("/metadata/labels/kplug.io~1plugin", "backup")
        if call.name == "confused":
            return kplug.Defaults.none()  # type: ignore[return-value]
        live = "none" if call.live is None else call.live["metadata"]["name"]
        base = "none" if call.base is None else call.base["kind"]
        return (
            kplug.Mutation.none()
            .add("/spec/template/spec/containers/-", SIDECAR)
            .warning(f"{call.implementation} {call} live={live} base={base}")
        )


INFO = kplug.PluginInfo(name="backup", version="1.0.0", mutations=[DEPLOYMENT])


@pytest.fixture
async def backup(socket_dir: Path, registry: FakeRegistry) -> AsyncIterator[kplug.PluginServer]:
    server = kplug.PluginServer(Backup(), INFO, socket_dir=socket_dir, heartbeat_interval=60)
    await server.start()
    yield server
    await server.stop(grace=0)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/spec", True),
        ("/spec/template/spec/containers/-", True),
        ("/metadata/labels/backup", True),
        ("/metadata/annotations/backup.example~1enabled", True),
        # kplug.io/ keys are the operator's; another domain ending in kplug.io is not.
        ("/metadata/labels/kplug.io~1plugin", False),
        ("/metadata/annotations/kplug.io~1intent-hash", False),
        ("/metadata/labels/sub.kplug.io~1x", True),
        # The whole map holds kplug's own labels.
        ("/metadata/labels", False),
        ("/metadata/annotations", False),
        ("/metadata/name", False),
        ("/metadata", False),
        ("/status/ready", False),
        ("/specification", False),
        ("", False),
    ],
)
def test_the_path_rule_is_the_operators(path: str, allowed: bool) -> None:
    assert mutation_path_allowed(path) is allowed
    if allowed:
        kplug.Mutation.none().add(path, 1)
        return
    with pytest.raises(ValueError, match="outside them") as raised:
        kplug.Mutation.none().remove(path)
    assert str(raised.value) == (
        "a mutation may only change /spec and single labels and annotations, not kplug.io/ "
        f"ones; remove {json.dumps(path)} is outside them"
    )


def test_a_mutation_is_a_compact_json_patch_in_order() -> None:
    mutation = (
        kplug.Mutation.none()
        .add("/spec/template/spec/containers/-", SIDECAR)
        .replace("/spec/replicas", 2)
        .remove("/metadata/annotations/old")
        .add("/metadata/labels/backup", "jä")
        .warning("a sidecar was added")
    )
    assert not mutation.is_empty
    wire = mutation.to_proto()
    assert (
        wire.patch
        == json.dumps(
            [
                {"op": "add", "path": "/spec/template/spec/containers/-", "value": SIDECAR},
                {"op": "replace", "path": "/spec/replicas", "value": 2},
                {"op": "remove", "path": "/metadata/annotations/old"},
                {"op": "add", "path": "/metadata/labels/backup", "value": "jä"},
            ],
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )
    assert list(wire.warnings) == ["a sidecar was added"]
    # No operation: no patch at all, which the operator reads as "apply as it is".
    nothing = kplug.Mutation.none()
    assert nothing.is_empty
    assert nothing.to_proto().patch == b""


def test_mistakes_in_a_mutation_raise() -> None:
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        kplug.Mutation.none().add("/spec/x", {1, 2})
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        kplug.Mutation.none().add("/spec/x", float("nan"))
    huge = kplug.Mutation.none().add("/spec/blob", "x" * MAX_PATCH_BYTES)
    with pytest.raises(ValueError, match=f"at most {MAX_PATCH_BYTES} are accepted"):
        huge.to_proto()


def test_warnings_are_bounded_like_admission_warnings() -> None:
    mutation = kplug.Mutation.none()
    for i in range(20):
        mutation.warning(f"w{i} " + "x" * 300)
    warnings = list(mutation.to_proto().warnings)
    assert len(warnings) == 16
    assert warnings[-1] == "and 5 more warnings"
    assert all(len(w) == 256 and w.endswith("…") for w in warnings[:-1])


def test_mutate_call_from_json_for_plugin_tests() -> None:
    call = kplug.MutateCall.from_json(
        "Db", deployment(), live=json.dumps(deployment()), base={"kind": "Database"}
    )
    assert (call.implementation, call.kind, call.name, call.namespace) == (
        "Db",
        "Deployment",
        "db",
        "ns",
    )
    assert call.metadata["labels"] == {"kplug.io/plugin": "db"}
    assert call.spec["template"]["spec"]["containers"] == [{"name": "db"}]
    assert call.live == deployment()
    assert call.base == {"kind": "Database"}
    assert str(call) == "Deployment ns/db"
    bare = kplug.MutateCall.from_json("", {"kind": "Deployment", "metadata": {"name": "own"}})
    assert (bare.live, bare.base, str(bare)) == (None, None, "Deployment own")
    for field, message in [
        ("object", "kplug: the object is not a JSON object"),
        ("live", "kplug: the live object is not a JSON object"),
        ("base", "kplug: the base object is not a JSON object"),
    ]:
        objects: dict[str, Any] = {"object": deployment(), field: "[1]"}
        with pytest.raises(kplug.InvalidRequestError) as raised:
            kplug.MutateCall.from_json("Db", **objects)
        assert str(raised.value) == message


def test_mutate_advertises_the_capability_last() -> None:
    info = kplug.PluginInfo(
        name="p",
        version="1",
        offers=[
            kplug.Offer(
                kplug.GroupKind("example.com", "Widget"),
                "P",
                children=[kplug.ChildKind("apps/v1", "Deployment")],
            )
        ],
        mutations=[DEPLOYMENT],
    )
    assert capabilities(Plain(), info) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_CHILDREN,
    ]
    assert capabilities(Backup(), info) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_CHILDREN,
        types_pb2.CAPABILITY_MUTATE,
    ]


def test_mutation_kinds_by_api_version() -> None:
    kinds = [DEPLOYMENT, kplug.MutationKind("v1", "ConfigMap")]
    info = kplug.PluginInfo(name="p", version="1", mutations=kinds)
    assert [(m.kind.group, m.kind.version, m.kind.kind) for m in info.mutations_proto()] == [
        ("apps", "v1", "Deployment"),
        ("", "v1", "ConfigMap"),
    ]


@pytest.mark.parametrize(
    ("plugin", "mutations", "message"),
    [
        (Plain(), [DEPLOYMENT], "it declares mutations but does not implement Plugin.mutate"),
        (Backup(), [], "it implements Plugin.mutate but declares no kind to mutate"),
        (Backup(), [kplug.MutationKind("apps/v1", "")], "needs an apiVersion"),
        (Backup(), [kplug.MutationKind("apps/", "Deployment")], "needs an apiVersion"),
        (Backup(), [kplug.ChildKind("apps/v1", "Deployment")], "is not a kplug.MutationKind"),
        (
            Backup(),
            [kplug.MutationKind("v1", f"Kind{i}") for i in range(17)],
            "17 mutations are declared; at most 16",
        ),
    ],
)
def test_mutations_are_checked_at_startup(
    plugin: kplug.Plugin, mutations: list[kplug.MutationKind], message: str
) -> None:
    # An offer, so that a plugin without mutations still offers something.
    offer = kplug.Offer(kplug.GroupKind("example.com", "Widget"), "W")
    info = kplug.PluginInfo(name="backup", version="1", offers=[offer], mutations=mutations)
    with pytest.raises(kplug.StartupError, match="plugin backup cannot start") as raised:
        kplug.PluginServer(plugin, info)
    assert message in str(raised.value)


def test_a_mutate_only_plugin_needs_no_offer() -> None:
    kplug.PluginServer(Backup(), INFO)
    with pytest.raises(kplug.StartupError, match="offers nothing"):
        kplug.PluginServer(Backup(), kplug.PluginInfo(name="backup", version="1"))


def test_a_call_policy_for_mutate() -> None:
    policy = kplug.CallPolicy(kplug.Call.MUTATE, deadline_seconds=3).to_proto()
    assert (policy.call, policy.deadline.seconds) == (types_pb2.CALL_MUTATE, 3)


async def test_getinfo_and_heartbeats_declare_the_same_mutations(
    backup: kplug.PluginServer, registry: FakeRegistry
) -> None:
    await registry.wait_for("heartbeats")
    heartbeat = registry.heartbeats[0][1]
    handshake = registry.handshakes[heartbeat.instance_id]
    assert handshake.info is not None, handshake.error
    for declared in (heartbeat, handshake.info):
        assert list(declared.capabilities) == [
            types_pb2.CAPABILITY_RECONCILE,
            types_pb2.CAPABILITY_MUTATE,
        ]
        assert [(m.kind.group, m.kind.version, m.kind.kind) for m in declared.mutations] == [
            ("apps", "v1", "Deployment")
        ]


async def test_mutate_over_the_wire(backup: kplug.PluginServer, dial: DialFn) -> None:
    stub = dial(backup.socket_path)

    def request(name: str, **objects: Any) -> plugin_pb2.MutateRequest:
        return plugin_pb2.MutateRequest(
            implementation="Db",
            object=json.dumps(deployment(name)).encode(),
            **{k: json.dumps(v).encode() for k, v in objects.items()},
        )

    answer = await stub.Mutate(request("db", live=deployment("db"), base={"kind": "Db"}), timeout=2)
    assert json.loads(answer.patch) == [
        {"op": "add", "path": "/spec/template/spec/containers/-", "value": SIDECAR}
    ]
    assert list(answer.warnings) == ["Db Deployment ns/db live=db base=Db"]
    answer = await stub.Mutate(request("new"), timeout=2)
    assert list(answer.warnings) == ["Db Deployment ns/new live=none base=none"]
    for name, message in [
        ("broken", "RuntimeError: backup store unreachable"),
        ("sneaky", "ValueError: a mutation may only change /spec and single labels and annot"),
        ("confused", "TypeError: mutate() must return a kplug.Mutation, got Defaults"),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Mutate(request(name), timeout=2)
        assert raised.value.code() == grpc.StatusCode.INTERNAL
        assert (raised.value.details() or "").startswith(message)
    for wire, message in [
        (plugin_pb2.MutateRequest(object=b"{"), "kplug: the object is not valid JSON: "),
        (plugin_pb2.MutateRequest(object=b"[1]"), "kplug: the object is not a JSON object"),
        (
            plugin_pb2.MutateRequest(object=b"{}", live=b"1"),
            "kplug: the live object is not a JSON object",
        ),
        (
            plugin_pb2.MutateRequest(object=b"{}", base=b"null"),
            "kplug: the base object is not a JSON object",
        ),
    ]:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.Mutate(wire, timeout=2)
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (raised.value.details() or "").startswith(message)
