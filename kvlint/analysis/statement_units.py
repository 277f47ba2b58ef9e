"""Parse only the part of a large module that holds some lines: the smallest enclosing function or statement.

A module of vLLM's GPU runner is 340 kB; parsing all of it to look at one method costs more than the rest of
an analysis. The enclosing unit is found from indentation alone — a statement starts at its block's
indentation; a function is taken whole, a class or other compound statement is entered — then parsed on its
own, with the module's line numbers. Text that defeats the guess (a string flush left inside a block, a
line inside a multi-line header) makes a unit fail to parse, and the caller parses the whole module instead:
the guess costs speed, never a wrong tree.
"""

from __future__ import annotations

import ast
import re

# Lines that continue a statement at its own indentation: closing brackets, the other clauses of a compound.
_CONTINUATION = re.compile(rb"[)\]}]|(?:else|elif|except|finally)\b")
_FUNCTION = re.compile(rb"(?:async\s+)?def\s")
_COMPOUND = re.compile(rb"(?:class|if|for|while|with|try|async\s+for|async\s+with)\b")


def unit_spans(text_lines: list[bytes], lines: set[int]) -> list[tuple[int, int]] | None:
    """The (first, last) lines of each unit holding any of `lines` (1-based) of a module split at b"\\n".

    None when a unit cannot be found: the caller should parse the whole text. A unit guessed wrong (tabs)
    either fails to parse or is still real code with its own line numbers, only less of it.
    """
    spans: set[tuple[int, int]] = set()
    for line in sorted(lines):
        if not 1 <= line <= len(text_lines) or text_lines[line - 1].lstrip().startswith(b"#"):
            continue
        span = _unit_of(text_lines, line)
        if span is None:
            return None
        spans.add(span)
    return sorted(spans)


def _indent(line: bytes) -> int:
    return len(line) - len(line.lstrip(b" "))


def _starts_statement(line: bytes, indent: int) -> bool:
    body = line.lstrip(b" ")
    return bool(body) and _indent(line) == indent and not body.startswith(b"#") and not _CONTINUATION.match(body)


def _ends_unit(line: bytes, indent: int) -> bool:
    """The next statement at this indentation, or code outside the block (an `else:` of the compound above)."""
    body = line.lstrip(b" ")
    return _starts_statement(line, indent) or (bool(body) and not body.startswith(b"#") and _indent(line) < indent)


def _unit_of(text_lines: list[bytes], line: int) -> tuple[int, int] | None:
    """(first, last) line of the smallest function or simple statement holding `line`, as indentation shows."""
    start, end, indent = 1, len(text_lines), 0
    while True:
        first = line
        while first >= start and not _starts_statement(text_lines[first - 1], indent):
            first -= 1
        if first < start:
            return None
        last = line + 1
        while last <= end and not _ends_unit(text_lines[last - 1], indent):
            last += 1
        last -= 1
        header = text_lines[first - 1].lstrip(b" ")
        if first == line or _FUNCTION.match(header) or not _COMPOUND.match(header):
            return first, last
        # Inside a compound statement's body: the statement there at the body's indentation.
        body = next(
            (
                i
                for i in range(first + 1, last + 1)
                if text_lines[i - 1].strip() and not text_lines[i - 1].lstrip().startswith(b"#")
            ),
            None,
        )
        if body is None or _indent(text_lines[body - 1]) <= indent:
            return None
        if _indent(text_lines[line - 1]) < _indent(text_lines[body - 1]):
            return first, last  # on a clause line (`elif …:`, `except …:`): the whole compound
        start, end, indent = body, last, _indent(text_lines[body - 1])


def parse_unit(text_lines: list[bytes], first: int, last: int) -> ast.Module | None:
    """The unit's statements as a module, node line numbers as in the whole text; None if it does not parse alone."""
    source = b"\n".join(text_lines[first - 1 : last])
    indent = _indent(text_lines[first - 1])
    try:
        if indent:  # an indented block parses under a header of its own
            holder = ast.parse(b"if 1:\n" + source)
            module = ast.Module(body=holder.body[0].body, type_ignores=[])
            shift = first - 2
        else:
            module = ast.parse(source)
            shift = first - 1
    except (SyntaxError, ValueError, RecursionError):
        return None
    return ast.increment_lineno(module, shift)
