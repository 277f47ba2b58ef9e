"""Colour in the text output: whether to use it (`--color auto|always|never` and the environment, as ruff
reads them) and the styles of each part of a finding.

`auto` colours only a terminal, and the environment decides before the terminal does, in ruff's order:
FORCE_COLOR (non-empty) and CLICOLOR_FORCE (not `0`) force colour, NO_COLOR (set) and CLICOLOR=0 turn it off.
`always` and `never` win over the environment (ruff's `--color`). Styles are added after the text is laid out,
so the widths are those of the plain text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

CHOICES = ("auto", "always", "never")

_RESET = "\x1b[0m"
# ruff's palette: the code and carets red, `[*]` cyan, the message bold, the frame's gutter and arrow blue.
STYLES = {
    "code": "1;31",
    "error": "1;31",
    "warning": "1;33",
    "fixable": "36",
    "message": "1",
    "gutter": "1;34",
    "caret-error": "1;31",
    "caret-warning": "1;33",
    "label": "1;36",
    "related": "1;34",
}
_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def use_colour(choice: str, stream, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour what goes to `stream` (see the module docstring)."""
    if choice != "auto":
        return choice == "always"
    environ = os.environ if environ is None else environ
    if environ.get("FORCE_COLOR") or environ.get("CLICOLOR_FORCE", "0") != "0":
        return True
    if "NO_COLOR" in environ or environ.get("CLICOLOR") == "0":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


class Painter:
    """Styles text when colour is on; leaves it as it is otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, style: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{STYLES[style]}m{text}{_RESET}"


def plain(text: str) -> str:
    """`text` without its colour: what a terminal shows of it."""
    return _ESCAPE.sub("", text)
