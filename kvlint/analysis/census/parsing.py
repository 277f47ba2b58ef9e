"""One module of the tree parsed for the census, or None: a file Python cannot parse (a syntax error, a NUL byte,
nesting past the parser's or the interpreter's limits, a file too large for memory) builds nothing, and the census
goes on without it — the scan reports that file itself (KV000) where a rule reads it.

The census follows a model's constructor into the classes and functions it reaches, about two thirds of the
model modules' text: `ModuleTrees.statements` parses a module's small top-level statements (imports,
assignments, platform `if`s) at once and each top-level class or function only when it is first reached
(`definition`), at its own lines. A module whose text cannot be cut into top-level blocks safely (a string
spanning one) is parsed whole, as before.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def parsed(data: str | bytes, relative: str) -> ast.Module | None:
    try:
        return ast.parse(data, filename=relative)
    except _UNPARSABLE:
        return None


# The clauses that go on a compound statement at the top level (`try:` … `except ImportError:`).
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")
# A top-level class or function, its name (after any decorators).
_DEFINITION = re.compile(r"^(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)


@dataclass(frozen=True)
class Deferred:
    """A top-level class or function not parsed yet: its kind ("class" / "function"), name and lines."""

    kind: str
    name: str
    first: int  # 1-based, its first decorator's line
    last: int


class ModuleTrees:
    """The selected modules' texts, each parsed at most once however many readers ask (the census's
    instantiation, the platform reach and its flags read many of the same model and layer modules)."""

    def __init__(self, texts: dict[str, bytes]):
        self.texts = texts
        self._trees: dict[str, ast.Module | None] = {}
        self._calls: dict[tuple[str, int], dict[int, list[ast.Call]]] = {}
        self._statements: dict[str, list[ast.stmt | Deferred]] = {}
        self._definitions: dict[tuple[str, int], ast.stmt | None] = {}

    def tree(self, relative: str) -> ast.Module | None:
        if relative not in self._trees:
            data = self.texts.get(relative)
            self._trees[relative] = parsed(data, relative) if data is not None else None
        return self._trees[relative]

    def calls_at(self, relative: str, line: int) -> list[ast.Call]:
        """The calls of the module that start on `line` (indexed by one walk of its top-level statement)."""
        statement = self.block_at(relative, line)
        if statement is None:
            return []
        key = (relative, statement.lineno)
        if key not in self._calls:
            by_line: dict[int, list[ast.Call]] = {}
            for node in ast.walk(statement):
                if isinstance(node, ast.Call):
                    by_line.setdefault(node.lineno, []).append(node)
            self._calls[key] = by_line
        return self._calls[key].get(line, [])

    def block_at(self, relative: str, line: int) -> ast.stmt | None:
        """The top-level statement whose lines hold `line` (a deferred one parsed now)."""
        for statement in self.statements(relative):
            if isinstance(statement, Deferred):
                if statement.first <= line <= statement.last:
                    return self.definition(relative, statement)
            elif _first_line(statement) <= line <= (statement.end_lineno or statement.lineno):
                return statement
        return None

    def class_at(self, relative: str, line: int, name: str) -> ast.ClassDef | None:
        """The class `name` whose statement is on `line` (top-level or nested in the statement there)."""
        statement = self.block_at(relative, line)
        return next(
            (n for n in ast.walk(statement) if isinstance(n, ast.ClassDef) and n.name == name and n.lineno == line)
            if statement is not None
            else (),
            None,
        )

    def statements(self, relative: str) -> list[ast.stmt | Deferred]:
        """The module's top-level statements, its classes and functions deferred (`definition` parses one)."""
        if relative not in self._statements:
            data = self.texts.get(relative)
            found = _cut(data) if data is not None and relative not in self._trees else None
            if found is None:  # not cut safely (or already parsed whole): the whole module's statements
                tree = self.tree(relative)
                found = list(tree.body) if tree is not None else []
            self._statements[relative] = found
        return self._statements[relative]

    def definition(self, relative: str, deferred: Deferred) -> ast.stmt | None:
        """The class or function statement a deferred entry stands for, parsed at its own lines."""
        key = (relative, deferred.first)
        if key not in self._definitions:
            text = self.texts.get(relative, b"").decode("utf-8", "replace")
            lines = text.split("\n")[deferred.first - 1 : deferred.last]
            block = parsed("\n" * (deferred.first - 1) + "\n".join(lines), relative)
            statement = block.body[0] if block is not None and len(block.body) == 1 else None
            if statement is None:  # cut wrongly after all: the whole module, the statement at that line
                tree = self.tree(relative)
                body = tree.body if tree is not None else []
                statement = next((s for s in body if _first_line(s) == deferred.first), None)
            self._definitions[key] = statement
        return self._definitions[key]


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None) or []
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _quotes_after(line: str, open_quote: str) -> str:
    """The triple quote still open after `line`, given the one open before it ("" for none)."""
    at = 0
    while True:
        if open_quote:
            close = line.find(open_quote, at)
            if close == -1:
                return open_quote
            at, open_quote = close + 3, ""
        else:
            found = [(i, q) for q in ('"""', "'''") if (i := line.find(q, at)) != -1]
            if not found:
                return ""
            i, open_quote = min(found)
            at = i + 3


def _cut(data: bytes) -> list[ast.stmt | Deferred] | None:
    """The module cut at its top-level lines: small statements parsed, definitions deferred; None when a
    block holds an odd number of triple quotes (a string may span blocks) or a small statement does not
    parse alone."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    starts = []
    after_decorator = False
    open_quote = ""  # the triple quote of a string the line starts inside (a docstring's lines at column 0)
    for index, line in enumerate(lines):
        inside, open_quote = open_quote, _quotes_after(line, open_quote)
        if inside or not line or line[0] in " \t#)]}" or _CONTINUATION.match(line):
            continue
        if not after_decorator:
            starts.append(index)
        after_decorator = line.startswith("@")
    found: list[ast.stmt | Deferred] = []
    for start, end in zip(starts, [*starts[1:], len(lines)]):
        block = "\n".join(lines[start:end])
        if (block.count('"""') + block.count("'''")) % 2:
            return None
        match = _DEFINITION.search(block) if block.startswith("@") else _DEFINITION.match(block)
        if match is not None:
            kind = "class" if match.group(1) == "class" else "function"
            found.append(Deferred(kind, match.group(2), start + 1, end))
            continue
        chunk = parsed("\n" * start + block, "")
        if chunk is None:
            return None
        found.extend(chunk.body)
    return found
