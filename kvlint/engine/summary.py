"""What a run comes to: the counts, the one-line summary on stderr, and the exit code (as black's Report).

The exit codes below are the only ones kvlint uses; every command exits through this table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kvlint.types import Applicability, Finding

EXIT_CLEAN = 0  # nothing to report
EXIT_FINDINGS = 1  # findings (check, review), findings left or a file not fixed (fix), cells that disagree (verify)
EXIT_ERROR = 2  # a usage, configuration or internal error: one line on stderr


@dataclass(frozen=True)
class Summary:
    """A `check`: its findings and how many files it read."""

    findings: Sequence[Finding]
    files_checked: int

    @property
    def safe_fixable(self) -> int:
        return sum(1 for f in self.findings if f.fix is not None and f.fix.applicability == Applicability.SAFE)

    @property
    def unsafe_fixable(self) -> int:
        return sum(1 for f in self.findings if f.fix is not None and f.fix.applicability == Applicability.UNSAFE)

    def exit_code(self, exit_zero: bool = False) -> int:
        return EXIT_CLEAN if exit_zero or not self.findings else EXIT_FINDINGS

    def line(self) -> str:
        if not self.findings:
            return f"kvlint: {self.files_checked} files checked, no findings."
        extra = []
        if self.safe_fixable:
            extra.append(f"{self.safe_fixable} fixable with `kvlint fix`")
        if self.unsafe_fixable:
            extra.append(f"{self.unsafe_fixable} more with `--unsafe-fixes`")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return f"kvlint: {len(self.findings)} finding(s) in {self.files_checked} files checked{tail}."

    def statistics(self) -> list[str]:
        """One line per rule that found something: `count  CODE name`, by code."""
        counts = Counter(f"{f.code} {f.name}" for f in self.findings)
        return [f"{count:6d}  {name}" for name, count in sorted(counts.items())]


@dataclass(frozen=True)
class FixSummary:
    """A `fix`: how many files it changed (or would), what is left, whether some file could not be fixed."""

    changed_files: int
    left: Sequence[Finding]
    failed: bool
    diff_only: bool  # --diff: nothing written

    def exit_code(self) -> int:
        # With --diff, a file that would change is as much to act on as a finding left.
        pending = self.left or self.failed or (self.diff_only and self.changed_files)
        return EXIT_FINDINGS if pending else EXIT_CLEAN

    def line(self) -> str:
        verb = "would fix" if self.diff_only else "fixed"
        return f"kvlint: {verb} {self.changed_files} file(s); {len(self.left)} finding(s) left."
