"""Which safe fixes of one file may become suggestions: those that pass `kvlint fix`'s own gate.

`fix` applies a file's safe fixes, then refuses the result unless it compiles for the oldest Python the
project supports (kvlint.fixing.apply.check_compiles). A suggestion is a fix a person commits with one click,
so it passes that same gate: the file with the fix applied (edit and imports, through apply_fixes) must
compile. One check of the file with all its safe fixes answers for all of them in the usual case; when it
fails, halves are checked in turn until each failing fix stands alone, so k bad fixes among n cost about
2·k·log2(n) checks, never more than MAX_CHECKS per file (a fix left unchecked past that gets no suggestion).
"""

from __future__ import annotations

from kvlint.errors import FixError
from kvlint.fixing.apply import apply_fixes, check_compiles
from kvlint.review.suggestions import FixRegions, Regions
from kvlint.types import Finding, Fix

REFUSED, UNCHECKED = "refused", "unchecked"
MAX_CHECKS = 40  # whole-file checks per file: one bad fix among 2**19 is found within it


class FixGate:
    """The safe fixes among `findings` (one file's) that fail fix's gate, found once on first use."""

    def __init__(self, text: str, path: str, findings: list[Finding], oldest: tuple[int, int] | None):
        self.text, self.path, self.oldest = text, path, oldest
        self._findings = findings
        self._refused: dict[Fix, str] | None = None
        self._checks = 0

    def refusal(self, finding: Finding) -> str | None:
        """ "refused" when this finding's fix fails the gate, "unchecked" when the check budget ran out
        before it was checked; None when it passes."""
        if self._refused is None:
            self._refused = {}
            self._search(list(dict.fromkeys(f.fix for f in self._findings if f.fix is not None)))
        return self._refused.get(finding.fix)

    def _search(self, fixes: list[Fix]) -> None:
        if not fixes:
            return
        if self._checks >= MAX_CHECKS:
            self._refused.update((fix, UNCHECKED) for fix in fixes)
            return
        self._checks += 1
        carriers = [Finding(self.path, 1, 1, 1, 1, "", "", "", fix=fix) for fix in fixes]
        try:
            outcome = apply_fixes(self.text, carriers, unsafe=False)
            check_compiles(outcome.text, self.path, original=self.text, oldest=self.oldest)
        except FixError:
            if len(fixes) == 1:
                self._refused[fixes[0]] = REFUSED
                return
            middle = len(fixes) // 2
            self._search(fixes[:middle])
            self._search(fixes[middle:])
            return
        # A fix whose edits overlap one applied before it was left out (apply_fixes): checked on its own turn.
        applied = {finding.fix for finding in outcome.applied}
        self._search([fix for fix in fixes if fix not in applied])


class Suggestions:
    """The suggestion regions of a review's safe fixes (`findings`), per file; None with the gate's refusal
    for a fix that fails it."""

    def __init__(self, findings: list[Finding], texts: dict[str, str], oldest: tuple[int, int] | None):
        self.texts, self.oldest = texts, oldest
        self.of_path: dict[str, list[Finding]] = {}
        for finding in findings:
            self.of_path.setdefault(finding.path, []).append(finding)
        self.regions: dict[str, FixRegions] = {}
        self.gates: dict[str, FixGate] = {}

    def of(self, finding: Finding) -> tuple[Regions | None, str | None]:
        text = self.texts.get(finding.path)
        if text is None:
            return None, None
        path = finding.path
        if path not in self.gates:
            self.gates[path] = FixGate(text, path, self.of_path.get(path, [finding]), self.oldest)
            self.regions[path] = FixRegions(text)
        refusal = self.gates[path].refusal(finding)
        if refusal is not None:
            return None, refusal
        return self.regions[path].of(finding), None
