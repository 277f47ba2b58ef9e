"""How `kvlint verify --upstream-tests` shows its result: text for people, JSON for programs."""

from __future__ import annotations

import json
from collections import Counter

from kvlint.verify.pytest_run import OUTCOMES, PytestRun
from kvlint.verify.upstream import UpstreamReport


def _counts(run: PytestRun, module: str | None = None) -> str:
    parts = [f"{run.count(outcome, module)} {outcome}" for outcome in OUTCOMES if run.count(outcome, module)]
    uncollected = [name for name in run.uncollected if module is None or name == module]
    if uncollected:
        parts.append(f"{len(uncollected)} module(s) not collected" if module is None else "not collected")
    return ", ".join(parts) or "no test"


def render_text(report: UpstreamReport) -> str:
    rewritten = report.rewritten
    lines = [f"kvlint verify --upstream-tests: {report.tree}", f"  vLLM's tests from {report.tests_root / 'tests'}"]
    if not rewritten.changed:
        lines.append("kvlint fix changes nothing in this tree: there is no rewrite to test.")
        lines.extend(f"  not fixed: {path}: {why}" for path, why in rewritten.not_fixed)
        return "\n".join(lines) + "\n"
    lines.append(f"kvlint fix applied {rewritten.fixed_findings} fix(es) in {len(rewritten.changed)} file(s):")
    lines.extend(f"  {path}" for path in rewritten.changed)
    lines.extend(f"  not fixed: {path}: {why}" for path, why in rewritten.not_fixed)
    selection = report.selection
    assert selection is not None
    lines.append(
        f"vLLM's test modules that import them: {len(selection.modules)} of {selection.searched:,} read"
        + (f" ({len(selection.unreadable)} could not be read)" if selection.unreadable else "")
    )
    lines.extend(f"  not run: {module} imports no module the fix changed" for module in report.not_selected)
    if not selection.modules:
        lines.append("  none to run: no upstream test module imports a changed module.")
        return "\n".join(lines) + "\n"
    before, after = report.before, report.after
    assert before is not None and after is not None
    lines.append(f"run with {report.python} (vLLM {before.vllm_version}; device: {before.device})")
    lines.append(f"  before: the original tree ({before.seconds:.0f}s)")
    lines.append(f"  after:  the tree as kvlint fix rewrote it ({after.seconds:.0f}s)")
    lines.append("")
    width = max(len(module) for module in selection.modules)
    for module in selection.modules:
        lines.append(f"{module:<{width}}  before: {_counts(before, module)}")
        lines.append(f"{'':<{width}}  after:  {_counts(after, module)}")
    lines.append(f"{'all':<{width}}  before: {_counts(before)}")
    lines.append(f"{'':<{width}}  after:  {_counts(after)}")
    lines.extend(_changes(report))
    lines.extend(_uncollected(report))
    lines.extend(_unchanged_failures(report))
    lines.extend(_skip_reasons(after))
    lines.append("")
    regressions = sum(change.regression for change in report.changes)
    if report.exit_code == 0:
        lines.append("result: no test that passed before fails after; nothing became uncollectable.")
    else:
        lines.append(
            f"result: {regressions} test(s) that passed before do not pass after; "
            f"{len(report.newly_uncollected)} module(s) no longer collected."
        )
    return "\n".join(lines) + "\n"


def _changes(report: UpstreamReport) -> list[str]:
    changes = report.changes
    lines = ["", f"tests whose outcome changed: {len(changes)}"]
    for change in changes:
        mark = "  REGRESSION" if change.regression else ""
        detail = f" — {change.detail}" if change.detail else ""
        lines.append(f"  {change.test}: {change.before} -> {change.after}{mark}{detail}")
    return lines


def _uncollected(report: UpstreamReport) -> list[str]:
    before, after = report.before, report.after
    assert before is not None and after is not None
    modules = sorted(before.uncollected.keys() | after.uncollected.keys())
    lines = ["", f"test modules that could not be collected: {len(modules)}"]
    for module in modules:
        old, new = before.uncollected.get(module), after.uncollected.get(module)
        if old is not None and new is not None:
            when = "before and after" if old == new else f"before ({old}) and after"
            lines.append(f"  {module} ({when}): {new}")
        else:
            lines.append(
                f"  {module} ({'before only' if new is None else 'after only'}): {old if new is None else new}"
            )
    return lines


def _unchanged_failures(report: UpstreamReport, shown: int = 5) -> list[str]:
    """Tests that fail the same way on both trees (a checkpoint they cannot download, a device they lack):
    not caused by the fix, but worth seeing."""
    before, after = report.before, report.after
    assert before is not None and after is not None
    reasons = Counter(
        found.detail or "(no message)"
        for test, found in after.outcomes.items()
        if found.outcome in ("failed", "error")
        and test in before.outcomes
        and before.outcomes[test].outcome == found.outcome
    )
    if not reasons:
        return []
    lines = ["", f"tests that do not pass on either tree: {sum(reasons.values())}, by reason:"]
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
    lines.extend(f"  {count:>4}  {reason}" for reason, count in ranked[:shown])
    if len(ranked) > shown:
        lines.append(f"        … and {len(ranked) - shown} more reason(s) (--format json lists every test)")
    return lines


def _skip_reasons(run: PytestRun) -> list[str]:
    reasons = Counter(
        found.detail or "(no reason given)" for found in run.outcomes.values() if found.outcome == "skipped"
    )
    if not reasons:
        return []
    lines = ["", "skipped after, by their own reasons:"]
    lines.extend(f"  {count:>4}  {reason}" for reason, count in sorted(reasons.items(), key=lambda item: -item[1]))
    return lines


def _run_json(run: PytestRun | None) -> dict | None:
    if run is None:
        return None
    return {
        "vllm_version": run.vllm_version,
        "device": run.device,
        "seconds": round(run.seconds, 1),
        "counts": {outcome: run.count(outcome) for outcome in OUTCOMES},
        "outcomes": {test: {"outcome": o.outcome, "detail": o.detail} for test, o in sorted(run.outcomes.items())},
        "uncollected": dict(sorted(run.uncollected.items())),
    }


def render_json(report: UpstreamReport) -> str:
    selection = report.selection
    document = {
        "tree": str(report.tree),
        "tests": str(report.tests_root / "tests"),
        "python": report.python,
        "changed_files": list(report.rewritten.changed),
        "fixes_applied": report.rewritten.fixed_findings,
        "not_fixed": [{"path": path, "reason": why} for path, why in report.rewritten.not_fixed],
        "test_modules": list(selection.modules) if selection else [],
        "not_selected": list(report.not_selected),
        "test_modules_read": selection.searched if selection else 0,
        "unreadable_test_modules": [{"path": p, "reason": r} for p, r in selection.unreadable] if selection else [],
        "before": _run_json(report.before),
        "after": _run_json(report.after),
        "changed": [
            {"test": c.test, "before": c.before, "after": c.after, "regression": c.regression, "detail": c.detail}
            for c in report.changes
        ],
        "newly_uncollected": report.newly_uncollected,
        "ok": report.exit_code == 0,
    }
    return json.dumps(document, indent=2)
