"""The text a person reads, in ruff's two layouts, `full` and `concise`.

`full` (the default), per finding:

    KV102 [*] error: `spec.block_size * dcp` gives 16 tokens per block for a UniformTypeKVCacheSpecs{MLA,
      indexer} group at DCP=2, the resolver 32
      --> vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py:44:17
       |
    43 |     ...
    44 |         spec.block_size * dcp
       |         ^^^^^^^^^^^^^^^^^^^^^
    45 |     ...
       |
    the evidence (the counterexample), flush left
    related: line 29: KV103 the other findings of the same root cause
    help: the remedy, its code whole

the headline (`CODE [*] severity: message`), the location, the source frame (kvlint.reporters.source_frame),
then the evidence, the related locations and the remedy. Every line fits the width (the terminal's, or
DEFAULT_WIDTH when stdout is not one), wrapped at spaces, never inside a name or a piece of code
(kvlint.reporters.wrap); colour on a terminal (kvlint.reporters.colour). `concise`: one line per finding,
`path:line:col: CODE [*] severity: message`, the whole message, for grep.

Paths are shown relative to `base` (the working folder, or a release's root) when they lie under it; the
rules own the words (a `Message`'s headline, detail and remedy), this module only lays them out. A control
character in a path, message or source line is written as an escape (kvlint.escaping): one finding never
forges another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter
from kvlint.reporters.colour import Painter, plain
from kvlint.reporters.source_frame import SourceLines, cached_reader, frame_lines, read_source_lines
from kvlint.reporters.wrap import terminal_width, wrap
from kvlint.types import Finding

HEADLINE_INDENT = "  "  # a headline's continuation lines: apart from the flush-left evidence below


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


def finding_lines(
    finding: Finding,
    base: Path | None = None,
    marker: bool = True,
    note: str = "",
    *,
    width: int | None = None,
    colour: bool = False,
    source: SourceLines = read_source_lines,
) -> list[str]:
    """One finding in the full layout (see the module docstring), at most `width` columns wide (None: the
    terminal's, see `terminal_width`); `note` (why `fix` left it) on a line of its own; `source` reads the
    lines of a finding's file for its frame."""
    width = terminal_width(sys.stdout) if width is None else width
    paint = Painter(colour)
    lines = _headline(finding, marker, width, paint)
    frame = frame_lines(source(finding.path), finding, width, paint)
    gutter = max(len(plain(frame[0])) - 2, 0) if frame else 0  # the arrow lines up with the gutter's `|`
    arrow = " " * gutter + "--> "
    where = printable(f"{shown_path(finding.path, base)}:{finding.line}:{finding.column}")
    lines += _painted(wrap(where, width, arrow, " " * len(arrow)), arrow, "gutter", paint)
    lines += frame
    if finding.detail:
        lines += wrap(printable(finding.detail), width)
    for related in finding.related:
        # In the finding's own file a line number says where; elsewhere the path too.
        place = (
            f"line {related.line}"
            if related.path == finding.path
            else f"{shown_path(related.path, base)}:{related.line}"
        )
        said = printable(f"{place}: {related.code} {related.headline or related.message}")
        lines += _labelled("related", said, width, paint)
    if finding.remedy:
        lines += _labelled("help", printable(finding.remedy), width, paint)
    if note:
        lines += _labelled("note", printable(note), width, paint)
    return lines


def _headline(finding: Finding, marker: bool, width: int, paint: Painter) -> list[str]:
    """`CODE [*] severity: headline`, wrapped; a message without parts (KV000, an engine error) is its own."""
    fix_marker = _marker(finding) if marker else ""
    severity = finding.severity.value
    head = f"{finding.code}{fix_marker} {severity}: "
    wrapped = wrap(printable(finding.headline or finding.message), width, head, HEADLINE_INDENT)
    if not paint.enabled:
        return wrapped
    styled_head = (
        paint(finding.code, "code") + paint(fix_marker, "fixable") + " " + paint(f"{severity}:", severity) + " "
    )
    first, *rest = wrapped
    return [
        styled_head + paint(first[len(head) :], "message"),
        *(HEADLINE_INDENT + paint(line[len(HEADLINE_INDENT) :], "message") for line in rest),
    ]


def _labelled(label: str, text: str, width: int, paint: Painter) -> list[str]:
    """`label: text`, continued under the text's first column."""
    head = f"{label}: "
    return _painted(wrap(text, width, head, " " * len(head)), head, "label", paint)


def _painted(lines: list[str], head: str, style: str, paint: Painter) -> list[str]:
    """`lines` with the `head` their first line starts with in `style`."""
    if not paint.enabled or not lines or not lines[0].startswith(head):
        return lines
    return [paint(head.rstrip(), style) + lines[0][len(head.rstrip()) :], *lines[1:]]


class TextReporter(Reporter):
    """The full layout, findings separated by a blank line (see the module docstring)."""

    NAME = "full"
    MACHINE = False

    def __init__(self, base: Path | None = None, *, width: int | None = None, colour: bool = False):
        super().__init__(base)
        self.width = width
        self.colour = colour

    def render(self, findings, rules) -> str:
        source = cached_reader()
        blocks = [
            "\n".join(finding_lines(f, self.base, width=self.width, colour=self.colour, source=source))
            for f in findings
        ]
        return "\n\n".join(blocks) + ("\n" if blocks else "")


class ConciseReporter(TextReporter):
    """One line per finding (see the module docstring)."""

    NAME = "concise"

    def render(self, findings, rules) -> str:
        lines = [concise_line(f, self.base) for f in findings]
        return "\n".join(lines) + ("\n" if lines else "")
