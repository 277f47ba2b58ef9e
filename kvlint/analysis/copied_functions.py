"""Functions of code outside the tree that are copies of the target release's: the same body, written anew.

Plugins copy vLLM's code (a model runner's check, a scheduler helper) and keep it in step by hand. Such a copy
must get the verdict the original gets inside the tree (issue 28, "Code copied from the target"): the tree's
roles, callers and census decide it there, and kvlint reading the copy alone must not say otherwise.

A function's print is its body as Python's syntax tree, without positions, comments, formatting or its
docstring (the name and signature may differ). Only a function of the plugin that holds a finding is looked
for, and only in the tree's modules that read KV cache specs or groups and name every name its body names
(`original_of`: a text search first, a parse only of the few modules left), so that the tree's index — and
with it an in-tree scan's cache — never depends on them. The engine (kvlint.engine.copies) lints the
original's module as the tree's scan does and lines the two bodies up node by node (`node_keys`).
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


def original_of(texts: dict[str, bytes], copy: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """ "relative/path.py:qualified.name" of the function of the texts (a tree's modules, relative path →
    bytes) whose body `copy`'s is, the first in path order; None when there is none."""
    wanted = function_print(copy)
    if wanted is None:
        return None
    words = _identifiers(copy)
    for relative in sorted(texts):
        data = texts[relative]
        if not all(word in data for word in words):
            continue  # a module that lacks one of the body's names holds no copy of it
        found = _prints(relative, data).get(wanted)
        if found is not None:
            return f"{relative}:{found}"
    return None


# (module, its text) → each print of its functions → the first function with it: a module of the tree is parsed
# once per process, not once per function of the scanned file that holds a finding (a connector of 40 such
# functions parsed the tree's matching modules 40 times, 10 s).
_PRINTS: dict[tuple[str, bytes], dict[str, str]] = {}


def _prints(relative: str, data: bytes) -> dict[str, str]:
    key = (relative, data)
    if key not in _PRINTS:
        prints: dict[str, str] = {}
        try:
            module = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            module = None  # the tree's scan says what it cannot parse
        for name, function in functions(module) if module is not None else ():
            found = function_print(function)
            if found is not None:
                prints.setdefault(found, name)
        _PRINTS[key] = prints
    return _PRINTS[key]


def _identifiers(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[bytes]:
    """The names and attribute names the body reads, as the module's text spells them."""
    words = set()
    for statement in _body(function):
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                words.add(node.id.encode())
            elif isinstance(node, ast.Attribute):
                words.add(node.attr.encode())
    return words


def could_hold_copies(data: bytes) -> bool:
    """Whether a module of the tree may hold a function `read_target_prints` keeps (a cheap text test)."""
    return any(word.encode() in data for word in _MENTIONS)


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
