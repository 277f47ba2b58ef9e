"""Plain data that flows from rules to reporters and fixes.

Everything here is frozen and picklable (stdlib only), so results can cross process boundaries,
be cached on disk, and be rendered as JSON without touching libcst. `Finding.to_data` / `Finding.from_data`
give the plain-JSON form (str, int, None, lists and dicts only) that a cache codec stores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Applicability(str, Enum):
    """How far a fix may be trusted: only SAFE fixes are applied by default."""

    SAFE = "safe"
    UNSAFE = "unsafe"


class Severity(str, Enum):
    """How much a finding matters: `error`, a divergence the tree can reach (a counterexample it can build);
    `warning`, code that agrees with the resolver today but restates it by hand, or a choice the analysis
    cannot settle. `--fail-on` picks the lowest severity that fails a run."""

    ERROR = "error"
    WARNING = "warning"

    @property
    def rank(self) -> int:
        """Higher is more severe: `max(findings, key=lambda f: f.severity.rank)` is the worst."""
        return _SEVERITY_RANKS[self]

    def at_least(self, threshold: Severity) -> bool:
        return self.rank >= threshold.rank


_SEVERITY_RANKS = {Severity.WARNING: 1, Severity.ERROR: 2}


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
class Message:
    """A rule's message in parts, for a reader: a short `headline` (what is wrong, for which kind), the
    `detail` (the counterexample, the evidence, what the headline does not say) and the `remedy`. `text` is
    the whole message, as machine formats carry it: `statement` (the finding in one sentence) when the rule
    gives one, else the detail, then the remedy."""

    headline: str
    detail: str
    remedy: str | None = None
    statement: str | None = None
    # The spec kinds it diverges for, as the sizing matrix labels them (counterexample first): `kvlint paths`
    # marks those cells of the path the finding lies in.
    kinds: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        body = self.statement or self.detail
        return f"{body}; {self.remedy}" if self.remedy else body


@dataclass(frozen=True)
class RelatedLocation:
    """Another finding of the same root cause, folded into a primary finding (kvlint.engine.grouping):
    where it is, which rule found it and what that rule said."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    headline: str | None = None  # the related finding's own headline (Message.headline), if it had one
    kinds: tuple[str, ...] = ()  # the related finding's own kinds (Message.kinds)


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
    # The other findings of this root cause, in file order; empty for a finding that stands alone.
    related: tuple[RelatedLocation, ...] = ()
    # The parts of `message` (the whole text) when the rule gave them: what the text output lays out.
    headline: str | None = None
    detail: str | None = None
    remedy: str | None = None
    kinds: tuple[str, ...] = ()  # Message.kinds

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.code)

    def to_data(self) -> dict:
        """This finding as plain JSON data; `Finding.from_data` reads it back equal."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "fix": None if self.fix is None else _fix_data(self.fix),
            "fix_unavailable": self.fix_unavailable,
            "related": [_fields(r) for r in self.related],
            "headline": self.headline,
            "detail": self.detail,
            "remedy": self.remedy,
            "kinds": list(self.kinds),
        }

    @classmethod
    def from_data(cls, data: dict) -> Finding:
        """The finding `to_data` wrote. Raises KeyError, TypeError or ValueError on data of another shape."""
        fix = data["fix"]
        return cls(
            path=data["path"],
            line=data["line"],
            column=data["column"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            code=data["code"],
            name=data["name"],
            message=data["message"],
            severity=Severity(data["severity"]),
            fix=None if fix is None else _fix_from(fix),
            fix_unavailable=data["fix_unavailable"],
            related=tuple(_related_from(r) for r in data["related"]),
            headline=data["headline"],
            detail=data["detail"],
            remedy=data["remedy"],
            kinds=tuple(data["kinds"]),
        )


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

    def to_data(self) -> dict:
        """This result as plain JSON data; `FileResult.from_data` reads it back equal."""
        return {
            "path": self.path,
            "findings": [f.to_data() for f in self.findings],
            "parsed": self.parsed,
            "skipped_by_prefilter": self.skipped_by_prefilter,
            "suppressed": self.suppressed,
            "detail": self.detail,
        }

    @classmethod
    def from_data(cls, data: dict) -> FileResult:
        """The result `to_data` wrote. Raises KeyError, TypeError or ValueError on data of another shape."""
        return cls(
            path=data["path"],
            findings=tuple(Finding.from_data(f) for f in data["findings"]),
            parsed=data["parsed"],
            skipped_by_prefilter=data["skipped_by_prefilter"],
            suppressed=data["suppressed"],
            detail=data["detail"],
        )


def _fields(record) -> dict:
    return {
        name: list(value) if isinstance(value := getattr(record, name), tuple) else value
        for name in record.__dataclass_fields__
    }


def _related_from(data: dict) -> RelatedLocation:
    return RelatedLocation(**{**data, "kinds": tuple(data["kinds"])})


def _fix_data(fix: Fix) -> dict:
    return {
        "title": fix.title,
        "applicability": fix.applicability.value,
        "edits": [_fields(e) for e in fix.edits],
        "imports": [_fields(i) for i in fix.imports],
    }


def _fix_from(data: dict) -> Fix:
    return Fix(
        title=data["title"],
        applicability=Applicability(data["applicability"]),
        edits=tuple(TextEdit(**e) for e in data["edits"]),
        imports=tuple(ImportChange(**i) for i in data["imports"]),
    )


# The engine's own diagnostic, the one code not emitted by a rule's visitor: the engine and the scan
# report it without importing the rules (rules/kv000_unreadable_file.py documents it and checks this).
UNREADABLE_CODE, UNREADABLE_NAME = "KV000", "unreadable-file"


def unreadable(path: str, cause: str, line: int = 1, column: int = 1) -> FileResult:
    """The result for a file that cannot be analysed: one KV000 finding saying why."""
    finding = Finding(
        path, line, column, line, column, UNREADABLE_CODE, UNREADABLE_NAME, f"cannot analyse this file: {cause}"
    )
    return FileResult(path=path, findings=(finding,), parsed=False)
