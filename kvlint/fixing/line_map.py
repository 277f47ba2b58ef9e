"""Where a line of a fixed file stood before the fix.

`kvlint fix --diff` writes nothing, yet the findings it lists as left are those of a fresh check of the
*fixed* texts (fixing/after.py): their lines must be turned back into the lines of the file on disk, which
is what the user opens (a fix that adds an import moves every later line).
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from kvlint.types import Finding


class LineMap:
    """Fixed line → original line, from the line-level difference of the two texts."""

    def __init__(self, original: bytes, fixed: bytes):
        matcher = difflib.SequenceMatcher(None, original.split(b"\n"), fixed.split(b"\n"), autojunk=False)
        self._blocks = matcher.get_opcodes()

    def original_line(self, line: int) -> int:
        index = line - 1
        for tag, old_start, _old_end, new_start, new_end in self._blocks:
            if new_start <= index < new_end:
                if tag == "equal":
                    return old_start + (index - new_start) + 1
                return old_start + 1  # a line the fix wrote: the place its change starts on disk
        return line


def on_disk(findings: list[Finding], maps: dict[str, LineMap]) -> list[Finding]:
    """`findings` of the fixed texts, placed at the lines of the files as they are on disk (`maps`: a path's
    fixed → original lines, for the files a fix changed)."""
    placed = []
    for finding in findings:
        line_map = maps.get(finding.path)
        related = tuple(
            _moved(location, maps[location.path]) if location.path in maps else location for location in finding.related
        )
        if line_map is not None:
            finding = _moved(finding, line_map)
        placed.append(replace(finding, related=related))
    return placed


def _moved(location, line_map: LineMap):
    line = line_map.original_line(location.line)
    end_line = max(line, line_map.original_line(location.end_line))
    return replace(location, line=line, end_line=end_line)
