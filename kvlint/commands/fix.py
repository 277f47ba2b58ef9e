"""`kvlint fix`: scan, fix each file that has something to fix, list what is left, summarise, exit."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from kvlint.commands.options import (
    fail_on_option,
    resolve_fail_on,
    resolve_options,
    run_scan,
    say_degradations,
    scan_options,
)
from kvlint.engine.summary import FixSummary
from kvlint.escaping import printable
from kvlint.reporters.text import finding_lines
from kvlint.scan.replay import keep_run
from kvlint.types import Applicability, Finding


@click.command()
@scan_options
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff of the fixes and write nothing.")
@click.option(
    "--unsafe-fixes", is_flag=True, help="Also apply fixes that may change behaviour beyond the intended one."
)
@fail_on_option
def fix(
    paths, release, select, ignore, config_path, jobs, verbose, no_cache, cache_dir, show_diff, unsafe_fixes, fail_on
):
    """Apply safe fixes in place, atomically. Exit 0 when no finding at or above --fail-on (default: error) is
    left, 1 when some remain. A read-only file is left alone.

    With --diff, stdout is a patch alone (paths relative to the working folder, as `git diff` writes
    them: `git apply` takes it there) and everything else goes to stderr, the findings left at their lines
    in the files on disk; as with `ruff check --diff`, the exit is 1 also when the patch is not empty."""
    # libcst's codemod machinery: only `fix` needs it
    from kvlint.fixing.after import findings_after_fix
    from kvlint.fixing.fix_file import fix_scanned
    from kvlint.fixing.line_map import LineMap, on_disk

    options = resolve_options(paths, release, config_path, select, ignore, jobs, no_cache, cache_dir, quiet=False)
    result = run_scan(options, progress=True)
    names = PatchNames(Path.cwd(), result.index.root)
    fixed_files: dict[str, bytes] = {}
    line_maps: dict[str, LineMap] = {}
    failed = False
    for attempt in fix_scanned(result, options.config, unsafe_fixes, write=not show_diff, patch_name=names.of):
        if attempt.fixed is None:
            click.echo(f"{printable(attempt.path)}: not fixed: {printable(str(attempt.error))}", err=True)
            failed = True
        elif attempt.fixed.applied:
            fixed_files[attempt.path] = attempt.fixed.fixed
            if show_diff:
                line_maps[attempt.path] = LineMap(attempt.fixed.original, attempt.fixed.fixed)
                click.echo(attempt.fixed.diff, nl=False)
            else:
                codes = ", ".join(sorted({f.code for f in attempt.fixed.applied}))
                click.echo(
                    f"{printable(attempt.path)}: fixed {len(attempt.fixed.applied)} finding(s) ({codes})", err=True
                )
    if show_diff and fixed_files and names.outside:
        click.echo(f"kvlint: the patch's paths are relative to {names.base}: apply it there", err=True)
    # What a fresh `check` of the fixed tree reports: the cross-file analysis is redone on it.
    left = findings_after_fix(result, fixed_files, not show_diff, options.config, options.jobs)
    if show_diff:  # nothing was written: say each finding left where it is in the file on disk
        left = on_disk(left, line_maps)
    blocks = [
        "\n".join(finding_lines(f, options.base, marker=False, note=_note(f, unsafe_fixes)))
        for f in sorted(left, key=Finding.sort_key)
    ]
    if blocks:  # as `check` prints them, a blank line between findings; --diff: stdout holds the patch alone
        click.echo("\n\n".join(blocks), err=show_diff)
    summary = FixSummary(
        len(fixed_files), left, failed, diff_only=show_diff, fail_on=resolve_fail_on(fail_on, options.config)
    )
    click.echo(summary.line(), err=True)
    degraded = say_degradations(result)
    status = summary.exit_code(error=degraded)
    if show_diff:  # writes nothing: kept to be replayed (kvlint.scan.replay) when the same files give the same patch
        repeatable = not (failed or degraded or verbose or release or options.references) and not any(
            file_result.detail for file_result in result.files
        )
        keep_run(status, options.cache_dir, repeatable)
    sys.exit(status)


class PatchNames:
    """The names a patch gives files: relative to the working folder, as `git diff` run there would; for
    files outside it (a fetched release), relative to their vLLM tree's root, which is then said."""

    def __init__(self, working_folder: Path, tree_root: str | None):
        self.working_folder = working_folder
        self.tree_root = Path(tree_root) if tree_root else None
        self.base = working_folder
        self.outside = False

    def of(self, path: str) -> str:
        for base in (self.working_folder, self.tree_root):
            if base is None:
                continue
            for candidate, folder in ((Path(os.path.abspath(path)), base), (Path(path).resolve(), base.resolve())):
                try:
                    relative = candidate.relative_to(folder).as_posix()
                except ValueError:
                    continue
                if base is not self.working_folder:
                    self.base, self.outside = base, True
                return relative
        return os.path.relpath(path, self.working_folder).replace(os.sep, "/")


def _note(finding: Finding, unsafe_fixes: bool) -> str:
    """Why a finding left behind was not fixed, when there is more to say than its message."""
    if finding.fix_unavailable:
        return finding.fix_unavailable
    if finding.fix is not None and not unsafe_fixes and finding.fix.applicability == Applicability.UNSAFE:
        return "unsafe fix not applied (use --unsafe-fixes)"
    return ""
