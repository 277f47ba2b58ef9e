"""Keep from libcst's native parser the files it cannot survive: deep nesting crashes it (a stack overflow:
SIGSEGV, 6,000 nested parentheses or a 20,000-long attribute chain) and long chains make it quadratic (8,000
subscripts: minutes; a 148 KB nested ternary: 3.4 GB). Such a file becomes one KV000 line; the rest is kept.

Two steps, so that ordinary code pays almost nothing. First a scan of the code with its strings and comments
blanked (by `re`; an f-string is kept, libcst parses its braces) and its backslash continuations joined: a
file is suspect when brackets nest more than 50 deep or a stretch of code without a comma or semicolon (a
line break ends one only outside brackets) is over 1,000 characters. Each level of a chain takes at least one
character, so a file that is not suspect holds no chain over ~1,000 links (libcst: under a second, under
100 MB each). Only a suspect file (in vLLM 0.29.0: 2 of 2,313) is parsed with Python's own parser, whose
limits are checked (200 nested brackets is its syntax error, an exhausted stack its MemoryError or
RecursionError, never a crash), and its syntax tree measured: deeper than 300 (vLLM's deepest file: 29) is
refused. What is left: a file of many chains under these limits parses in time linear in its size, but up
to ~50 times slower than ordinary code (a 10 MiB file of them: many minutes).
"""

from __future__ import annotations

import ast
import re

MAX_BRACKETS = 50  # bracket nesting before the file is measured (vLLM 0.29.0: at most 9)
MAX_RUN = 1_000  # characters of code without a comma or semicolon before the file is measured
MAX_DEPTH = 300  # syntax-tree depth libcst is given (vLLM 0.29.0: at most 29)

# Strings (triple-quoted first) and comments, leftmost first as Python's tokenizer reads them; an
# unterminated one runs to the end of its line (or of the file, for a triple-quoted one).
_NOT_CODE = re.compile(
    r'(?<!\w)(?P<prefix>[rRbBuUfF]{0,2})(?:"""[\s\S]*?(?:"""|\Z)|\'\'\'[\s\S]*?(?:\'\'\'|\Z)'
    r'|"(?:[^"\\\n]|\\[\s\S])*"?|\'(?:[^\'\\\n]|\\[\s\S])*\'?)|#[^\n]*'
)
_MARKS = re.compile(r"[()\[\]{},;\n]")


class TooNested(Exception):
    """The file is beyond what libcst can parse safely; the message is the one-line cause."""


def check_parsable(text: str) -> None:
    """Raise TooNested, or SyntaxError (as Python's parser reports it), for a file libcst must not parse."""
    if not _suspect(text):
        return
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        if "too many nested" in str(error.msg):
            raise TooNested(f"nested too deeply to parse (Python's parser: {error.msg})") from None
        raise
    except (MemoryError, RecursionError):
        raise TooNested("nested too deeply to parse (Python's parser ran out of stack)") from None
    depth = _depth_over(tree, MAX_DEPTH)
    if depth:
        raise TooNested(f"nested too deeply to parse safely (a syntax tree over {MAX_DEPTH} levels deep)")


def code_is_ascii(text: str) -> bool:
    """Whether the file's code, its strings and comments aside, is ASCII (an f-string counts as code)."""
    return text.isascii() or _NOT_CODE.sub(_blank, text).isascii()


def _suspect(text: str) -> bool:
    """Whether `text` may nest deeper than MAX_DEPTH: cheap, and false only for a file that cannot."""
    code = _NOT_CODE.sub(_blank, text).replace("\\\n", "")
    depth = start = 0
    for mark in _MARKS.finditer(code):
        character = mark.group()
        if character in "([{":
            depth += 1
            if depth > MAX_BRACKETS:
                return True
            continue
        if character in ")]}":
            depth -= depth > 0
            continue
        if character == "\n" and depth:
            continue  # inside brackets a line break ends nothing
        if mark.start() - start > MAX_RUN:
            return True
        start = mark.end()
    return len(code) - start > MAX_RUN


def _blank(match: re.Match) -> str:
    """A string or comment as one character (it nests nothing), its line breaks kept; an f-string stays as it
    is: libcst parses the code in its braces."""
    if "f" in (match.group("prefix") or "").lower():
        return match.group()
    return "s" + "\n" * match.group().count("\n")


def _depth_over(tree: ast.AST, limit: int) -> bool:
    """Whether some node of `tree` lies more than `limit` levels below it (walked without recursion)."""
    pending: list[tuple[ast.AST, int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return False
