from __future__ import annotations

from kvlint.reporters.base import Reporter


class TextReporter(Reporter):
    """`path:line:col: CODE message`, one finding a line, then a fix note where one applies."""

    NAME = "text"
    MACHINE = False

    def render(self, findings, rules) -> str:
        lines = []
        for f in findings:
            marker = ""
            if f.fix is not None:
                marker = " [*]" if f.fix.applicability.value == "safe" else " [unsafe fix]"
            lines.append(f"{f.path}:{f.line}:{f.column}: {f.code}{marker} {f.message}")
        return "\n".join(lines) + ("\n" if lines else "")
