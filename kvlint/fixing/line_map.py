"""Where a line of a fixed file stood before the fix.

`kvlint fix --diff` writes nothing, yet the findings it lists as left are those of a fresh check of the
*fixed* texts (fixing/after.py): their lines must be turned back into the lines of the file on disk, which
is what the user opens (a fix that adds an import moves every later line).

The two texts are aligned as difflib aligns lines, but piecewise: difflib's matcher costs the product of a
range's lengths where lines repeat (a file of 400 fixed functions, alike but for their names, took 51 s).
The lines both texts hold exactly once, in the same order (patience diff's anchors), cut the texts into
pieces, each aligned by difflib alone; a piece still too large to align (a crafted text with no line of its
own) is one changed block, its lines placed at the block's start.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import replace

from kvlint.types import Finding

# The largest piece difflib aligns (old lines × new lines): a piece between two anchors of vLLM's fixed files
# is a few lines; past this, one changed block (its lines placed at its start, never lost).
MAX_PIECE_PRODUCT = 250_000


class LineMap:
    """Fixed line → original line, from the line-level difference of the two texts."""

    def __init__(self, original: bytes, fixed: bytes):
        self._blocks = aligned(original.split(b"\n"), fixed.split(b"\n"))
        self._new_starts = [block[3] for block in self._blocks]

    def original_line(self, line: int) -> int:
        index = line - 1
        # The blocks cover the fixed text's lines in order: the last starting at or before the line holds it.
        at = bisect_right(self._new_starts, index) - 1
        if at >= 0:
            tag, old_start, _old_end, new_start, new_end = self._blocks[at]
            if new_start <= index < new_end:
                if tag == "equal":
                    return old_start + (index - new_start) + 1
                return old_start + 1  # a line the fix wrote: the place its change starts on disk
        return line


def aligned(old: list[bytes], new: list[bytes]) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes (tag, old start, old end, new start, new end) covering both texts, in order."""
    head, tail = _alike_ends(old, new, 0, len(old), 0, len(new))
    blocks: list[tuple[str, int, int, int, int]] = [("equal", 0, head, 0, head)] if head else []
    old_end, new_end = len(old) - tail, len(new) - tail
    at_old, at_new = head, head
    for anchor_old, anchor_new in [*_anchors(old, new, head, old_end, new_end), (old_end, new_end)]:
        blocks += _piece(old, new, at_old, anchor_old, at_new, anchor_new)
        if anchor_old < old_end:
            blocks.append(("equal", anchor_old, anchor_old + 1, anchor_new, anchor_new + 1))
        at_old, at_new = anchor_old + 1, anchor_new + 1
    if tail:
        blocks.append(("equal", old_end, len(old), new_end, len(new)))
    return blocks


def _alike_ends(old: list[bytes], new: list[bytes], old_start: int, old_end: int, new_start: int, new_end: int):
    """(lines alike at the start, lines alike at the end after those) of two ranges."""
    head = 0
    while old_start + head < old_end and new_start + head < new_end and old[old_start + head] == new[new_start + head]:
        head += 1
    tail = 0
    while (
        old_end - tail > old_start + head
        and new_end - tail > new_start + head
        and old[old_end - 1 - tail] == new[new_end - 1 - tail]
    ):
        tail += 1
    return head, tail


def _anchors(old: list[bytes], new: list[bytes], head: int, old_end: int, new_end: int) -> list[tuple[int, int]]:
    """(old index, new index) of the lines each range holds exactly once, the longest run of them in the same
    order in both (patience sorting)."""
    in_old = Counter(old[head:old_end])
    in_new = Counter(new[head:new_end])
    at_new = {line: index for index in range(head, new_end) if in_new[line := new[index]] == 1}
    pairs = [
        (index, at_new[line]) for index in range(head, old_end) if in_old[line := old[index]] == 1 and line in at_new
    ]
    # The longest increasing run of new indices (old indices increase already): piles, each remembering its
    # predecessor.
    tops: list[int] = []  # per pile length, the smallest new index ending such a run
    ends: list[int] = []  # per pile length, the pair ending it
    before: list[int] = []
    for number, (_, new_index) in enumerate(pairs):
        pile = bisect_left(tops, new_index)
        before.append(ends[pile - 1] if pile else -1)
        if pile == len(tops):
            tops.append(new_index)
            ends.append(number)
        else:
            tops[pile], ends[pile] = new_index, number
    run: list[tuple[int, int]] = []
    number = ends[-1] if ends else -1
    while number >= 0:
        run.append(pairs[number])
        number = before[number]
    return run[::-1]


def _piece(old: list[bytes], new: list[bytes], old_start: int, old_end: int, new_start: int, new_end: int) -> list:
    """The opcodes of the lines between two anchors, positioned in the whole texts. The lines alike at either
    end go with the anchor beside them, as difflib's match of the whole texts would extend it."""
    head, tail = _alike_ends(old, new, old_start, old_end, new_start, new_end)
    blocks = [("equal", old_start, old_start + head, new_start, new_start + head)] if head else []
    old_start, new_start, old_end, new_end = old_start + head, new_start + head, old_end - tail, new_end - tail
    if old_start == old_end and new_start == new_end:
        pass
    elif (
        old_start == old_end
        or new_start == new_end
        or (old_end - old_start) * (new_end - new_start) > MAX_PIECE_PRODUCT
    ):
        tag = "insert" if old_start == old_end else "delete" if new_start == new_end else "replace"
        blocks.append((tag, old_start, old_end, new_start, new_end))
    else:
        matcher = difflib.SequenceMatcher(None, old[old_start:old_end], new[new_start:new_end], autojunk=False)
        blocks += [
            (t, a + old_start, b + old_start, c + new_start, d + new_start) for t, a, b, c, d in matcher.get_opcodes()
        ]
    if tail:
        blocks.append(("equal", old_end, old_end + tail, new_end, new_end + tail))
    return blocks


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
