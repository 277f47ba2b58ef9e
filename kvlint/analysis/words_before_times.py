"""The words a `*` follows in a module's text, read in linear time: KV102's sieve before any parse.

A product's left operand ends in a word (a name or attribute in its identifier, a gate `… else 1` in `1`), then
closing parentheses, blanks, line continuations and comments may stand before the `*`. The pattern that said so,
`\\b(?=(\\w+))\\1[\\s)\\\\]*(?:#[^\\r\\n]*[\\r\\n][\\s)\\\\]*)*\\*(?!\\*)` with `findall`, tried every word against all that
follows it: a module of comment lines with no `*` after them (`# c` 20,000 times, 80 KB) took 31 s, each word
scanning to the end. Here what lies after a line break is resolved once per line break, and a word's own line
is read only up to its first character that is not a blank, `)` or `\\`: the same words, in the same order, the
pattern's non-overlapping matches included (a word inside a comment a match crossed is not one).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# A word taken whole (`(?=(\w+))\1`: an atomic group before Python 3.11), then what may stand between it and its
# `*` on its line — blanks but line breaks, `)`, `\` — up to a `*`, a comment or the line's end: only such words
# are looked at further (each line's last word and the words before a `*`, not every word of the module).
_WORD_TO_STOP = re.compile(r"\b(?=(\w+))\1(?:[^\S\r\n]|[)\\])*(?=[*#\r\n])")
# From a line break on: blanks (line breaks included), `)` and `\`; then the caller looks at what stops it.
_ANY_LINE_RUN = re.compile(r"[\s)\\]*")
_LINE_BREAK = re.compile(r"[\r\n]")
_FAILED = -1


def words_before_times(text: str) -> Iterator[str]:
    """Each word the pattern above finds, in order: a word, then only blanks, `)`, `\\` and comments to a single `*`."""
    after_break: dict[int, int] = {}  # a line break's position → the `*` it leads to, or _FAILED
    taken_to = 0  # the end of the last match: a word inside it is not tried (as `findall` goes on after a match)
    # The line break ending the line of the word read last: found once per line, not once per word before a comment.
    line_end: int | None = None
    for word in _WORD_TO_STOP.finditer(text):
        if word.start() < taken_to:
            continue
        stop = word.end()
        star = _star_at(text, stop)
        if star is None:  # a comment or a line break: what follows is the next line's
            if line_end is None or (line_end != _FAILED and line_end < stop):
                line_end = _break_from(text, stop)
            star = _after(text, line_end, after_break)
        if star != _FAILED:
            taken_to = star + 1
            yield word.group(1)


def _star_at(text: str, position: int) -> int | None:
    """`position` when a single `*` is there, _FAILED when anything but a comment or a line break is, else None."""
    char = text[position : position + 1]
    if char == "*":
        return position if text[position + 1 : position + 2] != "*" else _FAILED
    if char == "#" or (char and char in "\r\n"):
        return None
    return _FAILED


def _break_from(text: str, position: int) -> int:
    """The line break at or after `position` (the end of a comment), _FAILED when the text ends first."""
    found = _LINE_BREAK.search(text, position)
    return found.start() if found is not None else _FAILED


def _after(text: str, line_break: int, known: dict[int, int]) -> int:
    """The `*` reached from a line break across blank lines, `)`, `\\` and comments, or _FAILED; each line break
    resolved once (a chain of comment lines is followed iteratively, then every break on it is known)."""
    chain: list[int] = []
    result = _FAILED
    while line_break != _FAILED:
        if line_break in known:
            result = known[line_break]
            break
        chain.append(line_break)
        stop = _ANY_LINE_RUN.match(text, line_break).end()
        star = _star_at(text, stop)
        if star is not None:
            result = star
            break
        line_break = _break_from(text, stop)  # a comment (a line break was taken by the run): to its end
    known.update(dict.fromkeys(chain, result))
    return result
