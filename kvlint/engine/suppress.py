"""Suppression: `# kvlint: ignore[KV101]` (or a bare `# kvlint: ignore`) on a line, and the configuration's
`ignore` / `per-file-ignores` (and `--ignore`).

One rule for both, applied after the findings of a file are folded into root causes (kvlint.engine.grouping):
- suppressing the finding shown — its code ignored by the configuration, or an ignore comment for its code
  on one of its lines — suppresses its root cause: the finding and every related location folded into it;
- a related location is suppressed on its own (ignored code, or a comment on its own lines): it leaves
  the root cause's related locations, the finding stays.
So `ignore = ["KV105"]` on a site whose finding is a KV105 removes that site, rather than promoting the
KV103 folded under it to a finding.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable
from dataclasses import replace

from kvlint.types import Finding

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


def _selected(code: str, selectors: Iterable[str]) -> bool:
    return any(s.upper() == "ALL" or code.startswith(s.upper()) for s in selectors)


def suppress_root_causes(
    findings: Iterable[Finding], table: dict[int, frozenset[str]], ignored: tuple[str, ...] = ()
) -> tuple[list[Finding], int]:
    """The folded findings of one file that survive the comments in `table` and the `ignored` codes or
    prefixes (see the module docstring), and how many findings (related locations included) were suppressed."""
    kept: list[Finding] = []
    suppressed = 0
    for finding in findings:
        if _selected(finding.code, ignored) or is_suppressed(
            finding.code, range(finding.line, finding.end_line + 1), table
        ):
            suppressed += 1 + len(finding.related)
            continue
        related = tuple(
            r
            for r in finding.related
            if not (_selected(r.code, ignored) or is_suppressed(r.code, range(r.line, r.end_line + 1), table))
        )
        suppressed += len(finding.related) - len(related)
        kept.append(finding if len(related) == len(finding.related) else replace(finding, related=related))
    return kept, suppressed
