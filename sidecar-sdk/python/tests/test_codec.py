"""kplug.codec against the standard json module, which the SDK used before orjson: every value it
encoded encodes to the same JSON, everything it refused is refused with its message, and the
operator's objects decode as they always did (and a few things no operator sends are refused)."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
import random
import uuid
from collections import OrderedDict
from typing import Any

import pytest

from kplug import InvalidRequestError, Request, Response, codec
from kplug.request import ObjectRef

BASE = ObjectRef("example.com/v1", "Greeting", "default", "world")


def standard(value: Any) -> bytes:
    """What the SDK sent before kplug.codec (response.encode_json then)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def status_bytes(status: Any) -> bytes:
    """The status on the wire, through the Response builder as a plugin sets it."""
    return Response.ok(status={"x": status}).to_reconcile_proto(BASE, []).status


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value as a plugin builds a status: strings of every kind of character, integers
    and floats across their range, nulls, nesting."""
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.randint(-(2**63), 2**64 - 1) if rng.random() < 0.5 else rng.randint(-99, 99)
    if kind == 3:
        return rng.choice([0.0, -0.0, 0.1, 1e16, 1e-7, 2.5e-5, 1e300, 5e-324]) * rng.choice([1, -1])
    if kind == 4:
        value = math.ldexp(rng.random(), rng.randint(-1074, 1023))
        return value if rng.random() < 0.5 else rng.uniform(-1e6, 1e6)
    if kind == 5:
        alphabet = 'ab "\\/\n\t\x00\x1f\x7fé€😀\u2028\ufeff'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind in (6, 7):
        return {
            random_value(rng, 9) if rng.random() < 0.1 else f"k{i}é": random_value(rng, depth + 1)
            for i in range(rng.randrange(5))
        }
    return [random_value(rng, depth + 1) for _ in range(rng.randrange(5))]


def same(a: Any, b: Any) -> bool:
    """Equal JSON values of equal types, floats to the bit (``==`` takes 1 for 1.0, 0.0 for
    -0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return bool(a.hex() == b.hex())
    return bool(a == b)


def test_what_the_standard_module_encoded_encodes_to_the_same_json() -> None:
    rng = random.Random(20251128)
    written_otherwise = 0
    for _ in range(3000):
        value = {"s": random_value(rng)}
        expected = standard(value)
        encoded = codec.dumps(value)
        assert same(json.loads(encoded), json.loads(expected)), (value, encoded, expected)
        if encoded != expected:
            # Only a float may be written otherwise (orjson's 1e-7 for json's 1e-07): the same
            # number, and with floats written as json writes them, the same bytes.
            written_otherwise += 1
            assert standard(json.loads(encoded)) == expected, (encoded, expected)
    assert written_otherwise, "the corpus must hold the floats orjson writes otherwise"


def test_non_string_keys_are_written_as_the_standard_module_writes_them() -> None:
    value = {1: "int", 2.5: "float", False: "bool", None: "none", "s": {3: [4]}}
    assert codec.dumps(value) == standard(value)
    assert (
        codec.dumps(value)
        == b'{"1":"int","2.5":"float","false":"bool","null":"none","s":{"3":[4]}}'
    )


def test_integers_beyond_64_bits_are_written_exactly() -> None:
    for n in (2**64, -(2**63) - 1, 10**30, -(10**40)):
        assert codec.dumps({"n": n}) == standard({"n": n}) == f'{{"n":{n}}}'.encode()
    # The edges of orjson's own range: written by it, the same.
    for n in (2**64 - 1, -(2**63)):
        assert codec.dumps({"n": n}) == f'{{"n":{n}}}'.encode()


def standard_error(value: Any) -> str:
    """The message of the standard module refusing ``value``."""
    try:
        standard(value)
    except (TypeError, ValueError) as e:
        return str(e)
    raise AssertionError(f"the standard module encoded {value!r}")


def test_nan_and_infinities_are_refused_even_next_to_null() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        for status in ({"v": bad}, {"v": [None, {"w": bad}]}, {"n": None, "v": bad}):
            with pytest.raises(ValueError, match=r"^Out of range float values are not JSON") as e:
                codec.dumps(status)
            assert str(e.value) == standard_error(status)
            with pytest.raises(ValueError, match=r"^status cannot be encoded as JSON: Out of r"):
                Response.ok(status=status).to_reconcile_proto(BASE, [])


def test_a_null_the_plugin_sets_is_sent() -> None:
    assert codec.dumps({"a": None, "b": [None], "c": "null"}) == b'{"a":null,"b":[null],"c":"null"}'


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            datetime.datetime(2025, 1, 2, 3, 4, 5),
            "Object of type datetime is not JSON serializable",
        ),
        (datetime.date(2025, 1, 2), "Object of type date is not JSON serializable"),
        (Point(1), "Object of type Point is not JSON serializable"),
        ({1, 2}, "Object of type set is not JSON serializable"),
        (b"bytes", "Object of type bytes is not JSON serializable"),
        (object(), "Object of type object is not JSON serializable"),
        ("\ud800", "surrogates not allowed"),
    ],
)
def test_what_the_standard_module_refused_is_refused_with_its_message(
    value: Any, message: str
) -> None:
    assert message in standard_error({"x": value})
    with pytest.raises((TypeError, ValueError), match=message):
        codec.dumps({"x": value})
    with pytest.raises(ValueError, match=f"^status cannot be encoded as JSON: .*{message}"):
        status_bytes(value)


