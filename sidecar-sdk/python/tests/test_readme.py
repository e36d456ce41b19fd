"""README.md's "Children" and "Mutate" sections, run as written: the plugin, then the unit test
under it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section(title: str) -> str:
    """The text of README.md's ``## <title>`` section, up to the next one."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


async def test_the_children_example_runs() -> None:
    plugin, unit_test = BLOCK.findall(section("Children"))
    # Not "__main__": the block defines the plugin without serving it.
    namespace: dict[str, Any] = {"__name__": "readme_children"}
    exec(compile(plugin, f"{README}:Children", "exec"), namespace)
    info = namespace["info"]
    assert [(c.api_version, c.kind) for c in info.offers[0].children] == [("v1", "ConfigMap")]
    # The unit test awaits, as a plugin's own async test would.
    body = textwrap.indent(unit_test, "    ")
    exec(compile(f"async def run() -> None:\n{body}", f"{README}:Children", "exec"), namespace)
    await namespace["run"]()


async def test_the_mutate_example_runs() -> None:
    plugin, unit_test = BLOCK.findall(section("Mutate"))
    namespace: dict[str, Any] = {"__name__": "readme_mutate"}
    exec(compile(plugin, f"{README}:Mutate", "exec"), namespace)
    info = namespace["info"]
    assert [(m.api_version, m.kind) for m in info.mutations] == [("apps/v1", "Deployment")]
    body = textwrap.indent(unit_test, "    ")
    exec(compile(f"async def run() -> None:\n{body}", f"{README}:Mutate", "exec"), namespace)
    await namespace["run"]()
    # The example's second branch: a Deployment that has the container already is left alone.
    call = namespace["kplug"].MutateCall.from_json(
        "PostgreSQL",
        {
            "kind": "Deployment",
            "metadata": {"name": "db"},
            "spec": {"template": {"spec": {"containers": [{"name": "backup"}]}}},
        },
    )
    mutation = await namespace["Backup"]().mutate(call)
    assert mutation.is_empty
    assert mutation.warnings == ["Deployment db has a backup container already"]
