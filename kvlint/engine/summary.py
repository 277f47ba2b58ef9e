"""What a run comes to: the counts, the one-line summary on stderr, and the exit code (as black's Report).

The exit codes below are the only ones kvlint uses; every command exits through this table. Which findings
count for EXIT_FINDINGS is the run's `fail_on` severity (`--fail-on`, `fail-on` in [tool.kvlint]): with
the default, `error`, warnings are reported but do not fail the run; with `warning`, every finding does.
A finding here is a root cause: the findings it folded (kvlint.engine.grouping) are its related locations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvlint.types import Applicability, Finding, Severity

DEFAULT_FAIL_ON = Severity.ERROR


def failing(findings: Sequence[Finding], fail_on: Severity) -> list[Finding]:
    """The findings that fail a run whose threshold is `fail_on`."""
    return [f for f in findings if f.severity.at_least(fail_on)]


def severity_counts(findings: Sequence[Finding]) -> str:
    """`2 errors, 1 warning`: every severity, most severe first."""
    counts = Counter(f.severity for f in findings)
    ordered = sorted(Severity, key=lambda s: -s.rank)
    return ", ".join(f"{counts[s]} {s.value}{'' if counts[s] == 1 else 's'}" for s in ordered)


EXIT_CLEAN = 0  # nothing to report
# findings at or above --fail-on (check, review), such findings left or a file not fixed (fix), cells that
# disagree or a test that regressed (verify)
EXIT_FINDINGS = 1
EXIT_ERROR = 2  # a usage, configuration or internal error: one line on stderr


def exit_code(failed: Sequence[Finding] | bool, *, exit_zero: bool = False, error: bool = False) -> int:
    """The table every command exits through: `error` (an analysis that could not do everything, whatever
    --exit-zero says) before `failed` (the findings past --fail-on, or True for what else fails a run)
    unless --exit-zero."""
    if error:
        return EXIT_ERROR
    return EXIT_FINDINGS if failed and not exit_zero else EXIT_CLEAN


@dataclass(frozen=True)
class Summary:
    """A `check`: its findings and how many files it read."""

    findings: Sequence[Finding]
    files_checked: int
    fail_on: Severity = DEFAULT_FAIL_ON

    @property
    def safe_fixable(self) -> int:
        return sum(1 for f in self.findings if f.fix is not None and f.fix.applicability == Applicability.SAFE)

    @property
    def unsafe_fixable(self) -> int:
        return sum(1 for f in self.findings if f.fix is not None and f.fix.applicability == Applicability.UNSAFE)

    def exit_code(self, exit_zero: bool = False, error: bool = False) -> int:
        return exit_code(failing(self.findings, self.fail_on), exit_zero=exit_zero, error=error)

    def passing_note(self) -> str:
        """`; none fails the run (--fail-on error)` when there are findings and none is past the threshold."""
        if self.findings and not failing(self.findings, self.fail_on):
            return f"; none fails the run (--fail-on {self.fail_on.value})"
        return ""

    def line(self, baseline: tuple[str, int] | None = None) -> str:
        """The summary; `baseline` (REF, how many findings REF had) says what `--baseline-commit` left out."""
        left_out = f"; {baseline[1]} finding(s) present at {baseline[0]} not shown" if baseline else ""
        if not self.findings:
            return f"kvlint: {self.files_checked} files checked, no findings{left_out}."
        extra = []
        if self.safe_fixable:
            extra.append(f"{self.safe_fixable} fixable with `kvlint fix`")
        if self.unsafe_fixable:
            extra.append(f"{self.unsafe_fixable} more with `--unsafe-fixes`")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return (
            f"kvlint: {len(self.findings)} finding(s) ({severity_counts(self.findings)}) in "
            f"{self.files_checked} files checked{tail}{self.passing_note()}{left_out}."
        )

    def statistics(self) -> list[str]:
        """One line per rule and severity: `count  CODE name  severity`, by code, counting root causes (a
        finding with its related locations counts once, under its primary's rule); then the totals."""
        counts = Counter((f.code, f.name, f.severity.value) for f in self.findings)
        lines = [f"{count:6d}  {code} {name}  {severity}" for (code, name, severity), count in sorted(counts.items())]
        related = sum(len(f.related) for f in self.findings)
        lines.append(
            f"{len(self.findings):6d}  root cause(s) ({severity_counts(self.findings)}); "
            f"{related} more finding(s) folded into them as related locations"
        )
        return lines


@dataclass(frozen=True)
class FixSummary:
    """A `fix`: how many files it changed (or would), what is left, whether some file could not be fixed."""

    changed_files: int
    left: Sequence[Finding]
    failed: bool
    diff_only: bool  # --diff: nothing written
    fail_on: Severity = DEFAULT_FAIL_ON  # which findings left fail the run

    def exit_code(self, error: bool = False) -> int:
        # With --diff, a file that would change is as much to act on as a finding left.
        pending = bool(failing(self.left, self.fail_on)) or self.failed or bool(self.diff_only and self.changed_files)
        return exit_code(pending, error=error)

    def line(self) -> str:
        if self.diff_only:
            # exit 1 with nothing left reads as a contradiction unless the line says why
            pending = " (exit 1: the patch is not applied)" if self.changed_files else ""
            return f"kvlint: would fix {self.changed_files} file(s); {len(self.left)} finding(s) left{pending}."
        return f"kvlint: fixed {self.changed_files} file(s); {len(self.left)} finding(s) left."
