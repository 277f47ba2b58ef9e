"""Which of vLLM's own test modules test a module a fix changed: those that import it.

Test modules are read with `ast`, never imported. A module counts when any import statement in it, at
module level or inside a function, names a changed module or something inside one (`from vllm.a.b import
f` for vllm/a/b.py; `import vllm.a.b.c` for vllm/a/b/__init__.py, which that import runs too).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Selection:
    modules: tuple[str, ...]  # test modules that import a changed module, relative to the tests' root
    searched: int  # test modules read
    unreadable: tuple[tuple[str, str], ...]  # (test module, why it could not be read)


def dotted_module(relative: str) -> str:
    """vllm/a/b.py → vllm.a.b; vllm/a/__init__.py → vllm.a."""
    parts = list(PurePosixPath(relative).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_test_module(name: str) -> bool:
    """pytest's default `python_files`: test_*.py and *_test.py."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def imported_names(tree: ast.AST) -> set[str]:
    """Every absolute module (and `from` module + name) the source imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def imports_any(names: set[str], modules: set[str]) -> bool:
    return any(name == module or name.startswith(module + ".") for name in names for module in modules)


def select_test_modules(tests_root: Path, modules: set[str]) -> Selection:
    """The test modules under tests_root/tests that import one of `modules` (dotted names), sorted."""
    chosen: list[str] = []
    unreadable: list[tuple[str, str]] = []
    searched = 0
    for folder, subfolders, files in os.walk(tests_root / "tests"):
        subfolders[:] = sorted(name for name in subfolders if name != "__pycache__")
        for name in sorted(files):
            if not is_test_module(name):
                continue
            path = Path(folder, name)
            relative = path.relative_to(tests_root).as_posix()
            searched += 1
            try:
                tree = ast.parse(path.read_bytes(), filename=relative)
            except (SyntaxError, ValueError, OSError) as error:
                unreadable.append((relative, f"{type(error).__name__}: {error}"))
                continue
            if imports_any(imported_names(tree), modules):
                chosen.append(relative)
    return Selection(tuple(sorted(chosen)), searched, tuple(sorted(unreadable)))
