"""Which findings a tree already had: a finding's identity wherever its lines moved, and the subtraction.

`kvlint check --baseline-commit REF` (semgrep's option and meaning) reports only the root causes REF does
not have. A finding is matched by what it is, never by its line: its rule, its file (followed through a
rename), the qualified name of the function it lies in, the code it flags as its syntax tree (else its
tokens: either way comments, parentheses, line breaks, indentation and docstrings left out), each of its
related locations the same way, and its severity (a warning the change makes an error is the change's).
So a function moved within its file keeps its finding old, and so does a comment or docstring edited
anywhere; a change to the flagged code, or a new finding folded into an old root cause, makes the root cause
new. Equal identities are matched as many times as REF has them: a file that now holds one defect twice
reports the second.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kvlint.engine.source import decode_source
from kvlint.errors import UnreadableSource
from kvlint.types import Finding

# Tokens that carry no code: a comment edit, a reflow or a re-indent leaves the identity as it was.
_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
_STRING_PARTS = (
    "STRING",
    "FSTRING_START",
    "FSTRING_MIDDLE",
    "FSTRING_END",
    "TSTRING_START",
    "TSTRING_MIDDLE",
    "TSTRING_END",
)

Position = tuple[int, int]  # (line, column), both as Python's tokenizer counts them: line from 1, column from 0


@dataclass(frozen=True)
class _Token:
    start: Position
    end: Position
    text: str


class FileCode:
    """One file's text as the identities read it: its code tokens and its functions' lines."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.tokens = _code_tokens(text)  # None: the file does not tokenize (a syntax error)
        self.functions = _functions(text)  # (first line with decorators, last line, qualified name), outer first

    def code_in(self, start: Position, end: Position) -> str:
        """The code between `start` and `end`, whatever its layout: its syntax tree when it parses alone
        (parentheses, comments, line breaks and docstrings gone), else its tokens joined by a space."""
        fragment, indent = self._slice(start, end)
        tree = _parsed(fragment, indent)
        if tree is not None:
            return ast.dump(_without_docstrings(tree), include_attributes=False)
        if self.tokens is not None:
            return " ".join(t.text for t in self.tokens if start <= t.start and t.end <= end)
        return " ".join(fragment.split())  # not Python's tokens to be had: the text, whitespace collapsed

    def _slice(self, start: Position, end: Position) -> tuple[str, str]:
        """(the text from `start` to `end`, what stands before it on its first line as spaces)."""
        (first, column), (last, end_column) = start, end
        chunk = self.lines[first - 1 : last]
        if not chunk:
            return "", ""
        chunk[-1] = chunk[-1][:end_column]
        before = chunk[0][:column]
        chunk[0] = chunk[0][column:]
        return "\n".join(chunk), before if not before.strip() else " " * len(before)

    def function_at(self, line: int) -> str:
        """The qualified name (`Class.method.inner`) of the innermost function or class holding `line`."""
        found = ""
        for first, last, name in self.functions:
            if first <= line <= last:
                found = name  # outer ones come first: the last match is the innermost
        return found


def _parsed(fragment: str, indent: str) -> ast.AST | None:
    """The fragment's syntax tree: as an expression (in parentheses, so its line breaks need no care), else
    as statements at the indentation its first line has in the file; None when it is not whole code."""
    if not fragment.strip():
        return None
    for source, mode in ((f"(\n{fragment}\n)", "eval"), (textwrap.dedent(indent + fragment), "exec")):
        try:
            return ast.parse(source, mode=mode)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    return None


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with every statement that is only a string (a docstring) taken out of its body."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [
                s
                for s in body
                if not (
                    isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                )
            ]
            node.body = kept or [ast.Pass()]
    return tree


def _code_tokens(text: str) -> list[_Token] | None:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    kept: list[_Token] = []
    statement: list[tokenize.TokenInfo] = []
    for token in tokens:
        if token.type == tokenize.NEWLINE or token.type == tokenize.ENDMARKER:
            # A statement that is only a string is a docstring (or a comment written as one): not code.
            if not all(tokenize.tok_name[t.type] in _STRING_PARTS for t in statement):
                kept.extend(_Token(t.start, t.end, t.string) for t in statement)
            statement = []
        elif token.type not in _LAYOUT:
            statement.append(token)
    return kept


def _functions(text: str) -> list[tuple[int, int, str]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((first, child.end_lineno or child.lineno, name))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    try:
        visit(tree, "")
    except RecursionError:
        return []
    return found


def file_code(data: bytes) -> FileCode | None:
    """The FileCode of a file's bytes, decoded as Python would; None when it cannot be."""
    try:
        return FileCode(decode_source(data).text)
    except UnreadableSource:
        return None


@dataclass(frozen=True)
class Side:
    """One tree's findings as the identities see them: where each displayed path is in the repository
    (None: outside it, so never old), and the code of a file by its displayed path (None: not readable)."""

    repository_path: Callable[[str], str | None]
    code_of: Callable[[str], FileCode | None]


def identity(finding: Finding, side: Side) -> tuple | None:
    """What `finding` is wherever its lines moved; None when it cannot be said (outside the repository)."""
    path = side.repository_path(finding.path)
    if path is None:
        return None
    related = []
    for location in finding.related:
        related.append((location.code, *_place(location, side)))
    # The severity too: a warning at REF that the change makes an error is a failure the change brings.
    return (finding.code, finding.severity.value, *_place(finding, side), tuple(sorted(related, key=repr)))


def _place(location, side: Side) -> tuple[str | None, str, str]:
    """(repository path, enclosing function, flagged code) of a finding or related location."""
    path = side.repository_path(location.path)
    code = side.code_of(location.path) if path is not None else None
    if code is None:
        return path, "", ""
    start, end = (location.line, location.column - 1), (location.end_line, location.end_column - 1)
    return path, code.function_at(location.line), code.code_in(start, end)


def subtract(current: Iterable[Finding], now: Side, old: Iterable[Finding], before: Side) -> tuple[list[Finding], int]:
    """(the findings of `current` that `old` does not have, how many were left out as old)."""
    remaining = Counter(key for key in (identity(f, before) for f in old) if key is not None)
    shown: list[Finding] = []
    left_out = 0
    for finding in current:
        key = identity(finding, now)
        if key is not None and remaining[key] > 0:
            remaining[key] -= 1
            left_out += 1
        else:
            shown.append(finding)
    return shown, left_out
