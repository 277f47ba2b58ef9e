"""Where a file names a class, and what the syntax around each mention is (ast, never run): the lines
that name it, the construction a function returns, the call or isinstance test a name sits in.

Helpers of kvlint.analysis.containers, which decides what each mention means.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

# `case Spec(...)` in a match statement tests a class (Python 3.10+).
MATCH_CLASS = (ast.MatchClass,) if hasattr(ast, "MatchClass") else ()


def line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


RETURN_BEFORE = re.compile(rb"\breturn\s+(?:[A-Za-z_][\w.]*\.)?$")
CALL_AFTER = re.compile(rb"\s*\(")


def returned_construction(data: bytes, encoded: bytes) -> int | None:
    """The offset of a `return Name(` (or `return module.Name(`) in the text, if any."""
    start = data.find(encoded)
    while start != -1:
        end = start + len(encoded)
        if CALL_AFTER.match(data, end) and RETURN_BEFORE.search(data, max(0, start - 200), start):
            return start
        start = data.find(encoded, end)
    return None


def lines_naming(data: bytes, encoded: bytes) -> set[int] | None:
    """Lines that hold the name, to skip the rest of a large module; None (walk it all) for `\\r` line ends."""
    if b"\r" in data:
        return None
    lines, start = set(), data.find(encoded)
    while start != -1:
        lines.add(line_of(data, start))
        start = data.find(encoded, start + 1)
    return lines


def mentions(tree: ast.Module, name: str, lines: set[int] | None) -> Iterator[tuple[ast.AST, tuple[ast.AST, ...]]]:
    """Each `name` / `x.name` node and each import renaming `name`, with its ancestors (outermost first)."""
    stack: list[tuple[ast.AST, tuple[ast.AST, ...]]] = [(tree, ())]
    while stack:
        node, ancestors = stack.pop()
        if (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name):
            yield node, ancestors
            continue
        if isinstance(node, ast.alias) and node.name.rsplit(".", 1)[-1] == name and node.asname not in (None, name):
            yield node, ancestors
            continue
        chain = (*ancestors, node)
        for child in ast.iter_child_nodes(node):
            first = getattr(child, "lineno", None)
            last = getattr(child, "end_lineno", None) or first
            if lines is not None and first is not None and not any(first <= line <= last for line in lines):
                continue
            stack.append((child, chain))


def called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def innermost_function(ancestors: tuple[ast.AST, ...]) -> ast.AST | None:
    return next(
        (a for a in reversed(ancestors) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))), None
    )


def is_called(attribute: ast.Attribute, ancestors: tuple[ast.AST, ...]) -> bool:
    holder = ancestors[-2] if len(ancestors) > 1 else None
    return isinstance(holder, ast.Call) and holder.func is attribute


def is_isinstance_subject(node: ast.AST, parent: ast.AST) -> bool:
    return (
        isinstance(parent, ast.Call)
        and called_name(parent) in ("isinstance", "issubclass")
        and bool(parent.args)
        and parent.args[0] is node
    )


def popped_key(use: ast.Name, ancestors: tuple[ast.AST, ...]) -> str | None:
    """`key, value = use.popitem()` → "key"."""
    if len(ancestors) < 3:
        return None
    attribute, call, statement = ancestors[-1], ancestors[-2], ancestors[-3]
    if not (
        isinstance(attribute, ast.Attribute)
        and attribute.attr == "popitem"
        and isinstance(call, ast.Call)
        and call.func is attribute
    ):
        return None
    if isinstance(statement, ast.Assign) and statement.value is call and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
            return target.elts[0].id
    return None


def is_inert_mention(node: ast.AST, ancestors: tuple[ast.AST, ...], bases: dict[str, tuple[str, ...]]) -> bool:
    """A mention of the class that creates no instance and hands the class object to nothing."""
    inner, index = node, len(ancestors) - 1
    while index >= 0 and (
        isinstance(ancestors[index], (ast.Tuple, ast.List, ast.Set))
        or (isinstance(ancestors[index], ast.BinOp) and isinstance(ancestors[index].op, ast.BitOr))
    ):
        inner, index = ancestors[index], index - 1
    holder = ancestors[index] if index >= 0 else None
    if (
        isinstance(holder, ast.Call)
        and called_name(holder) in ("isinstance", "issubclass")
        and len(holder.args) == 2
        and holder.args[1] is inner
    ):
        return True
    if isinstance(holder, (ast.Compare, *MATCH_CLASS)):
        return True
    if _registers(holder, ancestors[index - 1] if isinstance(holder, ast.keyword) and index > 0 else None):
        return True
    if isinstance(holder, ast.ClassDef) and inner in holder.bases:
        return holder.name in bases  # a spec class of the interface: settled on its own; any other subclass is not
    child = node
    for ancestor in reversed(ancestors):
        if isinstance(ancestor, ast.arg) and ancestor.annotation is child:
            return True
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef)) and ancestor.returns is child:
            return True
        if isinstance(ancestor, ast.AnnAssign) and ancestor.annotation is child:
            return True
        if (
            isinstance(ancestor, ast.Call)
            and called_name(ancestor) == "cast"
            and ancestor.args
            and ancestor.args[0] is child
        ):
            return True
        if isinstance(ancestor, ast.stmt):
            return False
        child = ancestor
    return False


def _registers(holder: ast.AST | None, keyword_call: ast.AST | None) -> bool:
    """`KVCacheSpecRegistry.register(Spec, Manager, uniform_type_base_spec=Spec)`: a registry keeps the class
    object to look managers up by; it builds no instance from it."""
    call = keyword_call if isinstance(holder, ast.keyword) else holder
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) or call.func.attr != "register":
        return False
    receiver = call.func.value
    name = (
        receiver.id if isinstance(receiver, ast.Name) else receiver.attr if isinstance(receiver, ast.Attribute) else ""
    )
    return name.endswith("Registry")


def describe(parent: ast.AST) -> str:
    if isinstance(parent, ast.Return):
        return "returned"
    if isinstance(parent, (ast.Call, ast.keyword)):
        return "handed to a call"
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return "stored"
    if isinstance(parent, (ast.Dict, ast.List, ast.Tuple, ast.Set)):
        return f"put in a {type(parent).__name__.lower()}"
    return f"used in a {type(parent).__name__}"
