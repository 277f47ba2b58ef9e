"""A module's top-level bindings as the census reads them, and the module an import names.

Name → (kind, node): "class"/"function" definitions (a Deferred one parsed when first resolved), "value"
assignments, "import" (an ImportFrom), from the module's top level, its `try` bodies and its `if`s decided for the
default platform (an undecided one: both branches).
"""

from __future__ import annotations

import ast
from posixpath import dirname, join, normpath

from kvlint.analysis.census.constructor_shapes import platform_test
from kvlint.analysis.census.parsing import Deferred


def bind(statements: list, found: dict) -> None:
    """Add a module's top-level bindings to `found` (see Program.bindings); the first binding of a name kept."""
    for statement in statements:
        if isinstance(statement, Deferred):  # parsed when first resolved
            found.setdefault(statement.name, (statement.kind, statement))
        elif isinstance(statement, ast.ClassDef):
            found.setdefault(statement.name, ("class", statement))
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.setdefault(statement.name, ("function", statement))
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, ("value", statement.value))
        elif isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                found.setdefault(alias.asname or alias.name, ("import", statement))
        elif isinstance(statement, ast.If):
            decided = platform_test(statement.test)
            if decided is not False:
                bind(statement.body, found)
            if decided is not True:
                bind(statement.orelse, found)
        elif isinstance(statement, ast.Try):
            bind(statement.body, found)


def module_path(texts, dotted: str, relative: str, level: int = 0) -> str | None:
    """The selected module an import names (`level`: its leading dots), as a relative path; None when the
    selection lacks it."""
    if level:
        package = dirname(relative)
        base = normpath(join(package, *([".."] * (level - 1)), *dotted.split("."))) if dotted else package
        base = normpath(join(package, *([".."] * (level - 1)))) if not dotted else base
    else:
        base = dotted.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in texts:
            return candidate
    return None
