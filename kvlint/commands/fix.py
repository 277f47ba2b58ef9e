"""`kvlint fix`: scan, fix each file that has something to fix, list what is left, summarise, exit."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlint.commands.options import resolve_options, run_scan, say_degradations, scan_options
from kvlint.engine.summary import EXIT_ERROR, FixSummary
from kvlint.errors import FixError, UnreadableSource
from kvlint.escaping import printable
from kvlint.scan.jobs import WorkerState
from kvlint.types import Applicability, Finding


@click.command()
@scan_options
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of the fixes and write nothing.")
@click.option(
    "--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour beyond the intended one."
)
def fix(paths, release, select, ignore, config_path, jobs, verbose, no_cache, cache_dir, show_diff, unsafe_fixes):
    """Apply safe fixes in place, atomically. Exit 0 when no finding is left, 1 when some remain."""
    # libcst's codemod machinery: only `fix` needs it
    from kvlint.fixing.apply import fixable
    from kvlint.fixing.fix_file import fix_file

    options = resolve_options(paths, release, config_path, select, ignore, jobs, no_cache, cache_dir, quiet=False)
    result = run_scan(options, progress=True)
    state = WorkerState(result.project, options.config.rule_settings())
    left: list[Finding] = []
    changed_files = 0
    failed = False
    for path, findings in sorted(_by_file(result.findings).items()):
        if not any(fixable(f, unsafe_fixes) for f in findings):
            left.extend(findings)
            continue
        try:
            fixed = fix_file(Path(path), path, result.codes, state, options.config, unsafe_fixes, write=not show_diff)
        except (FixError, UnreadableSource, OSError) as error:
            click.echo(f"{printable(path)}: not fixed: {printable(str(error))}", err=True)
            left.extend(findings)
            failed = True
            continue
        if fixed.applied:
            changed_files += 1
            if show_diff:
                click.echo(fixed.diff, nl=False)
            else:
                codes = ", ".join(sorted({f.code for f in fixed.applied}))
                click.echo(f"{printable(path)}: fixed {len(fixed.applied)} finding(s) ({codes})", err=True)
        left.extend(fixed.left)
    for f in sorted(left, key=Finding.sort_key):
        click.echo(printable(f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}{_note(f, unsafe_fixes)}"))
    summary = FixSummary(changed_files, left, failed, diff_only=show_diff)
    click.echo(summary.line(), err=True)
    sys.exit(EXIT_ERROR if say_degradations(result) else summary.exit_code())


def _by_file(findings: list[Finding]) -> dict[str, list[Finding]]:
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    return by_file


def _note(finding: Finding, unsafe_fixes: bool) -> str:
    """Why a finding left behind was not fixed, when there is more to say than its message."""
    if finding.fix_unavailable:
        return f" — {finding.fix_unavailable}"
    if finding.fix is not None and not unsafe_fixes and finding.fix.applicability == Applicability.UNSAFE:
        return " — unsafe fix not applied (use --unsafe-fixes)"
    return ""
