"""Findings a pull request causes on lines it does not change, and the changed line each is shown on.

A finding in a changed file, on lines the pull request leaves alone, is still the pull request's doing
when the base revision's scan of the file does not have it (same rule, message and flagged code): a call
that now passes a group spec to a helper makes the helper's `isinstance` a KV101 several lines away.
Counting it only in the review's summary hides what the pull request causes, so it gets a comment on
the changed line that leads to it — a changed call to the function the finding is in — else on the
nearest changed line of that function, else on the nearest changed line of the file. A note under the
comment says where kvlint reports the finding and why it is shown there (review.Note, worded by
render.note_sentence).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from kvlint.review.diff import ChangedFile
from kvlint.review.review import Note
from kvlint.types import Finding

# Note kinds (review.NOTE_KINDS), by what leads the finding to the line its comment sits on.
AT_CALL = "new-finding-at-call"  # a changed call to the function the finding is in
IN_FUNCTION = "new-finding-in-function"  # the nearest changed line of that function
IN_FILE = "new-finding-in-file"  # the nearest changed line of the file


@dataclass(frozen=True)
class Placement:
    """Where a finding's comment goes (`line`, a changed line) and the note that says why."""

    line: int
    note: Note


def finding_key(finding: Finding, lines: list[str]) -> tuple[str, str, str, str]:
    """What a finding says, wherever its line moved to: rule, file, message, the flagged line's text."""
    flagged = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    return finding.code, finding.path, " ".join(finding.message.split()), " ".join(flagged.split())


def new_findings(
    head: Iterable[Finding], head_texts: Mapping[str, str], base: Iterable[Finding], base_texts: Mapping[str, str]
) -> list[Finding]:
    """The head findings the base revision does not have (as many of each as the head has more). Only the
    files that hold a finding are split into lines, one file at a time."""
    head, base = list(head), list(base)
    before = Counter(_keys(base, base_texts))
    found = []
    for finding, key in zip(head, _keys(head, head_texts)):
        if before[key] > 0:
            before[key] -= 1
        else:
            found.append(finding)
    return found


def _keys(findings: list[Finding], texts: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
    """finding_key of each finding, in order; each file's lines are held only while its findings are keyed."""
    keys: list = [None] * len(findings)
    by_path: dict[str, list[int]] = {}
    for index, finding in enumerate(findings):
        by_path.setdefault(finding.path, []).append(index)
    for path, indexes in by_path.items():
        lines = texts[path].splitlines() if path in texts else []
        for index in indexes:
            keys[index] = finding_key(findings[index], lines)
    return keys


def place(finding: Finding, changed: ChangedFile, text: str) -> Placement | None:
    """The changed line that shows `finding`, which sits on lines the pull request does not change."""
    if not changed.added:
        return None
    outline = _outline(text)
    function = outline.enclosing(finding.line) if outline is not None else None
    if outline is not None and function is not None:
        calls = [
            line
            for first, last in outline.calls.get(function.name, ())
            if (line := changed.first_added(first, last)) is not None
        ]
        if calls:
            return Placement(_nearest(calls, finding.line), Note(AT_CALL, line=finding.line))
        inside = changed.added.nearest(finding.line, function.lineno, function.end_lineno or 0)
        if inside is not None:
            return Placement(inside, Note(IN_FUNCTION, line=finding.line))
    return Placement(changed.added.nearest(finding.line), Note(IN_FILE, line=finding.line))


@dataclass(frozen=True)
class _Outline:
    """What placing reads of a file, from one parse: its functions, and the calls to each name."""

    functions: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...]
    calls: dict[str, list[tuple[int, int]]]

    def enclosing(self, line: int) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        """The innermost function whose body holds `line`."""
        found = None
        for node in self.functions:
            if node.lineno <= line <= (node.end_lineno or 0) and (found is None or node.lineno >= found.lineno):
                found = node
        return found


@lru_cache(maxsize=2)  # one file's findings are placed one after the other: it is parsed once, not per finding
def _outline(text: str) -> _Outline | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    functions = tuple(node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return _Outline(functions, _calls(tree))


def _nearest(lines: Iterable[int], target: int) -> int:
    return min(lines, key=lambda line: (abs(line - target), line))


def _calls(tree: ast.AST) -> dict[str, list[tuple[int, int]]]:
    """(first line, last line) of every call to `name(...)` or `something.name(...)`, by name."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = node.func
        called = (
            callee.id if isinstance(callee, ast.Name) else callee.attr if isinstance(callee, ast.Attribute) else None
        )
        if called is not None:
            spans.setdefault(called, []).append((node.lineno, node.end_lineno or node.lineno))
    return spans
