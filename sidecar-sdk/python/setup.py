"""Build step: generate the kplug.v1 gRPC stubs from the .proto files.

Everything declarative lives in pyproject.toml; this file exists only because
the stubs are generated at build time and never committed.

Where the .proto files come from, first match wins:

1. ``$KPLUG_PROTO_DIR`` (a directory holding ``kplug/v1/*.proto``);
2. ``../../proto``: building from a checkout of the kplug repository, which is
   what ``pip install ./sidecar-sdk/python`` and ``pip install -e`` do;
3. ``./proto``: building from an sdist, into which the ``sdist`` command below
   copies them (they live outside this directory, so MANIFEST.in cannot).

Why the imports are rewritten: ``grpc_tools.protoc`` derives Python module
paths from the proto paths, so ``kplug/v1/plugin.proto`` becomes
``from kplug.v1 import types_pb2``. Our package is also called ``kplug``, so
that import would look for a ``kplug.v1`` subpackage that does not exist. The
stubs are generated into a temporary directory, then moved flat into
``src/kplug/_proto/`` with those imports rewritten to relative ones
(``from . import types_pb2``). Relative imports keep working wherever the
package is installed. The proto file names registered in protobuf's
descriptor pool stay ``kplug/v1/*.proto``, as in every other language.

Generation happens when this file is loaded (not in a build_py hook) because
the runtime dependencies depend on it: generated stubs refuse a grpcio or
protobuf older than the grpcio-tools that generated them, so the lower bounds
are read from the generated code and declared as the package's dependencies.
The stubs land in the source tree, so an editable install sees them too.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

from setuptools import setup
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
PROTO_NAMES = ("types", "plugin", "registry")
OUT = HERE / "src" / "kplug" / "_proto"

INIT = '''"""kplug.v1 gRPC stubs, generated at build time from proto/kplug/v1 by setup.py.

Do not edit: reinstall the package (pip install [-e] sidecar-sdk/python) to
regenerate after changing a .proto file.
"""
'''


def fail(message: str) -> NoReturn:
    sys.exit(f"kplug build: {message}")


def proto_dir() -> Path:
    candidates = []
    if env := os.environ.get("KPLUG_PROTO_DIR"):
        candidates.append(Path(env))
    candidates += [HERE.parent.parent / "proto", HERE / "proto"]
    for candidate in candidates:
        if (candidate / "kplug" / "v1" / "plugin.proto").is_file():
            return candidate.resolve()
    looked = ", ".join(str(c / "kplug" / "v1") for c in candidates)
    fail(
        f"cannot find the kplug.v1 .proto files (looked in {looked}). Build from a "
        "checkout of the kplug repository or from its sdist, or set KPLUG_PROTO_DIR."
    )


# `from kplug.v1 import types_pb2 as ...` at the start of a line; the
# serialized descriptors also contain "kplug.v1" but never in this form.
ABSOLUTE_IMPORT = re.compile(r"^from kplug\.v1 import (\w+)", re.MULTILINE)
ANY_KPLUG_IMPORT = re.compile(r"^\s*(from|import)\s+kplug\b", re.MULTILINE)


def generate(protos: Path) -> str:
    """Generate the stubs into OUT; return the text of plugin_pb2_grpc.py."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError:
        fail("grpcio-tools is needed to build kplug (it is in [build-system] requires)")

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    sources = [str(protos / "kplug" / "v1" / f"{name}.proto") for name in PROTO_NAMES]
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-I{protos}",
            f"-I{well_known}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *sources,
        ]
        if protoc.main(args) != 0:
            fail(f"grpc_tools.protoc failed on {protos}/kplug/v1 (its message is above)")

        staged = Path(tmp) / "staged"
        staged.mkdir()
        for generated in sorted((Path(tmp) / "kplug" / "v1").iterdir()):
            if generated.name == "types_pb2_grpc.py":
                continue  # types.proto has no service: the module would be empty
            text = ABSOLUTE_IMPORT.sub(r"from . import \1", generated.read_text())
            if leftover := ANY_KPLUG_IMPORT.search(text):
                fail(
                    f"unexpected import {leftover.group(0).strip()!r} in generated "
                    f"{generated.name}; grpcio-tools changed its output, adapt setup.py"
                )
            (staged / generated.name).write_text(text)
        (staged / "__init__.py").write_text(INIT)

        # Replace the whole directory so stubs of a removed .proto do not linger.
        shutil.rmtree(OUT, ignore_errors=True)
        shutil.copytree(staged, OUT)
    return (OUT / "plugin_pb2_grpc.py").read_text()


def runtime_requirements(grpc_stub: str) -> list[str]:
    """The package's dependencies: grpcio and protobuf, as new as the stubs need, and orjson."""
    grpc_version = re.search(r"^GRPC_GENERATED_VERSION = '([\d.]+)'", grpc_stub, re.MULTILINE)
    pb_version = re.search(
        r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*"
        r"(\d+),\s*(\d+),\s*(\d+),",
        (OUT / "plugin_pb2.py").read_text(),
    )
    if not grpc_version or not pb_version:
        fail("cannot read the grpcio/protobuf versions from the generated stubs; adapt setup.py")
    major, minor, patch = (int(n) for n in pb_version.groups())
    return [
        f"grpcio>={grpc_version.group(1)}",
        f"protobuf>={major}.{minor}.{patch},<{major + 1}",
        # The JSON of every call (kplug.codec; the README says why). Not from the stubs: pinned
        # to the major version whose options and errors kplug.codec relies on.
        "orjson>=3.10,<4",
    ]


class SdistWithProtos(sdist):
    """An sdist that carries the .proto files, so it builds on its own."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        target = Path(base_dir) / "proto" / "kplug" / "v1"
        target.mkdir(parents=True, exist_ok=True)
        for name in PROTO_NAMES:
            shutil.copy2(PROTOS / "kplug" / "v1" / f"{name}.proto", target)


PROTOS = proto_dir()
setup(
    install_requires=runtime_requirements(generate(PROTOS)),
    cmdclass={"sdist": SdistWithProtos},
)
