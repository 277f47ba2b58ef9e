"""The source frame of a finding, as ruff draws it: the flagged line(s) under a line-number gutter, carets
under the flagged range, a line of context on each side.

     |
1400 |         for i in range(len(group_specs)):
1401 |             if not isinstance(group_specs[i].kv_cache_spec, MambaSpec)
     |                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
1402 |                 continue
     |

The file is read through kvlint's one safe reader (kvlint.filesystem: a regular file, never through a link,
never waited on, at most 10 MiB) and decoded as Python would; a file that cannot be read, or no longer has
the flagged line, gets no frame. Tabs become spaces and control characters escapes (kvlint.escaping), so a
source line can neither move the cursor nor misplace the carets; a line wider than the terminal is cut with
`…` around the flagged range (only the frame is cut: the messages never are).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kvlint.engine.source import decode_source
from kvlint.errors import UnreadableSource
from kvlint.escaping import printable
from kvlint.filesystem import read_regular_file
from kvlint.reporters.wrap import char_width, display_width
from kvlint.types import Finding

# A longer range shows its first lines, then `…` in the gutter: the frame says where, the editor shows all.
MOST_LINES = 4
FIRST_LINES = 3
TAB = 4  # columns a tab takes, as ruff shows it
# A source line is read this far (a generated or hostile file may hold megabytes on one line): the window
# shown is a terminal's width, and a range that starts further right has its carets at this edge.
MOST_COLUMNS = 1000
_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what Python (and so the finding's line numbers) counts as a line break

SourceLines = Callable[[str], "list[str] | None"]


def read_source_lines(path: str) -> list[str] | None:
    """The lines of the Python file at `path`, or None when kvlint's reader refuses it or it cannot be decoded."""
    try:
        text = decode_source(read_regular_file(path, follow_symlinks=False)).text
    except (OSError, UnreadableSource):
        return None
    return _LINE_BREAK.split(text)


def cached_reader() -> SourceLines:
    """A reader that reads each file once (a file with several findings is read once per report)."""
    read: dict[str, list[str] | None] = {}

    def lines_of(path: str) -> list[str] | None:
        if path not in read:
            read[path] = read_source_lines(path)
        return read[path]

    return lines_of


def frame_lines(lines: list[str] | None, finding: Finding, width: int, paint) -> list[str]:
    """The frame of `finding` in `lines` (its file's), at most `width` columns wide; [] without the lines."""
    first, last = finding.line, max(finding.end_line, finding.line)
    if not lines or not 1 <= first <= len(lines):
        return []
    last = min(last, len(lines))
    flagged = list(range(first, last + 1))
    elided = len(flagged) > MOST_LINES
    if elided:
        flagged = flagged[:FIRST_LINES]
    before = [first - 1] if first > 1 else []
    after = [last + 1] if not elided and last < len(lines) else []
    gutter = len(str(max([*flagged, *after])))
    room = max(width - gutter - 3, 1)  # `N | ` before the code
    source = {n: lines[n - 1][:MOST_COLUMNS] for n in [*before, *flagged, *after]}
    shown = {n: printable(text.expandtabs(TAB)) for n, text in source.items()}
    # Carets under the range's first line only (to that line's end when the range goes on): a range over
    # several lines is told by the lines the frame shows, not by a row of carets under each.
    carets = {first: _caret_span(source[first], first, finding)}
    left = _window_start(*carets[first], display_width(shown[first]), room)
    blank = paint(" " * gutter + " |", "gutter")
    out = [blank]
    caret_style = "caret-warning" if finding.severity.value == "warning" else "caret-error"
    for number in [*before, *flagged, *after]:
        code = _window(shown[number], left, room)
        out.append((paint(f"{number:>{gutter}} |", "gutter") + (" " + code if code else "")).rstrip())
        if number in carets:
            start, stop = (min(max(column - left, 0), room) for column in carets[number])
            start = min(start, room - 1)
            out.append(blank + " " + " " * start + paint("^" * max(stop - start, 1), caret_style))
    if elided:
        out.append(paint(f"{'…':>{gutter}} |", "gutter"))
    out.append(blank)
    return out


def _caret_span(raw: str, number: int, finding: Finding) -> tuple[int, int]:
    """The display columns [start, stop) the carets take on line `number`, the range's first: from the
    range's start to its end, or to the line's last non-blank when the range goes on."""
    start = finding.column - 1
    stop = finding.end_column - 1 if number == finding.end_line else len(raw.rstrip())

    def column(index: int) -> int:
        return display_width(printable(raw[: max(index, 0)].expandtabs(TAB)))

    return column(start), max(column(stop), column(start) + 1)


def _window_start(start: int, stop: int, line_width: int, room: int) -> int:
    """The first display column shown: 0 when the line fits, its carets do or they start in the window's
    first half; else a few columns before the carets, so that the flagged code starts the window."""
    if line_width <= room or stop <= room or start < room // 2:
        return 0
    return max(min(start - 4, line_width - room), 0)


def _window(text: str, left: int, room: int) -> str:
    """The columns [left, left + room) of `text`, with `…` where text was cut off on either side."""
    if left == 0 and display_width(text) <= room:
        return text
    out, column = [], 0
    for char in text:
        width = char_width(char)
        if column >= left and column + width <= left + room:
            out.append(char)
        column += width
    shown = "".join(out)
    if left > 0:
        shown = "…" + shown[1:]
    if column > left + room:
        shown = shown[:-1] + "…"
    return shown
