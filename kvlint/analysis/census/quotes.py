"""Which lines of a module's text start inside a triple-quoted string: read before a module, or a class, is cut
at the lines where its statements begin (census.parsing, census.skeletons), so that a line of a docstring is
never taken for a statement.
"""

from __future__ import annotations

import re

# A triple quote, either kind: a module's strings that may span lines open and close at these.
TRIPLE_QUOTE = re.compile(r'"""|\'\'\'')


def inside_strings(text: str, count: int) -> bytearray:
    """Per line of `text` (`count` lines): 1 where the line starts inside a triple-quoted string. Each triple
    quote closes the open one of its kind or, with none open, opens one (a single-quoted string or a comment
    holding one is read so too, as a tokenizer would not: a block it spans then fails its own quote count)."""
    inside = bytearray(count)
    open_quote, opened, line, at = "", 0, 0, 0
    for match in TRIPLE_QUOTE.finditer(text):
        line += text.count("\n", at, match.start())
        at = match.start()
        if not open_quote:
            open_quote, opened = match.group(), line
        elif match.group() == open_quote:
            inside[opened + 1 : line + 1] = b"\x01" * (line - opened)
            open_quote = ""
    if open_quote:  # never closed: every line after it
        inside[opened + 1 :] = b"\x01" * (count - opened - 1)
    return inside
