"""One module of the tree parsed for the census, or None: a file Python cannot parse (a syntax error, a NUL byte,
nesting past the parser's or the interpreter's limits, a file too large for memory) builds nothing, and the census
goes on without it — the scan reports that file itself (KV000) where a rule reads it."""

from __future__ import annotations

import ast

_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def parsed(data: str | bytes, relative: str) -> ast.Module | None:
    try:
        return ast.parse(data, filename=relative)
    except _UNPARSABLE:
        return None
