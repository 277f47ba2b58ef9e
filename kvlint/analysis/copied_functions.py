"""Functions of code outside the tree that are copies of the target release's: the same body, written anew.

Plugins copy vLLM's code (a model runner's check, a scheduler helper) and keep it in step by hand. Such a copy
must get the verdict the original gets inside the tree (issue 28, "Code copied from the target"): the tree's
roles, callers and census decide it there, and kvlint reading the copy alone must not say otherwise.

A function's print is its body as Python's syntax tree, without positions, comments, formatting or its
docstring (the name and signature may differ). The tree index keeps the prints of the target's functions that
read KV cache specs or groups (`read_target_prints`, once per release); the engine
(kvlint.engine.copies) finds a plugin function with one of them (`copies_in`), lints the original's module
as the tree's scan does, and lines the two bodies up node by node (`node_keys`).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator

# Only bodies that read what kvlint judges: others cannot carry a finding.
_MENTIONS = ("kv_cache_spec", "kv_cache_groups")
# A body smaller than this (one short `return`) is alike by chance as often as by copying.
_MIN_NODES = 15


def function_print(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The print of a function's body; None for a body too small or reading nothing kvlint judges."""
    body = _body(function)
    dumped = "\n".join(ast.dump(statement, include_attributes=False) for statement in body)
    if not any(word in dumped for word in _MENTIONS):
        return None
    if sum(1 for statement in body for _ in ast.walk(statement)) < _MIN_NODES:
        return None
    return hashlib.sha256(dumped.encode("utf-8", "backslashreplace")).hexdigest()[:24]


def _body(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = function.body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]  # the docstring says nothing of what the code does
    return body


def functions(module: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function of a module (methods and nested ones too) with its qualified name."""
    stack: list[tuple[str, ast.AST]] = [("", module)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                stack.append((f"{name}.", child))
            else:
                stack.append((prefix, child))


def read_target_prints(texts: dict[str, bytes]) -> dict[str, str]:
    """print → "relative/path.py:qualified.name" for the functions of the texts (a tree's modules); the first
    in path order when two share a print."""
    prints: dict[str, str] = {}
    for relative in sorted(texts):
        try:
            module = ast.parse(texts[relative])
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # the tree's scan says what it cannot parse
        for name, function in functions(module):
            found = function_print(function)
            if found is not None:
                prints.setdefault(found, f"{relative}:{name}")
    return prints


def could_hold_copies(data: bytes) -> bool:
    """Whether a module of the tree may hold a function `read_target_prints` keeps (a cheap text test)."""
    return any(word.encode() in data for word in _MENTIONS)


def copies_in(module: ast.Module, prints: dict[str, str]) -> list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]]:
    """The functions of a plugin's module whose print is one of the target's, each with where the original is."""
    found = []
    for _, function in functions(module):
        original = prints.get(function_print(function) or "")
        if original is not None:
            found.append((function, original))
    return found


def find_function(module: ast.Module, qualified: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next((function for name, function in functions(module) if name == qualified), None)


def node_keys(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[tuple[int, int], int]:
    """(line, 1-based column) where a node of the body starts → that node's place in the body's walk: two
    bodies with one print have their nodes in the same places, so a finding's place is the same in both."""
    keys: dict[tuple[int, int], int] = {}
    place = 0
    for statement in _body(function):
        for node in ast.walk(statement):
            if hasattr(node, "lineno") and hasattr(node, "col_offset"):
                keys.setdefault((node.lineno, node.col_offset + 1), place)
            place += 1
    return keys


def body_lines(function: ast.FunctionDef | ast.AsyncFunctionDef) -> range:
    body = _body(function) or function.body
    return range(body[0].lineno, (function.end_lineno or body[-1].lineno) + 1)
