"""A class parsed without its methods' bodies, each method parsed when first asked for.

The census follows a constructor (`__init__`) and the few methods it calls; the rest of a model class — its
`forward`, `load_weights` and helpers, more than half of its lines — is never read, yet parsing it cost a
third of the census's time and most of its memory. `parse_skeleton` parses the class with every method but
`__init__` replaced, on its own `def` line, by a stub (`def name(*_): ...`) that keeps the method's decorators
and the source of the rest; `method_of` (what constructor_shapes.method asks) and `complete` parse a stub's
method then and put it in its place in the class body, line numbers and columns as a whole parse gives them.

A class whose methods cannot be cut safely by their lines (a triple-quoted string the cut cannot pair, a
continuation line at the body's indentation) is not given a skeleton: the caller parses it whole. A method
whose text does not parse alone is taken from a whole parse of the class.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from kvlint.analysis.ast_helpers import parse_at
from kvlint.analysis.census.quotes import TRIPLE_QUOTE, inside_strings

# On a stub: (the method's lines from its `def` line, that line's number, the class's text, its first line).
_SOURCE = "_kvlint_method_source"
_METHOD = re.compile(r"([ \t]+)def[ \t]+(\w+)")


def parse_skeleton(text: str, first: int, relative: str) -> ast.ClassDef | None:
    """The class whose text is `text` (its first line is line `first` of the module), its methods but
    `__init__` stubbed; None when its methods cannot be cut safely or the skeleton does not parse."""
    lines = text.split("\n")
    methods = _methods(text, lines)
    if not methods:
        return None
    skeleton = list(lines)
    for start, end, indent, name in methods:
        skeleton[start] = f"{indent}def {name}(*_): ..."
        skeleton[start + 1 : end] = [""] * (end - start - 1)
    try:
        module = parse_at("\n".join(skeleton), first, relative)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    cls = module.body[0] if len(module.body) == 1 else None
    if not isinstance(cls, ast.ClassDef):
        return None
    # The class ends where its text's last line of code does, not at a stub that stands for its last method.
    last = next(i for i in reversed(range(len(lines))) if lines[i].strip() and not lines[i].lstrip().startswith("#"))
    cls.end_lineno, cls.end_col_offset = first + last, len(lines[last].rstrip())
    stubs = {first + start: (start, end) for start, end, _, _ in methods}
    for statement in cls.body:
        if isinstance(statement, ast.FunctionDef) and statement.lineno in stubs:
            start, end = stubs.pop(statement.lineno)
            setattr(statement, _SOURCE, ("\n".join(lines[start:end]), statement.lineno, text, first))
    return cls if not stubs else None  # every stub where a method was cut, or the cut was wrong


def method_of(cls: ast.ClassDef, index: int) -> ast.FunctionDef | None:
    """`cls.body[index]`, a method: parsed now if it is a stub (and put in its place)."""
    stub = cls.body[index]
    source = getattr(stub, _SOURCE, None)
    if source is None:
        return stub  # type: ignore[return-value]
    real = _parse_method(*source)
    if real is None:
        return None
    real.decorator_list = stub.decorator_list  # type: ignore[union-attr]
    cls.body[index] = real
    return real


def complete(statement: ast.stmt) -> ast.stmt:
    """The statement with every stubbed method of it parsed (a whole class, as the platform reach walks it)."""
    if isinstance(statement, ast.ClassDef):
        for index, inner in enumerate(statement.body):
            if hasattr(inner, _SOURCE) and method_of(statement, index) is None:
                del inner.__dict__[_SOURCE]  # unparsable alone and in its class: left a stub
    return statement


def _parse_method(text: str, line: int, class_text: str, class_first: int) -> ast.FunctionDef | None:
    # Inside a class header on the line before: the method keeps the columns and lines of the module.
    try:
        module = parse_at("class _:\n" + text, line - 1)
        method = module.body[0].body[0]  # type: ignore[attr-defined]
        return method if isinstance(method, ast.FunctionDef) and method.lineno == line else None
    except (SyntaxError, ValueError, RecursionError, MemoryError, IndexError):
        pass
    body = _whole_class(class_text, class_first)
    return next((s for s in body if isinstance(s, ast.FunctionDef) and s.lineno == line), None)


@lru_cache(maxsize=2)
def _whole_class(text: str, first: int) -> list[ast.stmt]:
    """The class's statements, parsed whole (once for all its methods that need it: a crafted class of many
    methods that do not parse alone costs one parse, not one per method); [] when it does not parse."""
    try:
        module = parse_at(text, first)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    cls = module.body[0] if module.body else None
    return cls.body if isinstance(cls, ast.ClassDef) else []


def _methods(text: str, lines: list[str]) -> list[tuple[int, int, str, str]]:
    """(first line, line after the last, indentation, name) of each method but `__init__` at the class body's
    indentation (the shallowest `def` in it), by index into `lines`; [] when any cannot be cut safely."""
    inside = inside_strings(text, len(lines))
    defs = [
        (index, match.group(1), match.group(2))
        for index, line in enumerate(lines)
        if not inside[index] and (match := _METHOD.match(line))
    ]
    if not defs:
        return []
    indent = min((found[1] for found in defs), key=len)
    found: list[tuple[int, int, str, str]] = []
    for index, own, name in defs:
        if own != indent or name == "__init__":
            continue
        end = index + 1
        while end < len(lines) and _continues(lines[end], inside[end], indent):
            end += 1
        method = "\n".join(lines[index:end])
        if len(TRIPLE_QUOTE.findall(method)) % 2:
            return []
        found.append((index, end, indent, name))
    return found


def _continues(line: str, inside: int, indent: str) -> bool:
    """Whether a line after a method's `def` is still the method's: inside a string, blank, a comment, a
    closing bracket, or indented deeper than the class body."""
    stripped = line.lstrip(" \t")
    if inside or not stripped or stripped[0] in "#)]}":
        return True
    return len(line) - len(stripped) > len(indent) and line.startswith(indent)
