"""The shared SDK conformance cases (sidecar-sdk/conformance/cases.json), against the Python
conformance plugin run as a real plugin process on a real socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from kplug._proto import plugin_pb2, plugin_pb2_grpc, types_pb2

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
DOCUMENT = json.loads((CONFORMANCE / "cases.json").read_text())
CASES: list[dict[str, Any]] = DOCUMENT["cases"]


@pytest.fixture(scope="module")
def stub() -> Iterator[plugin_pb2_grpc.PluginStub]:
    """One conformance plugin process for all cases, which run in file order."""
    socket_dir = Path(tempfile.mkdtemp(prefix="kplug-conf-", dir="/tmp"))
    log_path = socket_dir / "plugin.log"
    env = {**os.environ, "KPLUG_SOCKET_DIR": str(socket_dir), "KPLUG_HEARTBEAT_INTERVAL": "60"}
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, str(CONFORMANCE / "python_plugin.py")], env=env, stderr=log
        )
    channel = grpc.insecure_channel(f"unix:{socket_dir}/plugins/conformance/plugin.sock")
    try:
        grpc.channel_ready_future(channel).result(timeout=15)
        yield plugin_pb2_grpc.PluginStub(channel)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0, log_path.read_text()
    finally:
        channel.close()
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(socket_dir, ignore_errors=True)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_case(case: dict[str, Any], stub: plugin_pb2_grpc.PluginStub) -> None:
    request, expected = case["request"], dict(case["expect"])
    rpc = request["rpc"]
    if rpc == "GetInfo":
        actual = info_json(stub.GetInfo(plugin_pb2.GetInfoRequest(), timeout=5))
    elif rpc == "Probe":
        probe = stub.Probe(plugin_pb2.ProbeRequest(), timeout=5)
        actual = {"ready": probe.ready, "message": probe.message}
    elif rpc in ("Validate", "Default"):
        actual = admission_json(stub, request)
    elif rpc == "Mutate":
        actual = mutate_json(stub, request)
    elif rpc == "Hook":
        wire_hook = plugin_pb2.HookRequest(
            hook=request["hook"],
            phase=f"HOOK_PHASE_{request['phase']}",
            implementation=request["implementation"],
            object=object_bytes(request),
            extensions=[encode(e) for e in request.get("extensions", [])],
            outcome=f"OUTCOME_{request['outcome']}",
            message=request["message"],
        )
        actual = response_json(stub.Hook(wire_hook, timeout=5))
    else:
        wire_type = (
            plugin_pb2.ReconcileRequest if rpc == "Reconcile" else plugin_pb2.FinalizeRequest
        )
        wire = wire_type(
            implementation=request["implementation"],
            object=object_bytes(request),
            extensions=[encode(e) for e in request.get("extensions", [])],
            children=[encode(c) for c in request.get("children", [])],
        )
        call = stub.Reconcile if rpc == "Reconcile" else stub.Finalize
        actual = response_json(call(wire, timeout=5))
    if rpc == "Reconcile":
        # A Reconcile case that says nothing of children expects none: the answer leaves them
        # as they are.
        expected.setdefault("children", None)
    if "message_contains" in expected:
        assert expected.pop("message_contains") in actual["message"]
        del actual["message"]
    assert actual == expected


def object_bytes(request: dict[str, Any]) -> bytes:
    return encode(request["object"]) if "object" in request else request["object_raw"].encode()


def admission_json(stub: plugin_pb2_grpc.PluginStub, request: dict[str, Any]) -> dict[str, Any]:
    """A Validate or Default answer in the cases' shape, or the gRPC error: {grpc_code, message}."""
    fields = {
        "implementation": request["implementation"],
        "operation": types_pb2.Operation.Value(f"OPERATION_{request['operation']}"),
        "object": object_bytes(request),
        "old_object": encode(request["old_object"]) if "old_object" in request else b"",
    }
    try:
        if request["rpc"] == "Validate":
            verdict = stub.Validate(plugin_pb2.ValidateRequest(**fields), timeout=5)
            return {
                "errors": [
                    {"path": e.path, "value": e.value, "message": e.message} for e in verdict.errors
                ],
                "warnings": list(verdict.warnings),
            }
        defaults = stub.Default(plugin_pb2.DefaultRequest(**fields), timeout=5)
        return {"patch": status_json(defaults.patch), "warnings": list(defaults.warnings)}
    except grpc.RpcError as e:
        return {"grpc_code": e.code().name, "message": e.details()}


