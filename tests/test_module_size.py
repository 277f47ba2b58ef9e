"""Every module of kvlint and its rules fits in 400 lines: one job a module, readable in one sitting.

The one exception is `kvlint/verify/child.py`: `kvlint verify` runs it as `python -I child.py` under an
interpreter that may not have kvlint installed, where it cannot import a sibling module, so it stays whole.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 400
STANDALONE_SCRIPT = Path("kvlint/verify/child.py")


def module_sizes() -> dict[Path, int]:
    """Lines of every Python file in kvlint/ and rules/, by path relative to the repository."""
    paths = sorted([*(ROOT / "kvlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")])
    return {path.relative_to(ROOT): len(path.read_text(encoding="utf-8").splitlines()) for path in paths}


def oversized(sizes: dict[Path, int]) -> list[str]:
    return [
        f"{path}: {lines} lines"
        for path, lines in sorted(sizes.items(), key=lambda item: -item[1])
        if lines > LIMIT and path != STANDALONE_SCRIPT
    ]


def test_no_module_is_over_the_limit():
    too_long = oversized(module_sizes())
    if too_long:
        pytest.fail(f"modules over {LIMIT} lines (split them along their jobs):\n" + "\n".join(too_long), pytrace=False)


def test_the_exempt_script_still_needs_its_exemption():
    """It is exempt because it runs without kvlint; once it imports kvlint it can be split like the rest."""
    tree = ast.parse((ROOT / STANDALONE_SCRIPT).read_text(encoding="utf-8"))
    kvlint_imports = [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "kvlint" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "kvlint"))
    ]
    assert not kvlint_imports, (
        f"{STANDALONE_SCRIPT} imports kvlint (lines {kvlint_imports}): it no longer needs to stay whole"
    )


def test_the_limit_is_checked():
    sizes = {Path("kvlint/a.py"): LIMIT, Path("kvlint/b.py"): LIMIT + 1, STANDALONE_SCRIPT: 2 * LIMIT}
    assert oversized(sizes) == [f"kvlint/b.py: {LIMIT + 1} lines"]
