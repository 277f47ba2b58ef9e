"""Plain data that flows from rules to reporters and fixes.

Everything here is frozen and picklable (stdlib only), so results can cross process boundaries,
be cached on disk, and be rendered as JSON without touching libcst.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Applicability(str, Enum):
    """How far a fix may be trusted: only SAFE fixes are applied by default."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class TextEdit:
    """Replace source[start:end] (character offsets into the decoded text) with `replacement`."""

    start: int
    end: int
    replacement: str
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class ImportChange:
    """An import the fix needs (`add`) or one it may have made dead (`remove_if_unused`)."""

    module: str
    name: str
    add: bool = True


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: Applicability
    edits: tuple[TextEdit, ...]
    imports: tuple[ImportChange, ...] = ()


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    name: str
    message: str
    severity: Severity = Severity.ERROR
    fix: Fix | None = None
    # A fix the rule would make but cannot here (e.g. no shared resolver in this tree): said once per site.
    fix_unavailable: str | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)


@dataclass(frozen=True)
class FileResult:
    path: str
    findings: tuple[Finding, ...] = ()
    # True when the file was read and parsed; False for a KV000 diagnostic.
    parsed: bool = True
    skipped_by_prefilter: bool = False
    suppressed: int = field(default=0)
    # The traceback of an internal error, shown with --verbose; the finding itself stays one line.
    detail: str | None = None


# The engine's own diagnostic, the one code not emitted by a rule's visitor: the engine and the scan
# report it without importing the rules (rules/kv000_unreadable_file.py documents it and checks this).
UNREADABLE_CODE, UNREADABLE_NAME = "KV000", "unreadable-file"


def unreadable(path: str, cause: str, line: int = 1, column: int = 1) -> FileResult:
    """The result for a file that cannot be analysed: one KV000 finding saying why."""
    finding = Finding(
        path, line, column, line, column, UNREADABLE_CODE, UNREADABLE_NAME, f"cannot analyse this file: {cause}"
    )
    return FileResult(path=path, findings=(finding,), parsed=False)
