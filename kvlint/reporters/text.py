"""The text a person reads, in two layouts (as ruff's `full` and `concise`).

`full` (the default): per finding a headline line, `path:line:col: CODE [*] severity: headline`, then on
indented lines the evidence (the counterexample), the related locations of the same root cause and the
remedy (`help:`); every line at most `WIDTH` columns, long parts wrapped at spaces. `concise`: one line per
finding, `path:line:col: CODE [*] severity: message`, the whole message, for grep.

Paths are shown relative to `base` (the working folder, or a release's root) when they lie under it; the
rules own the words (a `Message`'s headline, detail and remedy), this module only lays them out. A control
character in a path or message is written as an escape (kvlint.escaping): one finding never forges another.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter
from kvlint.types import Finding

WIDTH = 200  # no line of the full layout is longer: readable in a 200-column terminal, and in a CI log
PARAGRAPH = 120  # the indented lines wrap sooner: prose reads better in short lines
INDENT = "    "


def shown_path(path: str, base: Path | None) -> str:
    """`path` relative to `base` when it lies under it (an absolute path elsewhere stays as it is)."""
    if base is None or not os.path.isabs(path):
        return path
    try:
        return Path(path).relative_to(base).as_posix()
    except ValueError:
        return path


def _marker(finding: Finding) -> str:
    if finding.fix is None:
        return ""
    return " [*]" if finding.fix.applicability.value == "safe" else " [unsafe fix]"


def concise_line(finding: Finding, base: Path | None = None, marker: bool = True, note: str = "") -> str:
    """`path:line:col: CODE [*] severity: message` on one line: the whole message (and `note`: why `fix` left
    it), related locations left out."""
    where = f"{shown_path(finding.path, base)}:{finding.line}:{finding.column}"
    fix_marker = _marker(finding) if marker else ""
    said = f"{finding.message} — {note}" if note else finding.message
    return printable(f"{where}: {finding.code}{fix_marker} {finding.severity.value}: {said}")


def _wrapped(text: str, first: str, rest: str, width: int = PARAGRAPH) -> list[str]:
    """`text` after `first`, continued after `rest`, in lines of at most `width` columns (words longer than a
    line are cut: the limit holds)."""
    return textwrap.wrap(
        printable(text),
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [first.rstrip()]


def finding_lines(finding: Finding, base: Path | None = None, marker: bool = True, note: str = "") -> list[str]:
    """One finding in the full layout (see the module docstring); `note` (why `fix` left it) on a line of its own."""
    where = printable(f"{shown_path(finding.path, base)}:{finding.line}:{finding.column}")
    fix_marker = _marker(finding) if marker else ""
    head = f"{where}: {finding.code}{fix_marker} {finding.severity.value}: "
    # A message without parts (KV000, an engine error) is its own headline.
    lines = _wrapped(finding.headline or finding.message, head, INDENT + "  ", WIDTH)
    if finding.detail:
        lines += _wrapped(finding.detail, INDENT, INDENT + "  ")
    for related in finding.related:
        # In the finding's own file a line number says where; elsewhere the path too.
        place = (
            f"line {related.line}"
            if related.path == finding.path
            else f"{shown_path(related.path, base)}:{related.line}"
        )
        lines += _wrapped(
            f"{place}: {related.code} {related.headline or related.message}", INDENT + "related: ", INDENT * 3
        )
    if finding.remedy:
        lines += _wrapped(finding.remedy, INDENT + "help: ", INDENT * 2 + "  ")
    if note:
        lines += _wrapped(note, INDENT + "note: ", INDENT * 2 + "  ")
    return lines


class TextReporter(Reporter):
    """The full layout, findings separated by a blank line (see the module docstring)."""

    NAME = "full"
    MACHINE = False

    def render(self, findings, rules) -> str:
        blocks = ["\n".join(finding_lines(f, self.base)) for f in findings]
        return "\n\n".join(blocks) + ("\n" if blocks else "")


class ConciseReporter(TextReporter):
    """One line per finding (see the module docstring)."""

    NAME = "concise"

    def render(self, findings, rules) -> str:
        lines = [concise_line(f, self.base) for f in findings]
        return "\n".join(lines) + ("\n" if lines else "")
