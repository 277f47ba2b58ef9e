"""GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=…::message`, or `::warning` for a
warning; the related locations of a root cause are lines of its message.

Every control character of a value is first written as an escape (kvlint.escaping), then the value is
escaped as the runner reads it (`%`; `:` and `,` in properties): a file name cannot end the command
early, start a new one on the next line (a fake `::error`), or send a terminal sequence to the log.
"""

from __future__ import annotations

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter
from kvlint.types import Severity

# The annotation levels GitHub has are error, warning and notice.
COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning"}


def _escape_data(value: str) -> str:
    return _escape_lines([value])


def _escape_lines(lines: list[str]) -> str:
    """Each line made printable, then joined by the runner's own newline escape (one annotation)."""
    return "%0A".join(printable(line).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A") for line in lines)


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    NAME = "github"

    def render(self, findings, rules) -> str:
        lines = []
        for f in findings:
            level = COMMANDS[f.severity]
            properties = ",".join(
                [
                    f"file={_escape_property(f.path)}",
                    f"line={f.line}",
                    f"col={f.column}",
                    f"endLine={f.end_line}",
                    f"endColumn={f.end_column}",
                    f"title={_escape_property(f'{f.code} {f.name}')}",
                ]
            )
            message = [
                f"{f.code} {f.message}",
                *(f"related: {r.path}:{r.line}:{r.column}: {r.code} {r.message}" for r in f.related),
            ]
            lines.append(f"::{level} {properties}::{_escape_lines(message)}")
        return "\n".join(lines) + ("\n" if lines else "")