def test_a_circular_status_is_refused_as_before() -> None:
    status: dict[str, Any] = {}
    status["self"] = status
    with pytest.raises(ValueError, match=r"^Circular reference detected$"):
        codec.dumps(status)


def test_deep_nesting_is_written_as_before() -> None:
    # orjson stops at 254 levels; the standard module goes on.
    deep: Any = "bottom"
    for _ in range(400):
        deep = [deep]
    assert codec.dumps({"d": deep}) == standard({"d": deep})


class Color(enum.IntEnum):
    RED = 1


class Phase(enum.StrEnum):
    READY = "Ready"


class Label(str):
    pass


class Redacted(dict[str, Any]):
    """A dict that hides a key's value from its items(), which the standard module reads."""

    def items(self) -> Any:
        return [(k, "***" if k == "password" else v) for k, v in super().items()]


def test_subclasses_of_json_types_are_written_through_their_methods() -> None:
    ordered = OrderedDict([("a", 1), ("b", 2)])
    ordered.move_to_end("a")  # the order OrderedDict iterates in, not the dict's own
    value = {
        "o": ordered,
        "c": Color.RED,
        "p": Phase.READY,
        "l": Label("x"),
        "r": Redacted(password="hunter2"),
    }
    assert codec.dumps(value) == standard(value)
    assert (
        codec.dumps(value)
        == b'{"o":{"b":2,"a":1},"c":1,"p":"Ready","l":"x","r":{"password":"***"}}'
    )


class Plain(enum.Enum):
    ON = "on"


def test_an_enum_or_uuid_is_written_as_orjson_writes_it() -> None:
    # The one widening: the standard module refused these, orjson encodes them and cannot be
    # told not to; the fallback path (a non-str key) encodes them the same way.
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    want = b'{"e":"on","u":"12345678-1234-5678-1234-567812345678"}'
    assert codec.dumps({"e": Plain.ON, "u": ident}) == want
    assert codec.dumps({1: {"e": Plain.ON, "u": ident}}) == b'{"1":' + want + b"}"
    with_null = {"e": Plain.ON, "u": ident, "n": None}
    assert json.loads(codec.dumps(with_null)) == {**json.loads(want), "n": None}


def test_children_and_extension_statuses_use_the_same_encoding() -> None:
    ext = ObjectRef("example.com/v1", "GreetingExtension", "default", "world")
    status: dict[Any, Any] = {"n": 2**70, 1: "one"}
    wire = (
        Response.ok()
        .extension_status(ext, status)
        .child({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "é"}})
        .to_reconcile_proto(BASE, [ext])
    )
    assert wire.extension_statuses[0].status == b'{"n":1180591620717411303424,"1":"one"}'
    assert list(wire.children.objects) == [
        '{"apiVersion":"v1","kind":"ConfigMap","data":{"x":"é"}}'.encode()
    ]
    with pytest.raises(ValueError, match=r"^child #0 cannot be encoded as JSON: Out of range"):
        Response.ok().child({"kind": "X", "v": math.nan}).to_reconcile_proto(BASE, [])


def decoded(data: bytes) -> Any:
    return Request.decode("x", data, []).object


def test_the_operators_objects_decode_as_with_the_standard_module() -> None:
    # What serde_json writes: every integer in [i64 min, u64 max], floats, escapes, UTF-8.
    data = (
        '{"a":18446744073709551615,"b":-9223372036854775808,"c":1.5e-7,"d":1e300,'
        '"e":"\\u00e9\\ud83d\\ude00é\\n","f":[true,false,null],"g":{},"h":-0.0,"i":0}'
    ).encode()
    assert decoded(data) == json.loads(data)
    assert decoded(b'{"a":1,"a":2}') == {"a": 2}  # the last of a duplicate key, as json


def test_an_integer_beyond_64_bits_decodes_to_a_float_as_the_operator_reads_it() -> None:
    # serde_json (the operator) holds such a number as an f64 and sends it as one; the SDK reads
    # the same number, where the standard module read an exact int.
    value = decoded(b'{"n":123456789012345678901234567890}')["n"]
    assert isinstance(value, float)
    assert value == 1.2345678901234568e29


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"a":NaN}', id="NaN"),
        pytest.param(b'{"a":Infinity}', id="Infinity"),
        pytest.param(b'{"a":-Infinity}', id="-Infinity"),
        pytest.param(b'{"a":1e400}', id="a number out of range"),
        pytest.param(b'{"a":"\\ud800"}', id="a lone surrogate"),
        pytest.param(b'\xef\xbb\xbf{"a":1}', id="a byte order mark"),
        pytest.param('{"a":1}'.encode("utf-16"), id="UTF-16"),
        pytest.param(b'{"a":"\xff"}', id="invalid UTF-8"),
        pytest.param(b"[" * 2000 + b"]" * 2000, id="nesting deeper than 1024"),
    ],
)
def test_what_no_operator_sends_is_refused_as_invalid_json(data: bytes) -> None:
    # serde_json (the operator) refuses each of these too, so none is ever sent; the SDK answers
    # OUTCOME_FAILED with the message, where the standard module accepted the first ones.
    with pytest.raises(InvalidRequestError, match=r"^kplug: the base object is not valid JSON: "):
        decoded(data)


def test_a_request_for_a_plugins_own_tests_decodes_as_a_real_call() -> None:
    request = Request.from_json("x", {"spec": {"big": 2**70, "ratio": 0.5}})
    assert request.spec == {"big": float(2**70), "ratio": 0.5}
    assert isinstance(request.spec["big"], float)
