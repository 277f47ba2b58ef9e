"""GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=…::message`.

Every control character of a value is first written as an escape (kvlint.escaping), then the value is
escaped as the runner reads it (`%`; `:` and `,` in properties): a file name cannot end the command
early, start a new one on the next line (a fake `::error`), or send a terminal sequence to the log.
"""

from __future__ import annotations

from kvlint.escaping import printable
from kvlint.reporters.base import Reporter


def _escape_data(value: str) -> str:
    return printable(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    NAME = "github"

    def render(self, findings, rules) -> str:
        lines = []
        for f in findings:
            level = "error" if f.severity.value == "error" else "warning"
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
            lines.append(f"::{level} {properties}::{_escape_data(f'{f.code} {f.message}')}")
        return "\n".join(lines) + ("\n" if lines else "")
