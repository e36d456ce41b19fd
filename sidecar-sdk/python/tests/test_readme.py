"""README.md's "Children" section, run as written: the plugin, then the unit test under it."""

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
