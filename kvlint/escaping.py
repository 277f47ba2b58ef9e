"""How a name or message from outside kvlint is shown to a person: every character that could start a line,
move the cursor or reorder the text is written as an escape.

A file name can hold a newline (a fake `::error` workflow command on the next line of the log), an escape
sequence for the terminal, a right-to-left override, or bytes that are not UTF-8 (which would end the
output with an encoding error). Every human output runs its paths and messages through `printable`.
A leaf module: it imports nothing of kvlint.
"""

from __future__ import annotations

_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` with every control, format (bidi, zero-width) and separator character, and every undecodable
    byte, written as an escape: a file name cannot start a new line (a fake `::error` workflow command on
    stderr, a fake heading in markdown) or reorder what a reader sees."""
    if text.isprintable():
        return text
    return "".join(_escaped_char(char) for char in text)


def _escaped_char(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if char.isprintable() or char == " ":
        return char
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
