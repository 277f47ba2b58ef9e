"""One module of the tree parsed for the census, or None: a file Python cannot parse (a syntax error, a NUL byte,
nesting past the parser's or the interpreter's limits, a file too large for memory) builds nothing, and the census
goes on without it — the scan reports that file itself (KV000) where a rule reads it.

The census follows a model's constructor into the classes and functions it reaches, about two thirds of the
model modules' text: `ModuleTrees.statements` parses a module's small top-level statements (imports,
assignments, platform `if`s) at once and each top-level class or function only when it is first reached
(`definition`), at its own lines; a class without its methods but `__init__`, each parsed when asked for
(census.skeletons). A module whose text cannot be cut into top-level blocks safely (a string
spanning one) is parsed whole, as before.
"""

from __future__ import annotations

import ast
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

from kvlint.analysis.ast_helpers import parse_at, walk
from kvlint.analysis.census.quotes import inside_strings
from kvlint.analysis.census.skeletons import complete, parse_skeleton

_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def parsed(data: str | bytes, relative: str) -> ast.Module | None:
    try:
        return ast.parse(data, filename=relative)
    except _UNPARSABLE:
        return None


def parsed_at(text: str, line: int, relative: str) -> ast.Module | None:
    """Lines of a module from `line` on, parsed at their lines (ast_helpers.parse_at), or None."""
    try:
        return parse_at(text, line, relative)
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
        self._classes: dict[tuple[str, int], dict[tuple[str, int], ast.ClassDef]] = {}
        self._last_lines: dict[str, array] = {}
        self._statements: dict[str, list[ast.stmt | Deferred]] = {}
        self._definitions: dict[tuple[str, int], ast.stmt | None] = {}
        self._line_starts: dict[str, array] = {}

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
            for node in walk(statement):
                if isinstance(node, ast.Call):
                    by_line.setdefault(node.lineno, []).append(node)
            self._calls[key] = by_line
        return self._calls[key].get(line, [])

    def block_at(self, relative: str, line: int) -> ast.stmt | None:
        """The top-level statement whose lines hold `line` (a deferred one parsed now, every method of it): the
        first that ends at or past it, by bisection (a scan per question cost a module of many layer classes,
        each asked for, their number squared)."""
        statements = self.statements(relative)
        if relative not in self._last_lines:
            # The greatest last line up to each statement: statements follow one another, so each one's own.
            self._last_lines[relative] = array("q", accumulate(map(_last_line, statements), max))
        index = bisect_left(self._last_lines[relative], line)
        statement = statements[index] if index < len(statements) else None
        if isinstance(statement, Deferred) and statement.first <= line:
            found = self.definition(relative, statement)
            return complete(found) if found is not None else None
        return statement if isinstance(statement, ast.stmt) and _first_line(statement) <= line else None

    def class_at(self, relative: str, line: int, name: str) -> ast.ClassDef | None:
        """The class `name` whose statement is on `line` (top-level or nested in the statement there; the first
        in a walk of it, indexed by one walk)."""
        statement = self.block_at(relative, line)
        if statement is None:
            return None
        key = (relative, statement.lineno)
        if key not in self._classes:
            by_place: dict[tuple[str, int], ast.ClassDef] = {}
            for node in walk(statement):
                if isinstance(node, ast.ClassDef):
                    by_place.setdefault((node.name, node.lineno), node)
            self._classes[key] = by_place
        return self._classes[key].get((name, line))

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
            text = self.source_lines(relative, deferred.first, deferred.last)
            statement = parse_skeleton(text, deferred.first, relative) if deferred.kind == "class" else None
            if statement is None:
                block = parsed_at(text, deferred.first, relative)
                statement = block.body[0] if block is not None and len(block.body) == 1 else None
            if statement is None:  # cut wrongly after all: the whole module, the statement at that line
                tree = self.tree(relative)
                body = tree.body if tree is not None else []
                statement = next((s for s in body if _first_line(s) == deferred.first), None)
            self._definitions[key] = statement
        return self._definitions[key]

    def source_lines(self, relative: str, first: int, last: int) -> str:
        """Lines `first` to `last` (1-based, inclusive) of the module's text, without the last line's end."""
        data = self.texts.get(relative, b"")
        starts = self._line_starts.get(relative)
        if starts is None:
            # Each line's offset, 8 bytes a line (a list of ints would hold ~36): kept for the tree's life.
            starts = array("q", [0, *(match.end() for match in _NEWLINE.finditer(data))])
            self._line_starts[relative] = starts
        start = starts[first - 1] if 0 < first <= len(starts) else len(data)
        end = starts[last] - 1 if last < len(starts) else len(data)
        return data[start:end].decode("utf-8", "replace")


_NEWLINE = re.compile(b"\n")


def _last_line(statement: ast.stmt | Deferred) -> int:
    return statement.last if isinstance(statement, Deferred) else statement.end_lineno or statement.lineno


def _first_line(statement: ast.stmt) -> int:
    decorators = getattr(statement, "decorator_list", None) or []
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _cut(data: bytes) -> list[ast.stmt | Deferred] | None:
    """The module cut at its top-level lines: small statements parsed, definitions deferred; None when a
    block holds an odd number of triple quotes (a string may span blocks) or a small statement does not
    parse alone."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    inside = inside_strings(text, len(lines))
    starts = []
    after_decorator = False
    for index, line in enumerate(lines):
        if inside[index] or not line or line[0] in " \t#)]}" or _CONTINUATION.match(line):
            continue
        if not after_decorator:
            starts.append(index)
        after_decorator = line.startswith("@")
    found: list[ast.stmt | Deferred] = []
    run: list[int] = []  # the starts of the small statements since the last definition
    for start, end in zip(starts, [*starts[1:], len(lines)]):
        block = "\n".join(lines[start:end])
        if (block.count('"""') + block.count("'''")) % 2:
            return None
        match = _DEFINITION.search(block) if block.startswith("@") else _DEFINITION.match(block)
        if match is None:
            run.append(start)
            continue
        if run and not _parse_run(lines, run, start, found):
            return None
        run = []
        kind = "class" if match.group(1) == "class" else "function"
        found.append(Deferred(kind, match.group(2), start + 1, end))
    if run and not _parse_run(lines, run, len(lines), found):
        return None
    return found


def _parse_run(lines: list[str], starts: list[int], end: int, found: list) -> bool:
    """Parse consecutive small statements (`starts`, up to line `end`) in one call and add them to `found`.
    False where some block would not parse alone, as each did before: then the run does not parse, or a
    statement of it spans blocks (its blocks' statements do not each start on the block's first line). Blocks
    that each parse alone end outside any bracket or string, so together they parse into those statements."""
    chunk = parsed_at("\n".join(lines[starts[0] : end]), starts[0] + 1, "")
    if chunk is None or sorted({_first_line(statement) - 1 for statement in chunk.body}) != starts:
        return False
    found.extend(chunk.body)
    return True
