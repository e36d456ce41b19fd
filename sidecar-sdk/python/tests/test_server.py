"""A plugin served in-process on a real socket, registered with a fake operator registry."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

import kplug
from kplug._proto import plugin_pb2, types_pb2

from .conftest import DialFn, FakeRegistry

OFFER = kplug.Offer(
    base=kplug.GroupKind("myorg.org", "DatabaseTable"),
    implementation="PostgreSQL",
    extensions=[kplug.GroupKind("myorg.org", "DatabaseTablePostgreSqlExtension")],
)
INFO = kplug.PluginInfo(
    name="postgresql", version="1.4.2", offers=[OFFER], description="Tables in PostgreSQL"
)
BASE = {
    "apiVersion": "myorg.org/v1alpha1",
    "kind": "DatabaseTable",
    "metadata": {"name": "users", "namespace": "shop", "generation": 2},
    "spec": {},
}


class Echo(kplug.Plugin):
    """Answers with what it was sent; switchable readiness."""

    def __init__(self) -> None:
        self.readiness: kplug.Readiness | bool = kplug.Readiness()

    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok(f"reconciled {request}", status={"spec": request.spec})

    async def ready(self) -> kplug.Readiness | bool:
        return self.readiness


class Finalizing(Echo):
    async def finalize(self, request: kplug.Request) -> kplug.Response:
        return kplug.Response.ok("dropped")


StartFn = Callable[..., Awaitable[kplug.PluginServer]]


@pytest.fixture
async def start(socket_dir: Path) -> AsyncIterator[StartFn]:
    """Start PluginServers in the socket dir; all are stopped after the test."""
    servers: list[kplug.PluginServer] = []

    async def start_server(
        plugin: kplug.Plugin | None = None,
        info: kplug.PluginInfo = INFO,
        heartbeat_interval: float = 0.1,
    ) -> kplug.PluginServer:
        server = kplug.PluginServer(
            plugin or Echo(), info, socket_dir=socket_dir, heartbeat_interval=heartbeat_interval
        )
        await server.start()
        servers.append(server)
        return server

    yield start_server
    for server in servers:
        await server.stop(grace=0)


def reconcile_request(spec: dict[str, object] | None = None) -> plugin_pb2.ReconcileRequest:
    obj = {**BASE, "spec": spec or {}}
    return plugin_pb2.ReconcileRequest(implementation="PostgreSQL", object=json.dumps(obj).encode())


async def test_heartbeat_describes_the_plugin(registry: FakeRegistry, start: StartFn) -> None:
    server = await start()
    await registry.wait_for("heartbeats")
    _, heartbeat = registry.heartbeats[0]
    assert heartbeat.name == "postgresql"
    assert heartbeat.version == "1.4.2"
    assert heartbeat.protocol == "kplug.v1"
    assert heartbeat.socket == "plugins/postgresql/plugin.sock"
    assert (registry.socket_dir / heartbeat.socket).is_socket()
    assert heartbeat.instance_id == server.instance_id
    assert uuid.UUID(heartbeat.instance_id).version == 4
    assert list(heartbeat.offers) == [OFFER.to_proto()]
    assert list(heartbeat.capabilities) == [types_pb2.CAPABILITY_RECONCILE]


async def test_get_info_agrees_with_the_heartbeat(registry: FakeRegistry, start: StartFn) -> None:
    await start(Finalizing())
    await registry.wait_for("heartbeats")
    _, heartbeat = registry.heartbeats[0]
    info = registry.handshakes[heartbeat.instance_id].info
    assert info is not None
    assert (info.name, info.version, info.protocol, info.description) == (
        "postgresql",
        "1.4.2",
        "kplug.v1",
        "Tables in PostgreSQL",
    )
    assert list(info.offers) == list(heartbeat.offers)
    assert list(info.capabilities) == list(heartbeat.capabilities)
    assert list(info.capabilities) == [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_FINALIZE,
    ]


@pytest.mark.parametrize(
    ("plugin", "finalize", "expected"),
    [
        (Echo(), None, [types_pb2.CAPABILITY_RECONCILE]),
        (Finalizing(), None, [types_pb2.CAPABILITY_RECONCILE, types_pb2.CAPABILITY_FINALIZE]),
        (Echo(), True, [types_pb2.CAPABILITY_RECONCILE, types_pb2.CAPABILITY_FINALIZE]),
        (Finalizing(), False, [types_pb2.CAPABILITY_RECONCILE]),
    ],
)
async def test_finalize_capability(
    plugin: kplug.Plugin,
    finalize: bool | None,
    expected: list[int],
    start: StartFn,
    dial: DialFn,
) -> None:
    info = kplug.PluginInfo(name="caps", version="1", offers=[OFFER], finalize=finalize)
    server = await start(plugin, info, heartbeat_interval=60)
    response = await dial(server.socket_path).GetInfo(plugin_pb2.GetInfoRequest(), timeout=2)
    assert list(response.capabilities) == expected


async def test_serves_before_the_first_heartbeat(registry: FakeRegistry, start: StartFn) -> None:
    # The fake registry dials back (GetInfo, Probe) inside the first heartbeat.
    server = await start()
    await registry.wait_for("heartbeats")
    handshake = registry.handshakes[server.instance_id]
    assert handshake.error is None
    assert handshake.probe is not None
    assert handshake.probe.ready


async def test_heartbeats_continue_at_the_interval(registry: FakeRegistry, start: StartFn) -> None:
    server = await start(heartbeat_interval=0.1)
    await registry.wait_for("heartbeats", 5, timeout=3)
    times = [t for t, _ in registry.heartbeats]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(0.08 < gap < 1.0 for gap in gaps), gaps
    assert {hb.instance_id for _, hb in registry.heartbeats} == {server.instance_id}
    assert len(registry.handshakes) == 1
    assert server.heartbeat.registered.is_set()


async def test_the_operators_interval_wins(registry: FakeRegistry, start: StartFn) -> None:
    registry.interval = 0.05
    server = await start(heartbeat_interval=30)
    await registry.wait_for("heartbeats", 4, timeout=2)
    assert server.heartbeat.interval == 0.05


async def test_refusal_is_logged_once_and_heartbeats_go_on(
    registry: FakeRegistry, start: StartFn, caplog: pytest.LogCaptureFixture
) -> None:
    registry.accepted, registry.reason = False, "protocol kplug.v1 not supported"
    server = await start(heartbeat_interval=0.05)
    await registry.wait_for("heartbeats", 4, timeout=3)
    refusals = [r for r in caplog.records if "refused the registration" in r.getMessage()]
    assert len(refusals) == 1
    assert refusals[0].levelno == logging.ERROR
    assert "protocol kplug.v1 not supported" in refusals[0].getMessage()
    assert not server.heartbeat.registered.is_set()


async def test_registers_once_the_operator_appears(socket_dir: Path, start: StartFn) -> None:
    server = await start(heartbeat_interval=1)
    await asyncio.sleep(0.3)  # the plugin started first, as sidecars often do
    registry = await FakeRegistry(socket_dir).start()
    try:
        await registry.wait_for("heartbeats", timeout=2)
        assert registry.handshakes[server.instance_id].error is None
    finally:
        await registry.stop()


async def test_reregisters_after_the_operator_restarts(
    registry: FakeRegistry, start: StartFn, socket_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kplug")
    server = await start(heartbeat_interval=1)
    await registry.wait_for("heartbeats")
    await registry.stop()
    registry.path.unlink(missing_ok=True)
    # Nobody answers for 3 s: the next heartbeat, 1 s later, fails, then the
    # plugin retries after 0.1, 0.2, 0.4, 0.8 and 1 s (capped at the interval).
    await asyncio.sleep(3.0)
    restarted = await FakeRegistry(socket_dir).start()
    try:
        await restarted.wait_for("heartbeats", timeout=3)
        _, heartbeat = restarted.heartbeats[0]
        assert heartbeat.instance_id == server.instance_id
        assert restarted.handshakes[server.instance_id].error is None  # handshakes again
        await restarted.wait_for("heartbeats", 2, timeout=3)  # and carries on
        # What was logged up to here: stopping this registry below is a
        # second loss, which a heartbeat in flight may log (it did, under a
        # CPU hog).
        records = list(caplog.records)
    finally:
        await restarted.stop()

    delays = [
        float(m.group(1))
        for r in records
        if (m := re.search(r"next try in ([\d.]+)s", r.getMessage()))
    ]
    # Each delay is up to 10 % shorter (jitter); the log rounds to milliseconds.
    assert len(delays) >= 5, delays
    for expected, delay in zip([0.1, 0.2, 0.4, 0.8, 1.0], delays, strict=False):
        assert expected * 0.9 - 0.001 <= delay <= expected + 0.001, delays
    lost = [r for r in records if "lost the operator" in r.getMessage()]
    registered = [r for r in records if "registered with the operator" in r.getMessage()]
    assert len(lost) == 1  # not one line per retry
    assert len(registered) == 2


async def test_probe_reflects_readiness(start: StartFn, dial: DialFn) -> None:
    plugin = Echo()
    server = await start(plugin, heartbeat_interval=60)
    stub = dial(server.socket_path)

    async def probe() -> tuple[bool, str]:
        response = await stub.Probe(plugin_pb2.ProbeRequest(), timeout=2)
        return response.ready, response.message

    assert await probe() == (True, "")
    plugin.readiness = kplug.Readiness(False, "database unreachable")
    assert await probe() == (False, "database unreachable")
    plugin.readiness = True
    assert await probe() == (True, "")
    plugin.readiness = False
    assert await probe() == (False, "")


async def test_probe_when_ready_raises(start: StartFn, dial: DialFn) -> None:
    class Broken(Echo):
        def ready(self) -> kplug.Readiness:  # type: ignore[override]  # sync is fine too
            raise ConnectionError("no route to database")

    server = await start(Broken(), heartbeat_interval=60)
    response = await dial(server.socket_path).Probe(plugin_pb2.ProbeRequest(), timeout=2)
    assert (response.ready, response.message) == (False, "ConnectionError: no route to database")


async def test_reconcile_round_trip(start: StartFn, dial: DialFn) -> None:
    server = await start(heartbeat_interval=60)
    stub = dial(server.socket_path)
    response = await stub.Reconcile(reconcile_request({"columns": ["id"]}), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_OK
    assert response.message == "reconciled DatabaseTable shop/users"
    assert json.loads(response.status) == {"spec": {"columns": ["id"]}}


async def test_validate_default_hook_and_mutate_are_unimplemented(
    start: StartFn, dial: DialFn
) -> None:
    # A plugin that does not override validate, default, hook or mutate
    # advertises none of their capabilities, declares nothing, and answers
    # UNIMPLEMENTED.
    server = await start(heartbeat_interval=60)
    stub = dial(server.socket_path)
    info = await stub.GetInfo(plugin_pb2.GetInfoRequest(), timeout=2)
    assert list(info.hooks) == []
    assert list(info.call_policies) == []
    assert list(info.mutations) == []
    obj = json.dumps({"apiVersion": "myorg.org/v1alpha1", "kind": "DatabaseTable"}).encode()
    create = types_pb2.OPERATION_CREATE
    calls = {
        "Validate": stub.Validate(
            plugin_pb2.ValidateRequest(operation=create, object=obj), timeout=2
        ),
        "Default": stub.Default(plugin_pb2.DefaultRequest(operation=create, object=obj), timeout=2),
        "Hook": stub.Hook(plugin_pb2.HookRequest(hook="h", object=obj), timeout=2),
        "Mutate": stub.Mutate(plugin_pb2.MutateRequest(object=obj), timeout=2),
    }
    for rpc, call in calls.items():
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call
        assert raised.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert raised.value.details() == f"plugin postgresql does not implement {rpc}"


CHILD_OFFER = kplug.Offer(
    base=kplug.GroupKind("myorg.org", "DatabaseTable"),
    implementation="PostgreSQL",
    children=[kplug.ChildKind("v1", "ConfigMap"), kplug.ChildKind("apps/v1", "Deployment")],
)


class Parent(Echo):
    """Desires one ConfigMap per table, and reports the Deployments it observes."""

    async def reconcile(self, request: kplug.Request) -> kplug.Response:
        ready = [d["metadata"]["name"] for d in request.children_of("Deployment")]
        return kplug.Response.ok(status={"deployments": ready}).child(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"{request.name}-settings"},
                "data": {"table": request.name},
            }
        )

    async def finalize(self, request: kplug.Request) -> kplug.Response:
        # Keeps the children while clean-up goes on; the empty set once it is done.
        if request.child("ConfigMap", "users-settings") is not None:
            return kplug.Response.retry(1, "draining").with_children(request.children)
        return kplug.Response.ok().with_children([])


async def test_child_kinds_advertise_children_in_heartbeat_and_get_info(
    registry: FakeRegistry, start: StartFn
) -> None:
    info = kplug.PluginInfo(name="parent", version="1", offers=[CHILD_OFFER])
    await start(Parent(), info)
    await registry.wait_for("heartbeats")
    _, heartbeat = registry.heartbeats[0]
    handshake = registry.handshakes[heartbeat.instance_id].info
    assert handshake is not None
    expected = [
        types_pb2.CAPABILITY_RECONCILE,
        types_pb2.CAPABILITY_FINALIZE,
        types_pb2.CAPABILITY_CHILDREN,
    ]
    assert list(heartbeat.capabilities) == expected
    assert list(handshake.capabilities) == expected
    for offers in (heartbeat.offers, handshake.offers):
        [offer] = offers
        assert [(c.group, c.version, c.kind) for c in offer.children] == [
            ("", "v1", "ConfigMap"),
            ("apps", "v1", "Deployment"),
        ]
    assert list(heartbeat.mutations) == []
    assert list(handshake.mutations) == []


async def test_children_over_the_wire(start: StartFn, dial: DialFn) -> None:
    info = kplug.PluginInfo(name="parent", version="1", offers=[CHILD_OFFER])
    server = await start(Parent(), info, heartbeat_interval=60)
    stub = dial(server.socket_path)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "db"}}
    request = reconcile_request()
    request.children.append(json.dumps(deployment).encode())
    response = await stub.Reconcile(request, timeout=2)
    assert response.outcome == types_pb2.OUTCOME_OK, response.message
    assert json.loads(response.status) == {"deployments": ["db"]}
    assert response.HasField("children")
    assert [json.loads(c) for c in response.children.objects] == [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "users-settings"},
            "data": {"table": "users"},
        }
    ]

    # Finalize: the observed children are decoded too, and an empty set is still sent.
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "users-settings"}}
    finalize = plugin_pb2.FinalizeRequest(
        implementation="PostgreSQL",
        object=json.dumps(BASE).encode(),
        children=[json.dumps(config_map).encode()],
    )
    draining = await stub.Finalize(finalize, timeout=2)
    assert draining.outcome == types_pb2.OUTCOME_RETRY
    assert [json.loads(c) for c in draining.children.objects] == [config_map]
    del finalize.children[:]
    done = await stub.Finalize(finalize, timeout=2)
    assert done.outcome == types_pb2.OUTCOME_OK
    assert done.HasField("children")
    assert list(done.children.objects) == []


async def test_an_answer_without_children_leaves_them(start: StartFn, dial: DialFn) -> None:
    server = await start(heartbeat_interval=60)
    response = await dial(server.socket_path).Reconcile(reconcile_request(), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_OK
    assert not response.HasField("children")


async def test_an_observed_child_that_is_not_an_object_becomes_failed(
    start: StartFn, dial: DialFn
) -> None:
    info = kplug.PluginInfo(name="parent", version="1", offers=[CHILD_OFFER])
    server = await start(Parent(), info, heartbeat_interval=60)
    stub = dial(server.socket_path)
    request = reconcile_request()
    request.children.extend([b"{}", b"[1]"])
    response = await stub.Reconcile(request, timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert response.message == "kplug: child #1 is not a JSON object"
    del request.children[:]
    request.children.append(b"{oops")
    response = await stub.Reconcile(request, timeout=2)
    assert response.message.startswith("kplug: child #0 is not valid JSON: ")
    assert not response.HasField("children")


async def test_a_child_that_is_not_an_object_becomes_failed(start: StartFn, dial: DialFn) -> None:
    class Confused(Echo):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            # What untyped data can do: mypy would catch it, the SDK must too.
            children: list[Any] = [request.object, ["not", "an", "object"]]
            return kplug.Response.ok().with_children(children)

    server = await start(Confused(), heartbeat_interval=60)
    response = await dial(server.socket_path).Reconcile(reconcile_request(), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert "a child must be a JSON object" in response.message
    assert not response.HasField("children")


async def test_handler_exception_becomes_failed(
    start: StartFn, dial: DialFn, caplog: pytest.LogCaptureFixture
) -> None:
    class Raising(Echo):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            raise KeyError("serverName")

    server = await start(Raising(), heartbeat_interval=60)
    response = await dial(server.socket_path).Reconcile(reconcile_request(), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert response.message == "KeyError: 'serverName'"
    [logged] = [r for r in caplog.records if r.exc_info]
    assert "reconcile of DatabaseTable shop/users failed" in logged.getMessage()
    # The plugin keeps serving.
    assert (await dial(server.socket_path).Probe(plugin_pb2.ProbeRequest(), timeout=2)).ready


async def test_wrong_return_type_becomes_failed(start: StartFn, dial: DialFn) -> None:
    class Forgetful(Echo):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            return None  # type: ignore[return-value]

    server = await start(Forgetful(), heartbeat_interval=60)
    response = await dial(server.socket_path).Reconcile(reconcile_request(), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert response.message == "TypeError: reconcile() must return a kplug.Response, got NoneType"


async def test_reserved_key_over_the_wire_becomes_failed(start: StartFn, dial: DialFn) -> None:
    class Greedy(Echo):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            return kplug.Response.ok(status={"observedGeneration": request.generation})

    server = await start(Greedy(), heartbeat_interval=60)
    response = await dial(server.socket_path).Reconcile(reconcile_request(), timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert response.message.startswith('ValueError: status key "observedGeneration" is reserved')
    assert response.status == b""


async def test_invalid_json_from_the_operator_becomes_failed(start: StartFn, dial: DialFn) -> None:
    server = await start(heartbeat_interval=60)
    request = plugin_pb2.ReconcileRequest(implementation="PostgreSQL", object=b"{oops")
    response = await dial(server.socket_path).Reconcile(request, timeout=2)
    assert response.outcome == types_pb2.OUTCOME_FAILED
    assert response.message.startswith("kplug: the base object is not valid JSON: ")


async def test_sync_handlers_run_in_threads(start: StartFn, dial: DialFn) -> None:
    loop_thread = threading.get_ident()

    class Blocking(kplug.Plugin):
        """A plugin written with a blocking driver: plain defs that sleep."""

        def reconcile(self, request: kplug.Request) -> kplug.Response:
            time.sleep(0.5)
            return kplug.Response.ok(status={"off_loop": threading.get_ident() != loop_thread})

        def finalize(self, request: kplug.Request) -> kplug.Response:
            return kplug.Response.retry(1, "still dropping")

        def ready(self) -> kplug.Readiness:
            return kplug.Readiness(False, "sync ready")

    server = await start(Blocking(), heartbeat_interval=60)
    stub = dial(server.socket_path)
    started = time.monotonic()
    responses = await asyncio.gather(
        *(stub.Reconcile(reconcile_request(), timeout=5) for _ in range(3)),
        stub.Probe(plugin_pb2.ProbeRequest(), timeout=5),
    )
    elapsed = time.monotonic() - started
    assert elapsed < 1.4, "sync handlers must not block the event loop or each other"
    for response in responses[:3]:
        assert json.loads(response.status) == {"off_loop": True}
    assert (responses[3].ready, responses[3].message) == (False, "sync ready")
    finalize = await stub.Finalize(
        plugin_pb2.FinalizeRequest(implementation="PostgreSQL", object=json.dumps(BASE).encode()),
        timeout=2,
    )
    assert (finalize.outcome, finalize.message, finalize.retry_after.seconds) == (
        types_pb2.OUTCOME_RETRY,
        "still dropping",
        1,
    )


async def test_an_awaitable_a_plain_handler_returns_is_awaited(
    start: StartFn, dial: DialFn
) -> None:
    class Deferring(kplug.Plugin):
        """Plain defs that hand back awaitables, as the handlers' types allow."""

        def reconcile(self, request: kplug.Request) -> Awaitable[kplug.Response]:
            return self.later(request.name)

        def finalize(self, request: kplug.Request) -> Awaitable[kplug.Response]:
            return asyncio.ensure_future(self.later("gone"), loop=loop)

        async def later(self, name: str) -> kplug.Response:
            return kplug.Response.ok(status={"awaited": name})

    loop = asyncio.get_running_loop()
    server = await start(Deferring(), heartbeat_interval=60)
    stub = dial(server.socket_path)
    for _ in range(2):  # the second time, with what the SDK remembers of the handler
        response = await stub.Reconcile(reconcile_request(), timeout=2)
        assert response.outcome == types_pb2.OUTCOME_OK, response.message
        assert json.loads(response.status) == {"awaited": "users"}
    finalize = await stub.Finalize(
        plugin_pb2.FinalizeRequest(implementation="PostgreSQL", object=json.dumps(BASE).encode()),
        timeout=2,
    )
    # Awaited, then refused for its status, which a Finalize answer cannot carry.
    assert finalize.outcome == types_pb2.OUTCOME_FAILED
    assert finalize.message.startswith("ValueError: a Finalize response carries no status")


