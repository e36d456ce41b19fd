"""docs/your-own-kind.md, run word for word.

Every ```sh block of the page runs, in order, in one bash process from the
repository's root; of the blocks marked ``plugin=<language>`` only that
language's runs, once per language. The ```text block that follows a
command block is what that block must print (the AGE column aside). The
page writes the reader's kind and plugin into a directory of the reader's
(MY_KIND), which each run starts without and removes when it ends.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "your-own-kind.md"
LANGUAGES = ["rust", "python", "go", "typescript", "java"]
# The page works in a fixed place, as a reader would: the reader's directory,
# with the kubeconfig, the socket dir, the CRD and the plugin's project. Two
# runs of it on one machine (two checkouts' `make test`) would take each
# other's directory, socket and API server: each run holds this lock.
MY_KIND = Path("/tmp/my-kind")
LOCK = Path("/tmp/my-kind.lock")
FENCE = re.compile(r"^```(\w*)(.*?)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass
class Block:
    """A fenced block of the page."""

    lang: str
    plugin: str | None
    body: str
    expected: str | None = None


def blocks() -> list[Block]:
    """The page's sh blocks, each with the text block that follows it."""
    found: list[Block] = []
    for match in FENCE.finditer(PAGE.read_text()):
        lang, info, body = match.group(1), match.group(2).strip(), match.group(3)
        if lang == "sh":
            plugin = (
                info.removeprefix("plugin=") if info.startswith("plugin=") else None
            )
            found.append(Block(lang, plugin, body))
        elif lang == "text" and found:
            found[-1].expected = body
    return found


def columns(line: str) -> list[str]:
    """A `kubectl get` row's columns without the last one (AGE)."""
    return re.split(r"\s{2,}", line.strip())[:-1]


def test_every_language_has_a_plugin_block() -> None:
    plugins = {b.plugin for b in blocks() if b.plugin}
    assert plugins == set(LANGUAGES)


def run_page(script: str) -> tuple[str, int]:
    """Runs the page's commands in one bash process: its output and exit code."""
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
    )
    try:
        output, _ = process.communicate(timeout=1200)
    finally:
        # Whatever the page started and did not stop.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return output, process.returncode


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_page_word_for_word(language: str) -> None:
    chosen = [b for b in blocks() if b.plugin in (None, language)]
    script = "set -euo pipefail\n" + "".join(
        f"echo '::block {i}::'\n{b.body}" for i, b in enumerate(chosen)
    )
    with LOCK.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another run of the page ({LOCK} is held)", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(MY_KIND, ignore_errors=True)  # what a killed run left
        try:
            output, returncode = run_page(script)
            stopped = not (MY_KIND / "kubeconfig").exists()
        finally:
            shutil.rmtree(MY_KIND, ignore_errors=True)
    assert returncode == 0, (
        f"the page's commands failed ({language}):\n{output[-6000:]}"
    )

    printed = dict(
        re.findall(
            r"^::block (\d+)::\n(.*?)(?=^::block |\Z)", output, re.MULTILINE | re.DOTALL
        )
    )
    for i, block in enumerate(chosen):
        if block.expected is None:
            continue
        got = [columns(line) for line in printed[str(i)].splitlines() if line.strip()]
        for line in block.expected.splitlines():
            assert columns(line) in got, (
                f"{line!r} not printed by:\n{block.body}\n{printed[str(i)]}"
            )
    every = "\n".join(printed.values())
    assert "Friday: water the plants\n" in every
    assert "NoteWritten=True Written\n" in every
    assert "Ready=True Reconciled\n" in every
    assert stopped, "kube-testenv was stopped (it removes its kubeconfig)"
