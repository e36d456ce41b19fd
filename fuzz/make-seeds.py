#!/usr/bin/env python3
"""Writes the committed seed inputs, fuzz/corpus/<target>/seed-*.

Run from anywhere: python3 fuzz/make-seeds.py. The input formats are in each
target's doc comment; protobuf is encoded by hand (a few lines, no
dependency), structured inputs follow the `arbitrary` crate's layout (enums:
a little-endian u32 scaled onto the variants; collections: a continue byte
before each element).
"""

import json
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


# --- gRPC framing -------------------------------------------------------------
def grpc_frame(message):
    return b"\x00" + struct.pack(">I", len(message)) + message


# --- protobuf ---------------------------------------------------------------
def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, value):
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def msg(*fields):
    return b"".join(field(n, v) for n, v in fields if v is not None)


def group_kind(group, kind):
    return msg((1, group), (2, kind))


def offer(impl, extensions=()):
    return msg(
        (1, group_kind("myorg.org", "DatabaseTable")),
        (2, impl),
        *[(3, group_kind("myorg.org", e)) for e in extensions],
    )


def heartbeat(name="postgresql", version="1.0.0", instance="0f8fad5b-d9cb", protocol="kplug.v1", offers=None):
    offers = [offer("PostgreSQL", ["DatabaseTablePostgreSqlExtension"])] if offers is None else offers
    return msg(
        (1, name), (2, version), (3, instance), (4, protocol), (5, "plugins/postgresql/plugin.sock"),
        *[(6, o) for o in offers], (7, 1), (7, 2),
    )


def obj_ref(kind, name, api_version="myorg.org/v1alpha1", namespace="ns"):
    return msg((1, api_version), (2, kind), (3, namespace), (4, name))


def duration(seconds, nanos=0):
    return msg((1, seconds), (2, nanos))


def condition(type_, status=1, reason="Created", message="the table exists"):
    return msg((1, type_), (2, status), (3, reason), (4, message))


def event(reason, message, type_=1, regarding=None):
    return msg((1, type_), (2, reason), (3, message), (4, regarding))


PG = "DatabaseTablePostgreSqlExtension"
STATUS = json.dumps({"tableName": "users", "columns": [{"name": "id", "type": "int64"}], "rows": 3})


def reconcile(outcome=1, message="", retry=None, status=STATUS, ext=(), conditions=(), events=()):
    return msg(
        (1, outcome), (2, message), (3, retry), (4, status),
        *[(5, msg((1, t), (2, s))) for t, s in ext],
        *[(6, c) for c in conditions], *[(7, e) for e in events],
    )


def finalize(outcome=1, message="", retry=None, events=()):
    return msg((1, outcome), (2, message), (3, retry), *[(4, e) for e in events])


