"""`kvlint verify --upstream-tests`: vLLM's own tests as runtime proof of `kvlint fix`.

The tree is copied and fixed (rewrite.py); the test modules that import a module the fix changed are
found by reading vLLM's tests/ (selection.py); they run against the original tree and against the fixed
copy, each in a fresh interpreter (pytest_run.py); the report lists every test whose outcome changed and
every test module that could not be collected, with pytest's reason. Nothing of vLLM is imported here.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from kvlint.engine.summary import exit_code
from kvlint.scan.config import Config
from kvlint.verify.pytest_run import PytestRun, PytestSetup, run_tests
from kvlint.verify.rewrite import Rewritten, rewrite_copy
from kvlint.verify.selection import Selection, dotted_module, select_test_modules

NOT_RUN = "not run"


@dataclass(frozen=True)
class Change:
    test: str
    before: str  # an outcome, or NOT_RUN
    after: str
    detail: str  # after's message when it is not a pass, else before's

    @property
    def regression(self) -> bool:
        return self.before == "passed" and self.after != "passed"


@dataclass
class UpstreamReport:
    tree: Path
    tests_root: Path
    python: str
    rewritten: Rewritten
    selection: Selection | None  # None when the fix changed nothing
    not_selected: tuple[str, ...] = ()  # modules asked for (--test-module) that import no changed module
    before: PytestRun | None = None
    after: PytestRun | None = None

    @property
    def changes(self) -> list[Change]:
        if self.before is None or self.after is None:
            return []
        found = []
        for test in sorted(self.before.outcomes.keys() | self.after.outcomes.keys()):
            old, new = self.before.outcomes.get(test), self.after.outcomes.get(test)
            before = old.outcome if old else NOT_RUN
            after = new.outcome if new else NOT_RUN
            if before != after:
                detail = new.detail if new and after != "passed" else (old.detail if old else "")
                found.append(Change(test, before, after, detail))
        return found

    @property
    def newly_uncollected(self) -> list[str]:
        if self.before is None or self.after is None:
            return []
        return sorted(set(self.after.uncollected) - set(self.before.uncollected))

    @property
    def exit_code(self) -> int:
        """0: no test that passed before fails after and nothing became uncollectable; 1 otherwise."""
        worse = any(change.regression for change in self.changes) or bool(self.newly_uncollected)
        return exit_code(worse)


def run_upstream_tests(
    tree: Path,
    tests_root: Path,
    python: str,
    timeout_s: float,
    config: Config,
    only: tuple[str, ...] = (),
    jobs: int | None = None,
    unsafe: bool = False,
) -> UpstreamReport:
    """Fix a copy of `tree`, then run the tests under tests_root/tests that import what changed (of them,
    those in `only` when given: paths relative to tests_root), before and after."""
    with tempfile.TemporaryDirectory(prefix="kvlint-upstream-") as scratch_name:
        scratch = Path(scratch_name)
        rewritten = rewrite_copy(tree, scratch / "fixed", config, jobs, unsafe=unsafe)
        report = UpstreamReport(tree, tests_root, python, rewritten, None)
        if not rewritten.changed:
            return report
        selection = select_test_modules(tests_root, {dotted_module(path) for path in rewritten.changed})
        if only:
            wanted = {PurePosixPath(module).as_posix() for module in only}
            report.not_selected = tuple(sorted(wanted - set(selection.modules)))
            selection = replace(selection, modules=tuple(m for m in selection.modules if m in wanted))
        report.selection = selection
        if not selection.modules:
            return report
        work = scratch / "work"
        work.mkdir()
        setup = PytestSetup(python, tests_root, work, timeout_s)
        report.before = run_tests(setup, tree, report.selection.modules, "before")
        report.after = run_tests(setup, rewritten.root, report.selection.modules, "after")
    return report