async def test_default_finalize_is_done(start: StartFn, dial: DialFn) -> None:
    server = await start(heartbeat_interval=60)
    request = plugin_pb2.FinalizeRequest(
        implementation="PostgreSQL", object=json.dumps(BASE).encode()
    )
    response = await dial(server.socket_path).Finalize(request, timeout=2)
    assert response.outcome == types_pb2.OUTCOME_OK


async def test_stop_unregisters_and_removes_the_socket(
    registry: FakeRegistry, socket_dir: Path
) -> None:
    server = kplug.PluginServer(Echo(), INFO, socket_dir=socket_dir, heartbeat_interval=0.1)
    await server.start()
    await registry.wait_for("heartbeats")
    await server.stop()
    [(_, unregister)] = registry.unregisters
    assert (unregister.name, unregister.instance_id) == ("postgresql", server.instance_id)
    assert not server.socket_path.exists()
    count = len(registry.heartbeats)
    await asyncio.sleep(0.3)
    assert len(registry.heartbeats) == count, "no heartbeat after Unregister"


async def test_environment_configures_the_server(
    socket_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KPLUG_SOCKET_DIR", str(socket_dir))
    monkeypatch.setenv("KPLUG_HEARTBEAT_INTERVAL", "0.25")
    server = kplug.PluginServer(Echo(), INFO)
    assert server.socket_path == socket_dir / "plugins" / "postgresql" / "plugin.sock"
    assert server.heartbeat.interval == 0.25
    monkeypatch.delenv("KPLUG_SOCKET_DIR")
    monkeypatch.delenv("KPLUG_HEARTBEAT_INTERVAL")
    server = kplug.PluginServer(Echo(), INFO)
    assert server.socket_path == Path("/var/run/kplug/plugins/postgresql/plugin.sock")
    assert server.heartbeat.interval == 5


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_invalid_heartbeat_interval_is_a_startup_error(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KPLUG_HEARTBEAT_INTERVAL", value)
    with pytest.raises(kplug.StartupError, match="invalid KPLUG_HEARTBEAT_INTERVAL"):
        kplug.PluginServer(Echo(), INFO)


def test_plugin_without_offers_is_a_startup_error() -> None:
    with pytest.raises(kplug.StartupError, match="offers nothing"):
        kplug.PluginServer(Echo(), kplug.PluginInfo(name="x", version="1"))


def test_backoff_doubles_from_100ms_up_to_the_interval_with_jitter() -> None:
    from kplug.protocol import backoff_delay

    assert [backoff_delay(n, 1.0, 0.0) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert backoff_delay(1000, 5.0, 0.0) == 5.0  # no overflow after long outages
    assert backoff_delay(3, 5.0, 1.0) == pytest.approx(0.4 * 0.9)