def mutate_json(stub: plugin_pb2_grpc.PluginStub, request: dict[str, Any]) -> dict[str, Any]:
    """A Mutate answer in the cases' shape ({patch, warnings}), or the gRPC error."""
    wire = plugin_pb2.MutateRequest(
        implementation=request["implementation"],
        object=object_bytes(request),
        # Absent: empty bytes, which the protocol reads as none.
        live=encode(request["live"]) if "live" in request else b"",
        base=encode(request["base"]) if "base" in request else b"",
    )
    try:
        mutation = stub.Mutate(wire, timeout=5)
    except grpc.RpcError as e:
        return {"grpc_code": e.code().name, "message": e.details()}
    return {"patch": status_json(mutation.patch), "warnings": list(mutation.warnings)}


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def info_json(info: plugin_pb2.GetInfoResponse) -> dict[str, Any]:
    return {
        "name": info.name,
        "version": info.version,
        "protocol": info.protocol,
        "description": info.description,
        "offers": [
            {
                "base": {"group": o.base.group, "kind": o.base.kind},
                "implementation": o.implementation,
                "extensions": [{"group": e.group, "kind": e.kind} for e in o.extensions],
                "children": [
                    {"group": c.group, "version": c.version, "kind": c.kind} for c in o.children
                ],
            }
            for o in info.offers
        ],
        "capabilities": [
            types_pb2.Capability.Name(c).removeprefix("CAPABILITY_") for c in info.capabilities
        ],
        "hooks": [
            {
                "name": h.name,
                "base": {"group": h.base.group, "kind": h.base.kind},
                "phase": types_pb2.HookPhase.Name(h.phase).removeprefix("HOOK_PHASE_"),
                "behaviour": types_pb2.HookBehaviour.Name(h.behaviour).removeprefix(
                    "HOOK_BEHAVIOUR_"
                ),
                "order": h.order,
            }
            for h in info.hooks
        ],
        "call_policies": [
            {
                "call": types_pb2.Call.Name(p.call).removeprefix("CALL_"),
                "deadline_seconds": (
                    p.deadline.seconds + p.deadline.nanos / 1e9 if p.HasField("deadline") else None
                ),
                "failure_policy": types_pb2.FailurePolicy.Name(p.failure_policy).removeprefix(
                    "FAILURE_POLICY_"
                ),
            }
            for p in info.call_policies
        ],
        "mutations": [
            {"group": m.kind.group, "version": m.kind.version, "kind": m.kind.kind}
            for m in info.mutations
        ],
    }


def response_json(response: Message) -> dict[str, Any]:
    """The response in the cases' JSON shape (see sidecar-sdk/conformance/README.md)."""
    actual: dict[str, Any] = {
        "outcome": types_pb2.Outcome.Name(response.outcome).removeprefix("OUTCOME_"),  # type: ignore[attr-defined]
        "message": response.message,  # type: ignore[attr-defined]
        "retry_after_seconds": (
            response.retry_after.seconds + response.retry_after.nanos / 1e9  # type: ignore[attr-defined]
            if response.HasField("retry_after")
            else None
        ),
    }
    if isinstance(response, plugin_pb2.HookResponse):
        actual["status"] = status_json(response.status)
    if isinstance(response, plugin_pb2.ReconcileResponse):
        actual["status"] = status_json(response.status)
        actual["extension_statuses"] = [
            {"target": ref_json(s.target), "status": status_json(s.status)}
            for s in response.extension_statuses
        ]
        actual["conditions"] = [
            {
                "type": c.type,
                "status": types_pb2.ConditionStatus.Name(c.status)
                .removeprefix("CONDITION_STATUS_")
                .capitalize(),
                "reason": c.reason,
                "message": c.message,
            }
            for c in response.conditions
        ]
        actual["children"] = children_json(response)
    actual["events"] = [
        {
            "type": types_pb2.EventType.Name(e.type).removeprefix("EVENT_TYPE_").capitalize(),
            "reason": e.reason,
            "message": e.message,
            "regarding": ref_json(e.regarding) if e.HasField("regarding") else None,
        }
        for e in response.events  # type: ignore[attr-defined]
    ]
    return actual


def children_json(response: plugin_pb2.ReconcileResponse) -> list[Any] | None:
    """The desired children: None when the answer has no children message (which leaves them
    as they are), else each decoded, in order."""
    if not response.HasField("children"):
        return None
    return [json.loads(child) for child in response.children.objects]


def status_json(raw: bytes) -> Any:
    if not raw:
        return None
    value = json.loads(raw)
    # Compact: no whitespace outside strings, UTF-8 rather than \u escapes
    # (compared by length, since key order may differ between SDKs).
    compact = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert len(raw) == len(compact), f"status is not compact JSON: {raw[:200]!r}"
    return value


def ref_json(ref: types_pb2.ObjectRef) -> dict[str, str]:
    return {
        "apiVersion": ref.api_version,
        "kind": ref.kind,
        "namespace": ref.namespace,
        "name": ref.name,
    }
