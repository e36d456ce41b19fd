"""What a plugin is asked to reconcile: the decoded base object, its extensions and the children
the operator manages for it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kplug import codec
from kplug._proto import types_pb2
from kplug.errors import InvalidRequestError

JsonObject = dict[str, Any]
"""A decoded Kubernetes object (or any JSON object)."""


@dataclass(frozen=True)
class ObjectRef:
    """Points at one Kubernetes object; ``namespace`` is empty for cluster-scoped ones."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """The reference to a Kubernetes object given as a dict."""
        metadata = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            namespace=str(metadata.get("namespace", "")),
            name=str(metadata.get("name", "")),
        )

    @classmethod
    def from_proto(cls, ref: types_pb2.ObjectRef) -> ObjectRef:
        return cls(ref.api_version, ref.kind, ref.namespace, ref.name)

    def to_proto(self) -> types_pb2.ObjectRef:
        return types_pb2.ObjectRef(
            api_version=self.api_version, kind=self.kind, namespace=self.namespace, name=self.name
        )

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass
class Request:
    """A Reconcile or Finalize call: the base object, the extensions the plugin declared and the
    children the operator manages for it.

    ``object`` is the base object as the API server serves it (``apiVersion``,
    ``kind``, ``metadata``, ``spec``, ``status``); ``extensions`` are the
    extension objects, in the order the base object references them; ``children`` are the
    plugin's children of this base object as they are now (see :meth:`child`).
    """

    implementation: str
    object: JsonObject
    extensions: list[JsonObject]
    children: list[JsonObject] = field(default_factory=list)
    """The children the operator manages for this base object on this plugin's behalf, as they
    are now (with their status, e.g. a Deployment's ``readyReplicas``), including those being
    deleted. Empty when the offer declares no child kinds (:attr:`kplug.Offer.children`)."""

    @classmethod
    def decode(
        cls,
        implementation: str,
        obj: bytes,
        extensions: Sequence[bytes],
        children: Sequence[bytes] = (),
    ) -> Request:
        """Decode the JSON the operator sent; raise :class:`InvalidRequestError` if an object is
        not a JSON object."""
        return cls(
            implementation,
            decode_object("the base object", obj),
            decode_objects("extension", extensions) if extensions else [],
            decode_objects("child", children) if children else [],
        )

    @classmethod
    def from_json(
        cls,
        implementation: str,
        object: Mapping[str, Any] | str | bytes,
        extensions: Sequence[Mapping[str, Any] | str | bytes] = (),
        children: Sequence[Mapping[str, Any] | str | bytes] = (),
    ) -> Request:
        """A request as the operator would send it, for a plugin's own unit tests, which then
        call its handlers directly, with no socket and no operator::

            request = kplug.Request.from_json(
                "Hello",
                {
                    "apiVersion": "example.com/v1",
                    "kind": "Greeting",
                    "metadata": {"name": "world", "namespace": "default"},
                    "spec": {},
                },
            )
            response = await Hello().reconcile(request)
            assert response.status == {"greeting": "hello, world"}

        ``object`` and each of ``extensions`` and ``children`` (the observed children, see
        :attr:`children`) is a dict or JSON text. It goes through the JSON encoding and decoding
        of a real call, so the handler gets fresh dicts and lists, and a value JSON cannot carry
        fails here, not in production. Raises :class:`InvalidRequestError`, naming the object,
        when one is not a JSON object.
        """
        return cls.decode(
            implementation,
            encode_for_request("Request.from_json: the base object", object),
            [
                encode_for_request(f"Request.from_json: extension #{i}", e)
                for i, e in enumerate(extensions)
            ],
            [
                encode_for_request(f"Request.from_json: child #{i}", c)
                for i, c in enumerate(children)
            ],
        )

    @property
    def metadata(self) -> JsonObject:
        """The base object's ``metadata`` (empty if absent)."""
        return metadata_of(self.object)

    @property
    def spec(self) -> JsonObject:
        """The base object's ``spec`` (empty if absent)."""
        return spec_of(self.object)

    @property
    def name(self) -> str:
        """The base object's name."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        """The base object's namespace; empty for a cluster-scoped object."""
        return str(self.metadata.get("namespace", ""))

    @property
    def generation(self) -> int:
        """The base object's ``metadata.generation`` (0 if absent)."""
        generation = self.metadata.get("generation", 0)
        return generation if isinstance(generation, int) else 0

    @property
    def deleting(self) -> bool:
        """Whether the base object is being deleted (always true in Finalize)."""
        return bool(self.metadata.get("deletionTimestamp"))

    def extension(self, kind: str) -> JsonObject | None:
        """The first extension of this kind (e.g. ``"DatabaseTablePostgreSqlExtension"``),
        or ``None`` if none was sent."""
        return next(iter(self.extensions_of(kind)), None)

    def extensions_of(self, kind: str) -> list[JsonObject]:
        """All extensions of this kind, in reference order."""
        return [e for e in self.extensions if e.get("kind") == kind]

    def child(self, kind: str, name: str) -> JsonObject | None:
        """The observed child of this kind (e.g. ``"Deployment"``) named ``name``, or ``None``
        if it does not exist (yet)."""
        return next((c for c in self.children_of(kind) if metadata_of(c).get("name") == name), None)

    def children_of(self, kind: str) -> list[JsonObject]:
        """The observed children of this kind, in the order the operator sent them."""
        return [c for c in self.children if c.get("kind") == kind]

    def ref(self, obj: Mapping[str, Any] | None = None) -> ObjectRef:
        """The reference to ``obj`` (default: the base object), e.g. for
        :meth:`Response.extension_status` or an event's ``regarding``."""
        return ObjectRef.of(self.object if obj is None else obj)

    def __str__(self) -> str:
        return str(self.ref())


def metadata_of(obj: JsonObject) -> JsonObject:
    """``obj["metadata"]``, or an empty dict when it is absent or not an object, so the
    accessors of every request read a name or label without checking first."""
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, dict) else {}


def spec_of(obj: JsonObject) -> JsonObject:
    """``obj["spec"]``, or an empty dict when it is absent or not an object."""
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def encode_for_request(what: str, value: Mapping[str, Any] | str | bytes) -> bytes:
    """``value`` (a dict or JSON text) as the JSON bytes the operator would send."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    try:
        return json.dumps(value, allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise InvalidRequestError(
            f"{what} cannot be encoded as JSON: {e}; pass what the API "
            "server would serve (dicts, lists, strings, numbers, booleans, None)"
        ) from e


def decode_objects(what: str, items: Sequence[bytes]) -> list[JsonObject]:
    """Each JSON object of ``items``, ``what #<i>`` in the message for one that is not."""
    return [decode_object(f"{what} #{i}", item) for i, item in enumerate(items)]


def decode_object(what: str, data: bytes) -> JsonObject:
    """The JSON object in ``data``; :class:`InvalidRequestError` naming ``what`` otherwise."""
    try:
        # Strict: NaN and Infinity, which Python's json module would accept, are refused, as
        # other languages' decoders refuse them and the SDKs must agree (kplug.codec).
        value = codec.loads(data)
    # The texts are the Rust SDK's too (see sidecar-sdk/conformance/README.md).
    except ValueError as e:  # orjson.JSONDecodeError is one
        raise InvalidRequestError(f"kplug: {what} is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise InvalidRequestError(f"kplug: {what} is not a JSON object")
    return value