# --- arbitrary ----------------------------------------------------------------
def variant(k, n):
    """The u32 that derive(Arbitrary) maps onto variant k of n."""
    return struct.pack("<I", -(-k * 2**32 // n))


def known_segments(*indices):
    # Segment::Known is variant 0 of 5; a continue byte (1) before each.
    return b"".join(b"\x01" + variant(0, 5) + bytes([i]) for i in indices) + b"\x00"


SEGMENTS = [
    "plugins", "pg.sock", "registry.sock", "file.sock", "dir.sock", "out.sock",
    "rel-out.sock", "in.sock", "abs-in.sock", "via-alias.sock", "dangling.sock",
    "loop.sock", "out", "root", "sub", "deep", "x.sock", "evil.sock", "file",
    "sockets", "sockets-evil", "outside", "alias", "tmp", "missing.sock",
]


def path(dir_variant, start_variant, *names, trailing=False):
    """PathInput: SocketDir (5 variants), Start (7), segments, trailing slash."""
    return (
        variant(dir_variant, 5) + variant(start_variant, 7)
        + known_segments(*(SEGMENTS.index(n) for n in names)) + (b"\x01" if trailing else b"\x00")
    )


SEEDS = {
    "heartbeat": {
        "valid": b"\x01" + heartbeat(),
        "name-64": b"\x01" + heartbeat(name="p" * 64),
        "version-129": b"\x01" + heartbeat(version="v" * 129),
        "offers-65": b"\x01" + heartbeat(offers=[offer(f"Impl{i}") for i in range(65)]),
        "extensions-17": b"\x01" + heartbeat(offers=[offer("PostgreSQL", [f"Ext{i}" for i in range(17)])]),
        "protocol": b"\x01" + heartbeat(protocol="kplug.v2"),
        "structured": b"\x00" + bytes(range(1, 64)),
    },
    "confinement": {
        "relative": path(0, 0, "plugins", "pg.sock"),
        "absolute": path(0, 1, "plugins", "pg.sock"),
        "alias-dir": path(1, 1, "plugins", "in.sock"),
        "symlink-out": path(0, 0, "plugins", "out.sock"),
        "dir-symlink-out": path(2, 0, "out", "evil.sock"),
        "via-alias": path(3, 2, "plugins", "via-alias.sock"),
        "sibling": path(0, 4, "sockets-evil", "x.sock"),
        "deep": path(4, 0, "sub", "deep", "x.sock", trailing=True),
    },
    "reconcile_response": {
        "statuses": b"\x00\x00" + STATUS.encode() + b"\x00" + b'{"partitions":4}' + b"\x00" + b'{"engine":"InnoDB"}',
        "reserved-key": b"\x00\x00" + b'{"implementation":"SQLite","ok":true}',
        "json-odd": b"\x00\x00" + '{"s":"\\ud83d\\ude00 é\\u0000","n":-1.5e308,"i":123456789012345678901234567890,"a":[[[{}]]],"d":{"k":1,"k":2}}'.encode(),
        "json-deep": b"\x00\x00" + b'{"a":' * 130 + b"1" + b"}" * 130,
        "proto-full": b"\x01" + reconcile(
            outcome=2, message="waiting for the database", retry=duration(30),
            ext=[(obj_ref(PG, "users"), '{"partitions":4}'), (obj_ref(PG, "users", "myorg.org/v1"), "{}")],
            conditions=[condition("TableReady"), condition("SchemaCurrent", 2, "", "é" * 1100)],
            events=[event("Created", "created table users"), event("Slow", "x", 2, obj_ref(PG, "users"))],
        ),
        "proto-not-sent": b"\x01" + reconcile(ext=[(obj_ref(PG, "users", namespace="other"), "{}")]),
        "proto-reserved-condition": b"\x01" + reconcile(conditions=[condition("Ready")]),
    },
    "finalize_response": {
        "proto-ok": b"\x01" + finalize(message="dropped table users", events=[event("Dropped", "dropped table users")]),
        "proto-retry": b"\x01" + finalize(outcome=2, message="x" * 1100, retry=duration(2**62, 999999999)),
        "proto-events-17": b"\x01" + finalize(events=[event("E", "m")] * 17),
        "proto-not-sent": b"\x01" + finalize(events=[event("E", "m", 2, obj_ref("Secret", "db", "v1"))]),
        "structured": b"\x00" + bytes(range(1, 64)),
    },
    # A limit byte (even: the operator's 2 MiB default; odd: the next byte)
    # and a gRPC body: per frame a compressed flag, a big-endian u32 length
    # and the message.
    "response_frames": {
        "two-messages": b"\x00" + grpc_frame(reconcile(message="ok")) + grpc_frame(reconcile(outcome=2)),
        "empty-message": b"\x00" + grpc_frame(b""),
        "declared-50MB": b"\x00" + b"\x00" + struct.pack(">I", 50 * 1024 * 1024) + b"\x08\x01",
        "over-small-limit": b"\x01\x10" + grpc_frame(reconcile(message="x" * 40)),
        "at-small-limit": b"\x01\x10" + grpc_frame(reconcile(message="x" * 12)),
        "compressed-flag": b"\x00" + b"\x01" + struct.pack(">I", 2) + b"\x08\x01",
        "truncated": b"\x00" + grpc_frame(reconcile(message="cut"))[:-2],
    },
}

for target, seeds in SEEDS.items():
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (d / f"seed-{name}").write_bytes(data)
    print(f"{target}: {len(seeds)} seeds")
