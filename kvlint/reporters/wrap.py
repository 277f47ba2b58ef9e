"""How wide the text output may be, and prose wrapped to it without cutting a name or a piece of code.

A person copies code out of kvlint's messages (`help:` holds the replacement), so a line break never falls
inside a name: lines break at spaces, and a code span (text between backticks) moves whole to a line of its
own. Only a span longer than a whole line breaks inside, at a space, then after `(`, `[`, `,` or `.`: inside
brackets Python reads such a break as no break, so the copied code still runs. A single name longer than a
whole line is the one thing cut, so that the width always holds.
"""

from __future__ import annotations

import re
import shutil
import unicodedata

# The width when stdout is not a terminal (a file, a pipe, a CI log): what a code review's side-by-side or a
# log viewer shows without scrolling.
DEFAULT_WIDTH = 100
# Narrower than this and the source frame's gutter leaves no room for code.
MINIMUM_WIDTH = 40

# A word: a run of characters without spaces, where a code span (spaces and all) counts as one character; a
# backtick that opens no span is a character like another.
_ATOM = re.compile(r"(?:`[^`]*`|\S)+")
# Where a code span longer than a line may break, tried in turn: at spaces; also after an opening bracket or a
# comma; also after a dot or a slash (a path).
_BREAKS = (re.compile(r"(?<= )"), re.compile(r"(?<=[ (\[{,])"), re.compile(r"(?<=[ (\[{,./])"))


def terminal_width(stream) -> int:
    """The width to wrap to: the terminal's (COLUMNS first, as `shutil.get_terminal_size` reads it) when
    `stream` is a terminal, else DEFAULT_WIDTH."""
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return DEFAULT_WIDTH
    return max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, MINIMUM_WIDTH)


def char_width(char: str) -> int:
    """Columns one character takes in a terminal: 2 for wide East Asian characters, 0 for combining marks."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns `text` takes in a terminal (no escape sequences in it)."""
    return len(text) if text.isascii() else sum(map(char_width, text))


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """`text` after `first`, continued after `rest`, in lines of at most `width` columns, broken at spaces; a
    word or code span that does not fit the line begins the next one, and one longer than a whole line is
    broken as the module docstring says. Runs of spaces between words become one."""
    lines: list[str] = []
    line, empty = first, True
    for atom in _ATOM.findall(text):
        if not empty and display_width(line) + 1 + display_width(atom) <= width:
            line += " " + atom
            continue
        if not empty:
            lines.append(line)
            line = rest
        if display_width(line) + display_width(atom) <= width:
            line += atom
            empty = False
            continue
        # Longer than a line of its own: broken inside (see the module docstring), the rest after `rest`.
        room = min(width - display_width(line), width - display_width(rest))
        pieces = _broken(atom, room)
        for piece in pieces[:-1]:
            lines.append((line + piece).rstrip())
            line = rest
        line += pieces[-1]
        empty = False
    lines.append(line.rstrip() if not empty else first.rstrip())
    return lines


def _broken(atom: str, room: int) -> list[str]:
    """`atom` in pieces of at most `room` columns, with the fewest kinds of break that fit (see _BREAKS)."""
    room = max(room, 1)
    for breaks in _BREAKS:
        pieces = _filled(breaks.split(atom), room)
        if all(display_width(piece.rstrip()) <= room for piece in pieces):
            return pieces
    return _filled(list(atom), room)  # a name longer than a line: the width holds


def _filled(parts: list[str], room: int) -> list[str]:
    """`parts` joined greedily into pieces of at most `room` columns (a part longer than that is a piece)."""
    pieces: list[str] = []
    for part in parts:
        if pieces and display_width((pieces[-1] + part).rstrip()) <= room:
            pieces[-1] += part
        elif part:
            pieces.append(part)
    return pieces or [""]
