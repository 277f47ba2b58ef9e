"""`# kvlint: ignore[KV101]` (or a bare `# kvlint: ignore`) on a line suppresses findings there."""

from __future__ import annotations

import io
import re
import tokenize

_DIRECTIVE = re.compile(r"#\s*kvlint:\s*ignore(?:\[(?P<codes>[A-Z0-9,\s]+)\])?", re.IGNORECASE)
ALL = frozenset({"*"})


def suppressions(source: str) -> dict[int, frozenset[str]]:
    """Line number → codes suppressed there (`ALL` for a bare ignore). Only real comments count."""
    if "kvlint" not in source:
        return {}
    found: dict[int, frozenset[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.COMMENT:
                continue
            match = _DIRECTIVE.search(token.string)
            if match is None:
                continue
            codes = match.group("codes")
            found[token.start[0]] = (
                frozenset(c.strip().upper() for c in codes.split(",") if c.strip()) if codes else ALL
            )
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def is_suppressed(code: str, lines: range, table: dict[int, frozenset[str]]) -> bool:
    for line in lines:
        codes = table.get(line)
        if codes is not None and (codes is ALL or "*" in codes or any(code.startswith(c) for c in codes)):
            return True
    return False
