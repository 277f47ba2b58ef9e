from __future__ import annotations

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter


class TextReporter(Reporter):
    """`path:line:col: CODE message`, one finding a line, then a fix note where one applies. A control
    character in a path or message (a file named with a newline) is written as an escape: one finding,
    one line."""

    NAME = "text"
    MACHINE = False

    def render(self, findings, rules) -> str:
        lines = []
        for f in findings:
            marker = ""
            if f.fix is not None:
                marker = " [*]" if f.fix.applicability.value == "safe" else " [unsafe fix]"
            lines.append(printable(f"{f.path}:{f.line}:{f.column}: {f.code}{marker} {f.message}"))
        return "\n".join(lines) + ("\n" if lines else "")
