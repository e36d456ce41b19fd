#!/usr/bin/env python3
"""Lines of each Rust module of the workspace without its unit tests (the
`#[cfg(test)] mod ... { ... }` blocks), over a limit: what issue 31's "no
module over 400 lines, tests excepted" counts. Integration tests (`tests/`)
are tests, and are left out.

Usage: dev/module-lines.py [LIMIT]   (default 400; exit 1 when any is over)
"""

import subprocess
import sys


def without_tests(lines: list[str]) -> int:
    """The count of `lines` outside `#[cfg(test)] mod ... { ... }` blocks."""
    count, i = 0, 0
    while i < len(lines):
        is_test_mod = (
            lines[i].strip() == "#[cfg(test)]"
            and i + 1 < len(lines)
            and lines[i + 1].lstrip().startswith(("mod ", "pub mod ", "pub(crate) mod "))
            and lines[i + 1].rstrip().endswith("{")
        )
        if not is_test_mod:
            count += 1
            i += 1
            continue
        depth, i = 0, i + 1
        while i < len(lines):
            depth += lines[i].count("{") - lines[i].count("}")
            i += 1
            if depth == 0:
                break
    return count


def main() -> int:
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    files = subprocess.run(
        ["git", "ls-files", "*.rs"], capture_output=True, text=True, check=True
    ).stdout.split()
    over = []
    for path in files:
        if "/tests/" in path or path.startswith("tests/") or path.endswith("/tests.rs"):
            continue
        with open(path, encoding="utf-8") as f:
            n = without_tests(f.read().splitlines())
        if n > limit:
            over.append((n, path))
    for n, path in sorted(over, reverse=True):
        print(f"{n:5} {path}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
