"""Building responses: the wire form and the rules the operator enforces."""

from __future__ import annotations

import json

import pytest

from kplug import ObjectRef, Response
from kplug._proto import types_pb2

BASE = ObjectRef("myorg.org/v1alpha1", "DatabaseTable", "shop", "users")
EXT = ObjectRef("myorg.org/v1alpha1", "DatabaseTablePostgreSqlExtension", "shop", "users-pg")
EXT_OBJ = {
    "apiVersion": EXT.api_version,
    "kind": EXT.kind,
    "metadata": {"name": EXT.name, "namespace": EXT.namespace},
}


def test_ok_with_everything() -> None:
    wire = (
        Response.ok("created", status={"columns": 3})
        .with_status({"engine": "heap"})
        .extension_status(EXT_OBJ, {"partitions": 4})
        .extension_status(EXT, {"rows": [10, 12]})
        .condition("TableReady", True, "Created", "the table exists")
        .condition("Partitioned", None)
        .event("TableCreated", "created table users")
        .event("Slow", "took 3s", warning=True, regarding=EXT_OBJ)
        .to_reconcile_proto(BASE, [EXT])
    )
    assert wire.outcome == types_pb2.OUTCOME_OK
    assert wire.message == "created"
    assert not wire.HasField("retry_after")
    assert wire.status == b'{"columns":3,"engine":"heap"}'  # compact, merged in order
    [ext_status] = wire.extension_statuses
    assert ObjectRef.from_proto(ext_status.target) == EXT
    assert json.loads(ext_status.status) == {"partitions": 4, "rows": [10, 12]}
    assert [(c.type, c.status, c.reason, c.message) for c in wire.conditions] == [
        ("TableReady", types_pb2.CONDITION_STATUS_TRUE, "Created", "the table exists"),
        ("Partitioned", types_pb2.CONDITION_STATUS_UNKNOWN, "", ""),
    ]
    normal, warning = wire.events
    assert normal.type == types_pb2.EVENT_TYPE_NORMAL
    assert not normal.HasField("regarding")
    assert warning.type == types_pb2.EVENT_TYPE_WARNING
    assert ObjectRef.from_proto(warning.regarding) == EXT


def test_no_status_sends_no_bytes() -> None:
    assert Response.ok().to_reconcile_proto(BASE, []).status == b""


def test_unicode_is_sent_as_utf8_not_escaped() -> None:
    wire = Response.ok(status={"note": "Grüße 🚀"}).to_reconcile_proto(BASE, [])
    assert wire.status == '{"note":"Grüße 🚀"}'.encode()


def test_retry_delays() -> None:
    assert Response.retry(2.5).to_reconcile_proto(BASE, []).retry_after.ToMilliseconds() == 2500
    default = Response.retry(message="waiting").to_reconcile_proto(BASE, [])
    assert default.outcome == types_pb2.OUTCOME_RETRY
    assert default.retry_after.seconds == 10
    with pytest.raises(ValueError, match="must not be negative"):
        Response.retry(-1)


def test_failed() -> None:
    wire = Response.failed("no server").to_reconcile_proto(BASE, [])
    assert (wire.outcome, wire.message) == (types_pb2.OUTCOME_FAILED, "no server")


@pytest.mark.parametrize("key", ["implementation", "plugin", "observedGeneration", "conditions"])
def test_reserved_status_keys_are_refused_when_set(key: str) -> None:
    with pytest.raises(ValueError, match=f'status key "{key}" is reserved for the operator'):
        Response.ok(status={key: "x"})
    with pytest.raises(ValueError, match=f'status key "{key}" is reserved'):
        Response.ok().with_status({"fine": 1, key: "x"})


def test_reserved_status_keys_are_refused_when_built() -> None:
    response = Response.ok()
    response.status = {"observedGeneration": 3}  # bypassing the builder
    with pytest.raises(ValueError, match='status key "observedGeneration" is reserved'):
        response.to_reconcile_proto(BASE, [])


def test_the_base_is_no_extension_status_target() -> None:
    response = Response.ok().extension_status(BASE, {"phase": "x"})
    with pytest.raises(ValueError, match=r"targets the base object .* with_status"):
        response.to_reconcile_proto(BASE, [EXT])
    # Nor a way around the operator's keys: extension statuses may not set them either.
    with pytest.raises(ValueError, match='key "implementation" is reserved for the operator'):
        Response.ok().extension_status(BASE, {"implementation": "x"})


def test_targets_are_compared_as_the_operator_does() -> None:
    # The operator matches group, kind, namespace and name; the version may differ.
    other_version = ObjectRef("myorg.org/v1", EXT.kind, EXT.namespace, EXT.name)
    wire = (
        Response.ok()
        .extension_status(other_version, {"a": 1})
        .event("R", "m", regarding=ObjectRef("myorg.org/v2", BASE.kind, "shop", "users"))
        .to_reconcile_proto(BASE, [EXT])
    )
    assert len(wire.extension_statuses) == 1
    assert len(wire.events) == 1
    other_group = ObjectRef("other.org/v1alpha1", EXT.kind, EXT.namespace, EXT.name)
    with pytest.raises(ValueError, match="was not sent to this plugin"):
        Response.ok().extension_status(other_group, {"a": 1}).to_reconcile_proto(BASE, [EXT])


