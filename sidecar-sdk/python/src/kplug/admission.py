"""Admission: what a plugin is asked when an object is created or changed (Validate, Default),
and how it answers.

A plugin that implements :meth:`kplug.Plugin.validate` refuses objects with field errors
(``kubectl apply`` prints them); one that implements :meth:`kplug.Plugin.default` fills in
defaults with a JSON Patch limited to ``/spec``, ``/metadata/labels`` and
``/metadata/annotations``::

    class Tables(kplug.Plugin):
        async def validate(self, request: kplug.AdmissionRequest) -> kplug.Validation:
            verdict = kplug.Validation.allowed()
            for i, column in enumerate(request.spec.get("columns", [])):
                if column.get("type") not in ("text", "integer"):
                    verdict.error(f"spec.columns[{i}].type", column.get("type"), "text or integer")
            return verdict

        async def default(self, request: kplug.AdmissionRequest) -> kplug.Defaults:
            if "storageEngine" in request.spec:
                return kplug.Defaults.none()
            return kplug.Defaults.none().add("/spec/storageEngine", "InnoDB")

An exception raised by either handler means the plugin could not decide: the SDK answers with a
gRPC ``INTERNAL`` error carrying its message, and the plugin's failure policy (or the
operator's) refuses or admits the object. To refuse an object, return field errors.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from kplug._proto import plugin_pb2, types_pb2
from kplug.errors import InvalidRequestError
from kplug.protocol import (
    MAX_FIELD_ERRORS,
    MAX_MESSAGE_CHARS,
    MAX_PATCH_BYTES,
    MAX_WARNING_CHARS,
    MAX_WARNINGS,
    cut,
    default_patch_path_allowed,
)
from kplug.request import JsonObject, decode_object, encode_for_request, metadata_of, spec_of


class Operation(enum.Enum):
    """Whether the object is being created or changed."""

    CREATE = types_pb2.OPERATION_CREATE
    UPDATE = types_pb2.OPERATION_UPDATE


@dataclass
class AdmissionRequest:
    """A Validate or Default call: the object being admitted and, on update, the object as
    stored now.

    ``implementation`` is, for a base object, the implementation it is (or would be)
    reconciled by; for an extension object, the implementation of this plugin's offer that
    declares its kind.
    """

    implementation: str
    operation: Operation
    object: JsonObject
    old_object: JsonObject | None = None

    @classmethod
    def decode(
        cls, implementation: str, operation: int, obj: bytes, old_object: bytes
    ) -> AdmissionRequest:
        """Decode the request the operator sent; raise :class:`InvalidRequestError` (answered
        with ``INVALID_ARGUMENT``) for an operation that is neither CREATE nor UPDATE, or an
        object that is not a JSON object."""
        try:
            op = Operation(operation)
        except ValueError:
            raise InvalidRequestError(
                f"kplug: the admission request's operation {operation} is neither CREATE nor UPDATE"
            ) from None
        return cls(
            implementation=implementation,
            operation=op,
            object=decode_object("the object", obj),
            old_object=decode_object("the old object", old_object) if old_object else None,
        )

    @classmethod
    def from_json(
        cls,
        implementation: str,
        operation: Operation,
        object: Mapping[str, Any] | str | bytes,
        old_object: Mapping[str, Any] | str | bytes | None = None,
    ) -> AdmissionRequest:
        """A request as the operator would send it, for a plugin's own unit tests (see
        :meth:`kplug.Request.from_json`); ``old_object`` is ``None`` on create."""
        return cls.decode(
            implementation,
            operation.value,
            encode_for_request("AdmissionRequest.from_json: the object", object),
            b""
            if old_object is None
            else encode_for_request("AdmissionRequest.from_json: the old object", old_object),
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
        """The object's kind: a base kind or an extension kind."""
        return str(self.object.get("kind", ""))

    @property
    def name(self) -> str:
        """The object's name."""
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        """The object's namespace; empty for a cluster-scoped object."""
        return str(self.metadata.get("namespace", ""))


@dataclass(frozen=True)
class FieldError:
    """One reason an object is refused: ``path`` in Kubernetes' notation
    (``spec.columns[1].type``; empty for the object as a whole), the refused ``value`` as JSON
    text (empty when there is none) and a ``message``."""

    path: str
    value: str
    message: str


