"""Small questions about stdlib `ast` nodes that the tree readers and the sizing evaluator share."""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

from kvlint.filesystem import read_regular_file


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a name or a chain of attributes on a name; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def shape(node: object) -> tuple:
    """A hashable key of a node's structure: equal for two nodes exactly when `ast.dump` (without positions) is.
    `ast.dump` makes a nested function that calls itself, a reference cycle per call (the index is built with the
    collector paused, kvlint.collector), and recurses, as a nested key would: a sum of a thousand terms in a pull
    request's module would stop it. The nodes in preorder instead, each by its class name (which fixes how many
    fields follow), each list by its length (an int), each other value by its repr (quoted: no class name)."""
    found: list[object] = []
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, ast.AST):
            found.append(type(item).__name__)
            pending.extend(reversed([getattr(item, field, None) for field in item._fields]))
        elif isinstance(item, list):
            found.append(len(item))
            pending.extend(reversed(item))
        else:
            found.append(repr(item))  # a constant: 1, 1.0 and True differ, as in ast.dump
    return tuple(found)


def base_name(node: ast.expr) -> str | None:
    """The last name of a class reference: `Spec`, `module.Spec` and `Generic[T]` give `Spec`/`Generic`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[...] and the like
        return base_name(node.value)
    return None


def field_default(value: ast.expr) -> ast.expr:
    """The default a dataclass field declares: X for `field(default=X, …)`, else the value itself."""
    if isinstance(value, ast.Call) and base_name(value.func) == "field":
        for keyword in value.keywords:
            if keyword.arg == "default":
                return keyword.value
    return value


def class_names(node: ast.expr) -> set[str]:
    """The classes an isinstance() second argument names: `C`, `(C1, C2)`, `C1 | C2`."""
    if isinstance(node, ast.Tuple):
        return set().union(*(class_names(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return class_names(node.left) | class_names(node.right)
    name = base_name(node)
    return {name} if name else set()


def parse_file(path: Path) -> ast.Module | None:
    """The module's tree; None when it cannot be read (not a regular file, over 10 MiB, …) or parsed."""
    try:
        return parse_source(read_regular_file(path), str(path))
    except OSError:
        return None


def parse_source(data: bytes | None, filename: str) -> ast.Module | None:
    """The tree of a module's bytes; None when there are none or they do not parse."""
    if data is None:
        return None
    try:
        return ast.parse(data, filename=filename)
    except (SyntaxError, ValueError, RecursionError):
        return None


# A function's nodes, kept once walked: the census, the platform reach and the sizing program each walk the same
# functions (a constructor for its `self.` assignments, its `super().__init__` call, its bindings), 55% of the
# nodes they walked on vLLM 0.29.0 were walked before. Only functions: a class or module tree may still change
# (census/skeletons.py completes a class's stubbed methods in place; sizing/single_file.py drops definitions),
# a function's body never does (a stub is replaced by a new node). Weak keys: the trees go with their scan.
_FUNCTION_NODES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """Every node under `node` (and it), in `ast.walk`'s order (breadth first, each node's fields in order), at two
    thirds of its cost: its `iter_child_nodes` and `iter_fields` are generators called once per node, a third of
    the census's walking on vLLM 0.34.0. A function's nodes are listed once and kept."""
    if type(node) is ast.FunctionDef or type(node) is ast.AsyncFunctionDef:
        below = _FUNCTION_NODES.get(node)
        if below is None:
            # The nodes below it only: a list holding the function itself would keep its weak key alive for good.
            below = _FUNCTION_NODES[node] = tuple(nodes_under(node)[1:])
        return chain((node,), below)
    return iter(nodes_under(node))


def nodes_under(node: ast.AST) -> list[ast.AST]:
    """`node` and every node under it, in `ast.walk`'s order: a list read while it grows is the queue, with no
    generator resumed per node (a third less than a generator's walk)."""
    found = [node]
    put = found.append
    for node in found:
        for name in node._fields:
            value = getattr(node, name, None)  # a field a hand-built node never set: skipped, as ast.walk does
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        put(item)
            elif isinstance(value, ast.AST):
                put(value)
    return found


# Padding a block's text to its line costs the tokenizer ~20-30 ns a newline; moving a parsed tree there costs
# ~165-250 ns a character of the block (a walk in Python): break-even near 8 newlines a character. Moving every
# block made 0.34.0's index build 14% slower (8.0 s of CPU, not 7.0); past 16 newlines a character, 29 of its
# 2,981 census block parses move, in no more time, and a crafted module of many small blocks far down (each
# padded to its line: quadratic in the module) costs its size.
_PADDING_PER_CHARACTER = 16


def parse_at(text: str, line: int, filename: str = "<unknown>") -> ast.Module:
    """`text` parsed as the lines from `line` on of a module: line numbers and columns as a whole parse gives
    them (the census's and the sizing program's partial parses). Raises as ast.parse does."""
    if line - 1 <= _PADDING_PER_CHARACTER * len(text):
        return ast.parse("\n" * (line - 1) + text, filename=filename)
    return ast.increment_lineno(ast.parse(text, filename=filename), line - 1)
