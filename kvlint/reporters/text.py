from __future__ import annotations

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter
from kvlint.types import Finding


def finding_lines(finding: Finding, marker: bool = True, note: str = "") -> list[str]:
    """`path:line:col: CODE [*] severity: message`, then one indented line per related location of the
    same root cause: `    related: path:line:col: CODE message`."""
    fix_marker = ""
    if marker and finding.fix is not None:
        fix_marker = " [*]" if finding.fix.applicability.value == "safe" else " [unsafe fix]"
    where = f"{finding.path}:{finding.line}:{finding.column}"
    lines = [f"{where}: {finding.code}{fix_marker} {finding.severity.value}: {finding.message}{note}"]
    lines.extend(f"    related: {r.path}:{r.line}:{r.column}: {r.code} {r.message}" for r in finding.related)
    return [printable(line) for line in lines]


class TextReporter(Reporter):
    """One finding (a root cause) a line with its severity and fix marker, its related locations indented
    under it. A control character in a path or message (a file named with a newline) is written as an
    escape (finding_lines): one finding, one line."""

    NAME = "text"
    MACHINE = False

    def render(self, findings, rules) -> str:
        lines = [line for f in findings for line in finding_lines(f)]
        return "\n".join(lines) + ("\n" if lines else "")