def json_text(value: Any, what: str) -> str:
    """Compact JSON, non-ASCII characters as they are: the encoding every SDK uses."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} cannot be encoded as JSON: {e}") from e


def bounded_warnings(warnings: list[str]) -> list[str]:
    """At most 16 warnings (the last one kept says how many more there were), each cut to 256
    characters: what the operator passes on (Validate, Default and Mutate alike)."""
    if len(warnings) > MAX_WARNINGS:
        more = len(warnings) - (MAX_WARNINGS - 1)
        warnings = [*warnings[: MAX_WARNINGS - 1], f"and {more} more warnings"]
    return [cut(w, MAX_WARNING_CHARS) for w in warnings]


@dataclass
class Validation:
    """A plugin's answer to Validate: allowed when it holds no errors. Chain what you find::

    return (
        kplug.Validation.allowed()
        .error("spec.columns[1].type", "varchar2", "unknown column type")
        .warning("spec.comment is ignored")
    )
    """

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def allowed(cls) -> Validation:
        """Allowed, so far: add errors to refuse."""
        return cls()

    def error(self, path: str, value: Any, message: str) -> Self:
        """Refuse the value at ``path`` (``""`` for the object as a whole); ``value`` is sent as
        JSON text (a string keeps its quotes). A value JSON cannot carry is sent as no value, as
        the Rust SDK does."""
        try:
            text = json_text(value, f"the value at {path!r}")
        except ValueError:
            text = ""
        self.errors.append(FieldError(path, text, message))
        return self

    def error_at(self, path: str, message: str) -> Self:
        """Refuse the object for a field without a value to show (e.g. a missing one)."""
        self.errors.append(FieldError(path, "", message))
        return self

    def warning(self, warning: str) -> Self:
        """A warning shown to the client (kubectl prints it), allowed or not."""
        self.warnings.append(warning)
        return self

    @property
    def is_allowed(self) -> bool:
        """Whether no error was added."""
        return not self.errors

    def to_proto(self) -> plugin_pb2.ValidateResponse:
        """The wire form, within the protocol's bounds: past 64 errors the last one kept says
        how many more there were; warnings past 16 likewise; long texts are cut."""
        errors = list(self.errors)
        if len(errors) > MAX_FIELD_ERRORS:
            more = len(errors) - (MAX_FIELD_ERRORS - 1)
            errors = [
                *errors[: MAX_FIELD_ERRORS - 1],
                FieldError("", "", f"and {more} more errors"),
            ]
        return plugin_pb2.ValidateResponse(
            errors=[
                plugin_pb2.FieldError(
                    path=e.path,
                    value=cut(e.value, MAX_MESSAGE_CHARS),
                    message=cut(e.message, MAX_MESSAGE_CHARS),
                )
                for e in errors
            ],
            warnings=bounded_warnings(self.warnings),
        )


@dataclass
class Defaults:
    """A plugin's answer to Default: JSON Patch operations (RFC 6902) on the object, limited to
    ``/spec``, ``/metadata/labels`` and ``/metadata/annotations`` (or below them).

    Paths are JSON Pointers (``/spec/storageEngine``; ``~1`` stands for ``/`` in a key, as in
    ``/metadata/labels/app.kubernetes.io~1name``). A path outside those prefixes raises
    ``ValueError`` at once: the operator would refuse the whole patch.
    """

    operations: list[JsonObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def none(cls) -> Defaults:
        """Nothing to default, so far."""
        return cls()

    def add(self, path: str, value: Any) -> Self:
        """Set ``value`` at ``path`` (a new member, or the member replaced; its parent must
        exist, or be added first)."""
        return self._push("add", path, value)

    def replace(self, path: str, value: Any) -> Self:
        """Replace the value at ``path``, which must exist."""
        return self._push("replace", path, value)

    def remove(self, path: str) -> Self:
        """Remove the value at ``path``, which must exist."""
        return self._push("remove", path, None, has_value=False)

    def warning(self, warning: str) -> Self:
        """A warning shown to the client (kubectl prints it)."""
        self.warnings.append(warning)
        return self

    @property
    def is_empty(self) -> bool:
        """Whether no operation was added."""
        return not self.operations

    def _push(self, op: str, path: str, value: Any, *, has_value: bool = True) -> Self:
        if not default_patch_path_allowed(path):
            raise ValueError(
                "a default may only change /spec, /metadata/labels and /metadata/annotations; "
                f"{op} {json.dumps(path, ensure_ascii=False)} is outside them"
            )
        operation: JsonObject = {"op": op, "path": path}
        if has_value:
            json_text(value, f"the value of {op} {path!r}")
            operation["value"] = value
        self.operations.append(operation)
        return self

    def to_proto(self) -> plugin_pb2.DefaultResponse:
        """The wire form; raise ValueError when the patch is larger than the operator takes."""
        patch = (
            json_text(self.operations, "the defaults' JSON Patch").encode()
            if self.operations
            else b""
        )
        if len(patch) > MAX_PATCH_BYTES:
            raise ValueError(
                f"the defaults' JSON Patch is {len(patch)} bytes; at most {MAX_PATCH_BYTES} are "
                "accepted"
            )
        return plugin_pb2.DefaultResponse(patch=patch, warnings=bounded_warnings(self.warnings))
