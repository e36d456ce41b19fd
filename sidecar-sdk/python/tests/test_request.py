"""Decoding what the operator sends."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from kplug import InvalidRequestError, ObjectRef, Request

BASE: dict[str, Any] = {
    "apiVersion": "myorg.org/v1alpha1",
    "kind": "DatabaseTable",
    "metadata": {"name": "users", "namespace": "shop", "generation": 7},
    "spec": {"serverName": "main", "columns": [{"name": "id", "type": "int64"}]},
}
PG = {
    "apiVersion": "myorg.org/v1alpha1",
    "kind": "DatabaseTablePostgreSqlExtension",
    "metadata": {"name": "users-pg", "namespace": "shop"},
    "spec": {"partitionBy": "hash"},
}
PG2 = {**PG, "metadata": {"name": "users-pg-2", "namespace": "shop"}}


def decode(obj: object, *extensions: object) -> Request:
    return Request.decode(
        "PostgreSQL", json.dumps(obj).encode(), [json.dumps(e).encode() for e in extensions]
    )


def test_decodes_base_and_extensions() -> None:
    request = decode(BASE, PG, PG2)
    assert request.implementation == "PostgreSQL"
    assert request.object == BASE
    assert request.extensions == [PG, PG2]
    assert (request.name, request.namespace, request.generation) == ("users", "shop", 7)
    assert request.spec["serverName"] == "main"
    assert not request.deleting


def test_extension_lookup_by_kind() -> None:
    request = decode(BASE, PG, PG2)
    assert request.extension("DatabaseTablePostgreSqlExtension") == PG
    assert request.extensions_of("DatabaseTablePostgreSqlExtension") == [PG, PG2]
    assert request.extension("DatabaseTableMariaDbExtension") is None
    assert request.extensions_of("DatabaseTableMariaDbExtension") == []


def test_refs() -> None:
    request = decode(BASE, PG)
    assert request.ref() == ObjectRef("myorg.org/v1alpha1", "DatabaseTable", "shop", "users")
    assert request.ref(PG) == ObjectRef(
        "myorg.org/v1alpha1", "DatabaseTablePostgreSqlExtension", "shop", "users-pg"
    )
    assert str(request.ref()) == "DatabaseTable shop/users"


def test_cluster_scoped_and_sparse_objects() -> None:
    request = decode({"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "x"}})
    assert (request.namespace, request.generation, request.spec) == ("", 0, {})
    assert str(request.ref()) == "Thing x"


def test_deleting() -> None:
    deleted = {
        **BASE,
        "metadata": {**BASE["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
    }
    assert decode(deleted).deleting


def test_unicode_survives() -> None:
    obj = {**BASE, "spec": {"comment": "Grüße, 世界 🚀"}}
    request = Request.decode("x", json.dumps(obj, ensure_ascii=False).encode(), [])
    assert request.spec["comment"] == "Grüße, 世界 🚀"


@pytest.mark.parametrize(
    ("obj", "extensions", "message"),
    [
        (b"{not json", [], "kplug: the base object is not valid JSON"),
        (b"", [], "kplug: the base object is not valid JSON"),
        (b"\xff\xfe", [], "kplug: the base object is not valid JSON"),
        (b'{"a": NaN}', [], "kplug: the base object is not valid JSON"),
        (b"[1, 2]", [], "kplug: the base object is not a JSON object"),
        (b"{}", [b"{}", b"nope"], "kplug: extension #1 is not valid JSON"),
        (b"{}", [b'"text"'], "kplug: extension #0 is not a JSON object"),
    ],
)
def test_invalid_input_is_refused_with_a_clear_message(
    obj: bytes, extensions: list[bytes], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=r"^" + message):
        Request.decode("x", obj, extensions)


async def test_from_json_builds_a_request_for_a_plugins_own_tests() -> None:
    import kplug

    class Hello(kplug.Plugin):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            return kplug.Response.ok(status={"greeting": f"hello, {request.name}"})

    request = Request.from_json("PostgreSQL", BASE, [PG, json.dumps(PG2)])
    assert request == decode(BASE, PG, PG2)
    # A copy, as a real call would decode it: the handler cannot change the test's dicts.
    assert request.object is not BASE
    response = await Hello().reconcile(request)
    assert response.status == {"greeting": "hello, users"}


def test_from_json_refuses_what_the_operator_could_not_send() -> None:
    with pytest.raises(InvalidRequestError, match="the base object is not a JSON object"):
        Request.from_json("PostgreSQL", "[1, 2]")
    with pytest.raises(InvalidRequestError, match="extension #1 is not a JSON object"):
        Request.from_json("PostgreSQL", BASE, [PG, "null"])
    with pytest.raises(InvalidRequestError, match=r"extension #0 cannot be encoded as JSON"):
        Request.from_json("PostgreSQL", BASE, [{"spec": {"ratio": float("nan")}}])
    with pytest.raises(InvalidRequestError, match="the base object cannot be encoded as JSON"):
        Request.from_json("PostgreSQL", {"spec": {"when": object()}})


SETTINGS = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "users-settings", "namespace": "shop"},
    "data": {"greeting": "hello, wörld"},
}
SERVER = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "users-server", "namespace": "shop"},
    "status": {"readyReplicas": 2},
}


def test_observed_children_are_decoded_and_found_by_kind_and_name() -> None:
    request = Request.decode(
        "PostgreSQL",
        json.dumps(BASE).encode(),
        [json.dumps(PG).encode()],
        [json.dumps(SETTINGS, ensure_ascii=False).encode(), json.dumps(SERVER).encode()],
    )
    assert request.children == [SETTINGS, SERVER]
    assert request.extensions == [PG]  # children are not extensions, nor the reverse
    assert request.child("Deployment", "users-server") == SERVER
    assert request.child("Deployment", "users-settings") is None  # the name of another kind
    assert request.child("Service", "users-server") is None
    assert request.children_of("ConfigMap") == [SETTINGS]
    assert request.children_of("Secret") == []


def test_no_children_by_default() -> None:
    request = decode(BASE, PG)
    assert request.children == []
    assert request.child("ConfigMap", "users-settings") is None


@pytest.mark.parametrize(
    ("children", "message"),
    [
        ([b"{}", b"{oops"], "kplug: child #1 is not valid JSON: "),
        ([b'{"a": Infinity}'], "kplug: child #0 is not valid JSON: "),
        ([b"[1]"], "kplug: child #0 is not a JSON object"),
        ([b"{}", b"{}", b"null"], "kplug: child #2 is not a JSON object"),
    ],
)
def test_an_observed_child_that_is_not_an_object_is_refused(
    children: list[bytes], message: str
) -> None:
    with pytest.raises(InvalidRequestError, match=r"^" + re.escape(message)):
        Request.decode("x", b"{}", [], children)


def test_from_json_carries_observed_children() -> None:
    request = Request.from_json("PostgreSQL", BASE, [PG], children=[SETTINGS, json.dumps(SERVER)])
    assert request.children == [SETTINGS, SERVER]
    assert request.children[0] is not SETTINGS  # decoded afresh, as in a real call
    with pytest.raises(InvalidRequestError, match=r"^kplug: child #1 is not a JSON object"):
        Request.from_json("PostgreSQL", BASE, children=[SETTINGS, "[]"])
    with pytest.raises(InvalidRequestError, match=r"child #0 cannot be encoded as JSON"):
        Request.from_json("PostgreSQL", BASE, children=[{"data": {"ratio": float("nan")}}])
