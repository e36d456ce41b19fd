"""Lifecycle mutation: a plugin that patches the objects other plugins desire before the operator
applies them (``Mutate``), as a backup plugin adds a sidecar container to every Deployment::

    class Backup(kplug.Plugin):
        async def reconcile(self, request: kplug.Request) -> kplug.Response:
            return kplug.Response.ok()

        async def mutate(self, call: kplug.MutateCall) -> kplug.Mutation:
            return kplug.Mutation.none().add(
                "/spec/template/spec/containers/-", {"name": "backup", "image": "backup:1"}
            )

    info = kplug.PluginInfo(
        name="backup",
        version="1.0.0",
        mutations=[kplug.MutationKind("apps/v1", "Deployment")],
    )

The operator sends a plugin only the kinds it declares *and* its admin allows for it
(``--mutators backup=apps/v1/Deployment``), in the flag's order after the plugin that desires the
object. The answer must be deterministic: the operator judges drift by the mutated object, so a
patch that changes from call to call would re-apply the object every time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from kplug._proto import plugin_pb2
from kplug.admission import bounded_warnings, json_text
from kplug.protocol import MAX_PATCH_BYTES, mutation_path_allowed
from kplug.request import JsonObject, decode_object, encode_for_request, metadata_of, spec_of

MUTATION_PATHS = (
    "a mutation may only change /spec and single labels and annotations, not kplug.io/ ones"
)
"""Why a path is refused: the operator's rule, in the words every SDK uses."""


@dataclass
class MutateCall:
    """A Mutate call: the object about to be applied, as it is so far.

    ``object`` is what the plugin that desires it answered, with kplug's labels and owner
    reference, and the patches of the mutators before this one; ``live`` the object as it is in
    the cluster now (``None`` when it does not exist yet); ``base`` the base object it is a child
    of (``None`` for an embedding operator's own object); ``implementation`` the implementation
    that desires it (empty for an embedding operator's own object).
    """

    implementation: str
    object: JsonObject
    live: JsonObject | None = None
    base: JsonObject | None = None

    @classmethod
    def decode(cls, request: plugin_pb2.MutateRequest) -> MutateCall:
        """Decode the request the operator sent; raise :class:`kplug.InvalidRequestError`
        (answered with ``INVALID_ARGUMENT``) when an object is not a JSON object. Empty ``live``
        and ``base`` bytes mean none."""
        return cls(
            implementation=request.implementation,
            object=decode_object("the object", request.object),
            live=decode_object("the live object", request.live) if request.live else None,
            base=decode_object("the base object", request.base) if request.base else None,
        )

    @classmethod
    def from_json(
        cls,
        implementation: str,
        object: Mapping[str, Any] | str | bytes,
        live: Mapping[str, Any] | str | bytes | None = None,
        base: Mapping[str, Any] | str | bytes | None = None,
    ) -> MutateCall:
        """A call as the operator would send it, for a plugin's own unit tests (see
        :meth:`kplug.Request.from_json`): each object goes through JSON, so the handler gets
        fresh dicts, and one that is not a JSON object raises
        :class:`kplug.InvalidRequestError` naming it."""

        def optional(what: str, value: Mapping[str, Any] | str | bytes | None) -> bytes:
            return (
                b"" if value is None else encode_for_request(f"MutateCall.from_json: {what}", value)
            )

        return cls.decode(
            plugin_pb2.MutateRequest(
                implementation=implementation,
                object=encode_for_request("MutateCall.from_json: the object", object),
                live=optional("the live object", live),
                base=optional("the base object", base),
            )
        )

    @property
    def metadata(self) -> JsonObject:
        """The object's ``metadata`` (empty if absent)."""
        return metadata_of(self.object)

    @property
    def spec(self) -> JsonObject:
        """The object's ``spec`` (empty if absent)."""
        return spec_of(self.object)

    @property
    def kind(self) -> str:
        """The object's kind, e.g. ``"Deployment"``."""
        return str(self.object.get("kind", ""))

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        """The object's namespace; empty for a cluster-scoped object."""
        return str(self.metadata.get("namespace", ""))

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass
class Mutation:
    """A plugin's answer to Mutate: a JSON Patch (RFC 6902) against :attr:`MutateCall.object`,
    built operation by operation, and warnings. Chain what you change::

        return (
            kplug.Mutation.none()
            .add("/spec/template/spec/volumes/-", {"name": "backup", "emptyDir": {}})
            .add("/metadata/annotations/backup.example~1enabled", "true")
        )

    Paths are JSON Pointers (``~1`` stands for ``/`` in a key). They may only be ``/spec`` (or
    below it) and single labels and annotations (``/metadata/labels/<key>``), never a
    ``kplug.io/`` one (the operator's) nor the whole map (kplug's own labels are in it); another
    path raises ``ValueError`` at once, as the operator would refuse the child.
    """

    operations: list[JsonObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def none(cls) -> Mutation:
        """No change, so far."""
        return cls()

    def add(self, path: str, value: Any) -> Self:
        """Set ``value`` at ``path`` (a new member, or the member replaced; ``-`` appends to a
        list; its parent must exist, or be added first)."""
        return self._push("add", path, value)

    def replace(self, path: str, value: Any) -> Self:
        """Replace the value at ``path``, which must exist."""
        return self._push("replace", path, value)

    def remove(self, path: str) -> Self:
        """Remove the value at ``path``, which must exist."""
        return self._push("remove", path, None, has_value=False)

    def warning(self, warning: str) -> Self:
        """A warning for humans, which the operator logs with the object's name."""
        self.warnings.append(warning)
        return self

    @property
    def is_empty(self) -> bool:
        """Whether no operation was added (the object is applied as it is)."""
        return not self.operations

    def _push(self, op: str, path: str, value: Any, *, has_value: bool = True) -> Self:
        if not mutation_path_allowed(path):
            raise ValueError(
                f"{MUTATION_PATHS}; {op} {json.dumps(path, ensure_ascii=False)} is outside them"
            )
        operation: JsonObject = {"op": op, "path": path}
        if has_value:
            # Checked now, so the mistake points at the line that made it.
            json_text(value, f"the value of {op} {path!r}")
            operation["value"] = value
        self.operations.append(operation)
        return self

    def to_proto(self) -> plugin_pb2.MutateResponse:
        """The wire form; raise ValueError when the patch is larger than the operator takes."""
        patch = (
            json_text(self.operations, "the mutation's JSON Patch").encode()
            if self.operations
            else b""
        )
        if len(patch) > MAX_PATCH_BYTES:
            raise ValueError(
                f"the mutation's JSON Patch is {len(patch)} bytes; at most {MAX_PATCH_BYTES} are "
                "accepted"
            )
        return plugin_pb2.MutateResponse(patch=patch, warnings=bounded_warnings(self.warnings))
