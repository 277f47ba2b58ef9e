"""The classes of a set of modules as text: each class's bases, body and methods, found by indentation.

The census (kvlint.analysis.census) asks a few questions of hundreds of model and layer modules — which
classes derive from which, what a method returns, what an attribute is set to. Parsing them all with `ast`
would cost more than the rest of the index; a class header and its indented body answer these questions
from the text. What the text does not settle stays unsettled (None, "?"): never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Starts with the literal word so that the search runs at memchr speed; the line's indentation is checked after.
# The bases are read to a bounded length: an unclosed `(` must not send every match to the end of the file.
_CLASS = re.compile(rb"class[ \t]+(\w+)[ \t]*(?:\(([^)]{0,2000})\))?[ \t]*:")
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(")
_CONSTANT = re.compile(r"^(True|False|None|[A-Za-z_][\w.]*)$")


class _Module:
    """A module's lines, decoded once and only when some class's body is asked for."""

    def __init__(self, data: bytes):
        self.data = data
        self._lines: list[str] | None = None

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.data.decode("utf-8", "replace").split("\n")
        return self._lines


@dataclass
class ClassText:
    name: str
    module: str  # relative path
    line: int
    bases: tuple[str, ...]  # last dotted part of each base, keywords dropped
    indent: int
    source: _Module = field(repr=False)
    _methods: dict[str, str] | None = field(default=None, repr=False)
    _body: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"{self.module}:{self.line}"

    @property
    def body(self) -> str:
        if self._body is None:
            self._read()
        return self._body  # type: ignore[return-value]

    @property
    def methods(self) -> dict[str, str]:
        """Method name → its text (the first definition)."""
        if self._methods is None:
            self._read()
        return self._methods  # type: ignore[return-value]

    def _read(self) -> None:
        lines = self.source.lines
        first = self.line - 1
        end = _block_end(lines, first, self.indent)
        self._body = "\n".join(lines[first:end])
        self._methods = {}
        for index in range(first + 1, end):
            method = _DEF.match(lines[index])
            if method is None or method.group(2) in self._methods:
                continue
            depth = len(method.group(1).expandtabs())
            if depth > self.indent:
                self._methods[method.group(2)] = "\n".join(lines[index : _block_end(lines, index, depth)])


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _block_end(lines: list[str], first: int, indent: int) -> int:
    """The index after the last line of the block whose header is lines[first] (deeper lines, blank and
    comment lines kept)."""
    index = first + 1
    while index < len(lines):
        stripped = lines[index].strip()
        if stripped and not stripped.startswith("#") and _indent(lines[index]) <= indent:
            break
        index += 1
    return index


def classes_of(module: str, data: bytes) -> list[ClassText]:
    """Every class the module defines (nested ones too); bodies are read when first asked for."""
    found = []
    source = _Module(data)
    line, position, line_start, searched = 0, 0, 0, 0
    for match in _CLASS.finditer(data):
        # The start of the match's line, searched back only to the previous match (each byte looked at once).
        line_start = max(line_start, data.rfind(b"\n", searched, match.start()) + 1)
        searched = match.start()
        indentation = data[line_start : match.start()]
        if indentation.strip(b" \t"):
            continue  # not at the start of a line
        line += data.count(b"\n", position, match.start())
        position = match.start()
        bases = []
        for base in (match.group(2) or b"").decode("utf-8", "replace").split(","):
            base = base.strip()
            if base and "=" not in base and not base.startswith("*"):
                bases.append(base.split("[")[0].rsplit(".", 1)[-1].strip())
        indent = len(indentation.expandtabs())
        found.append(ClassText(match.group(1).decode(), module, line + 1, tuple(bases), indent, source))
    return found


def returned_texts(method: str) -> list[str]:
    """What each `return X` line of the method returns, stripped (string operations: nothing backtracks)."""
    found = []
    for line in method.split("\n"):
        words = line.strip().split(None, 1)
        if len(words) == 2 and words[0] == "return":
            found.append(words[1].strip())
    return found


def returned_constant(method: str) -> str | None:
    """`return E.MEMBER` / `return True` as the method's only return: the constant's last part."""
    returns = returned_texts(method)
    if len(returns) != 1 or not _CONSTANT.match(returns[0]):
        return None
    return returns[0].rsplit(".", 1)[-1]


def attribute_values(cls: ClassText, attribute: str) -> set[str] | None:
    """What the class itself sets `attribute` to: constants' last parts, "?" for a value set at run time;
    None when the class says nothing about it."""
    values: set[str] = set()
    if attribute in cls.methods:
        constant = returned_constant(cls.methods[attribute])
        values.add(constant if constant is not None else "?")
    if attribute not in cls.body:
        return values or None
    depth = next(
        (_indent(line) for line in cls.body.split("\n")[1:] if line.strip() and not line.strip().startswith("#")), 4
    )
    # The value is the rest of the line, stripped afterwards: a lazy group before trailing blanks backtracks.
    own = re.compile(rf"^[ \t]{{{depth}}}{attribute}[ \t]*(?::[^=\n]{{1,200}})?=(?!=)(.*)$", re.MULTILINE)
    assigned = re.compile(rf"self\.{attribute}[ \t]*(?::[^=\n]{{1,200}})?=(?!=)(.*)$", re.MULTILINE)
    for pattern in (own, assigned):
        for value in pattern.findall(cls.body):
            value = value.split("#")[0].strip()
            if not value:
                continue
            values.add(value.rsplit(".", 1)[-1] if _CONSTANT.match(value) and "(" not in value else "?")
    return values or None
