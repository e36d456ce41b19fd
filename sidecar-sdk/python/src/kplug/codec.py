"""The JSON of every call: objects decoded from the operator, statuses and children encoded.

orjson does the work (it is several times faster than the standard ``json`` module on every
object size, which is most of what a call costs). Where the two differ, this module keeps what
the SDK has always guaranteed:

- Encoding refuses NaN and infinities (JSON has no such numbers), which orjson would silently
  write as ``null``. orjson writes them only as ``null``, so output without ``null`` cannot hold
  one; output with ``null`` is checked with the standard module, which refuses them with the
  message it always gave.
- What orjson refuses but the standard module encodes (dict keys that are ``int``, ``float``,
  ``bool`` or ``None``, integers beyond 64 bits, values nested deeper than 254 levels) and
  subclasses of ``str``, ``int``, ``float``, ``dict`` and ``list`` (which the standard module
  encodes through their methods) are encoded by the standard module, with its messages for
  what it refuses too (a ``datetime``, a dataclass, a set, a circular reference).
- One thing is accepted that the standard module refused: an ``enum.Enum`` (encoded as its
  value) and a ``uuid.UUID`` (as its string), which orjson encodes and cannot be told not to.

Decoding is orjson's alone: strict RFC 8259 over UTF-8, as the operator (Rust, serde_json)
writes it. An integer beyond 64 bits decodes to a float, as serde_json hands it to the operator
in the first place; NaN, Infinity, lone surrogates and a byte order mark are refused.
"""

from __future__ import annotations

import enum
import json
import uuid
from typing import Any

import orjson


def _like_orjson(value: Any) -> Any:
    # The two types orjson encodes on its own, encoded the same way here.
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Dataclasses, datetimes and subclasses of the JSON types go to the standard encoder below, which
# refuses the first two (as this SDK always has) and encodes subclasses through their methods.
_ORJSON_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)

# Compact, UTF-8 rather than \u escapes, no NaN: what every SDK sends.
_STANDARD = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_like_orjson
)


def dumps(value: Any) -> bytes:
    """``value`` as compact UTF-8 JSON; TypeError or ValueError (the standard ``json`` module's,
    with its message) for a value JSON cannot carry."""
    try:
        data = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one
        return _STANDARD.encode(value).encode()
    if b"null" in data:
        _STANDARD.encode(value)  # raises for NaN or an infinity, which orjson wrote as null
    return data


def loads(data: bytes) -> Any:
    """The JSON value in ``data``; ValueError (orjson's JSONDecodeError, with its message) for
    anything that is not JSON."""
    return orjson.loads(data)