@pytest.mark.parametrize("type_", ["Ready", "PluginAvailable", "ExtensionsResolved", "Reconciled"])
def test_reserved_condition_types_are_refused(type_: str) -> None:
    with pytest.raises(ValueError, match=f'condition type "{type_}" is reserved'):
        Response.ok().condition(type_, True)


def test_targets_must_have_been_sent() -> None:
    other = ObjectRef("myorg.org/v1alpha1", "DatabaseTablePostgreSqlExtension", "shop", "other")
    with pytest.raises(ValueError, match=r"other .* was not sent to this plugin"):
        Response.ok().extension_status(other, {"a": 1}).to_reconcile_proto(BASE, [EXT])
    with pytest.raises(ValueError, match="was not sent to this plugin"):
        Response.ok().event("R", "m", regarding=other).to_reconcile_proto(BASE, [EXT])
    with pytest.raises(ValueError, match="target is None"):
        Response.ok().extension_status(None, {"a": 1})


def test_status_must_be_json() -> None:
    response = Response.ok(status={"when": object()})
    with pytest.raises(ValueError, match="status cannot be encoded as JSON"):
        response.to_reconcile_proto(BASE, [])
    with pytest.raises(ValueError, match="cannot be encoded as JSON"):
        Response.ok(status={"x": float("nan")}).to_reconcile_proto(BASE, [])


def test_finalize_carries_outcome_and_events_only() -> None:
    wire = Response.retry(3, "dropping").event("Dropping", "dropping").to_finalize_proto(BASE, [])
    assert (wire.outcome, wire.message, wire.retry_after.seconds) == (
        types_pb2.OUTCOME_RETRY,
        "dropping",
        3,
    )
    assert [e.reason for e in wire.events] == ["Dropping"]
    assert not wire.HasField("children")
    with pytest.raises(ValueError, match="a Finalize response carries no status"):
        Response.ok(status={"a": 1}).to_finalize_proto(BASE, [])


CONFIG_MAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "users-settings"},
    "data": {"greeting": "hello, wörld"},
}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "users"}}


def test_children_are_sent_only_when_set() -> None:
    # Unset leaves the children as they are: no children message at all.
    untouched = Response.ok()
    assert untouched.children is None
    assert not untouched.to_reconcile_proto(BASE, []).HasField("children")
    # Set, even empty, is the whole set: the message is there, with no objects.
    empty = Response.ok().with_children([]).to_reconcile_proto(BASE, [])
    assert empty.HasField("children")
    assert list(empty.children.objects) == []


def test_children_are_added_in_order_as_compact_json() -> None:
    response = Response.retry(5, "waiting for the Job").child(CONFIG_MAP).child(DEPLOYMENT)
    assert response.children == [CONFIG_MAP, DEPLOYMENT]
    wire = response.to_reconcile_proto(BASE, [])
    assert wire.outcome == types_pb2.OUTCOME_RETRY  # applied on RETRY too: the operator decides
    assert (
        wire.children.objects[0]
        == json.dumps(CONFIG_MAP, separators=(",", ":"), ensure_ascii=False).encode()
    )
    assert [json.loads(c) for c in wire.children.objects] == [CONFIG_MAP, DEPLOYMENT]


def test_with_children_replaces_the_set_and_copies_it() -> None:
    source = [CONFIG_MAP]
    response = Response.ok().child(DEPLOYMENT).with_children(source)
    assert response.children == [CONFIG_MAP]
    source.append(DEPLOYMENT)  # a later change to the caller's list is not sent
    assert response.children is not None
    response.children[0]["data"] = {}
    assert CONFIG_MAP["data"] == {"greeting": "hello, wörld"}  # nor is the caller's dict changed
    assert response.child(DEPLOYMENT).children == [{**CONFIG_MAP, "data": {}}, DEPLOYMENT]


@pytest.mark.parametrize("child", [42, ["a"], "ConfigMap", None])
def test_a_child_that_is_not_an_object_is_refused(child: object) -> None:
    with pytest.raises(ValueError, match="a child must be a JSON object"):
        Response.ok().child(child)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a child must be a JSON object"):
        Response.ok().with_children([CONFIG_MAP, child])  # type: ignore[list-item]


def test_a_child_must_be_json() -> None:
    response = Response.ok().child({**CONFIG_MAP, "data": {"ratio": float("nan")}})
    with pytest.raises(ValueError, match="child #0 cannot be encoded as JSON"):
        response.to_reconcile_proto(BASE, [])


def test_finalize_carries_children() -> None:
    wire = Response.retry(1, "draining").child(CONFIG_MAP).to_finalize_proto(BASE, [])
    assert [json.loads(c) for c in wire.children.objects] == [CONFIG_MAP]
    done = Response.ok().with_children([]).to_finalize_proto(BASE, [])
    assert done.HasField("children")
    assert list(done.children.objects) == []
