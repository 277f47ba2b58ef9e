"""`check --baseline-commit REF`: only the root causes REF does not have (semgrep's option and meaning).

REF's tree is read from git as the review reads a head commit (kvlint.review.git: `git cat-file` into a
scratch folder; no checkout, hook, filter or driver runs), scanned with the same configuration and rules,
and its findings are subtracted from the current ones by identity (kvlint.scan.baseline: rule, file,
function and flagged code, never the line). Only the files that hold a finding now are scanned at REF
(each under its name at REF when git finds it renamed), with REF's whole tree for the cross-file analysis:
the other files' findings at REF could not match anything.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path

import click

from kvlint.commands.options import Options
from kvlint.commands.quiet import progress_display
from kvlint.errors import TargetError
from kvlint.escaping import printable
from kvlint.filesystem import read_file_inside, read_regular_file
from kvlint.review.git import (
    materialise_python_tree,
    renamed_paths,
    repository_root,
    resolve_commit,
    unborn_head,
)
from kvlint.review.snapshot import snapshot_working_tree
from kvlint.scan.baseline import Side, file_code, subtract
from kvlint.scan.progress import Progress
from kvlint.scan.runner import scan
from kvlint.scan.target_scan import merge_scans
from kvlint.types import Finding


def baseline_option(function):
    return click.option(
        "--baseline-commit",
        metavar="REF",
        help="Report only the root causes not present at this git commit (e.g. HEAD, origin/main, the merge "
        "base): findings are matched by rule, file, function and flagged code, not by line.",
    )(function)


@dataclass(frozen=True)
class Baseline:
    """The commit the findings are compared with, resolved before the scan (a bad REF costs no scan)."""

    ref: str
    repo: Path
    name: str  # REF as said on stderr (escaped: `:/text` searches may hold any character)
    commit: str | None  # None: HEAD before the first commit, which has no finding


def resolve_baseline(ref: str, paths: tuple[str, ...]) -> Baseline:
    """REF in the git checkout that holds the first PATH (else the working folder); a one-line error when
    there is none or REF is unknown there."""
    start = Path(paths[0]).absolute() if paths else Path.cwd()
    if not start.exists():  # said as the scan says it, before git is asked about a folder nobody named
        raise TargetError(f"{printable(paths[0])}: no such file or directory")
    repo = repository_root(start if start.is_dir() else start.parent)
    if ref == "HEAD" and unborn_head(repo):
        return Baseline(ref, repo, printable(ref), None)
    return Baseline(ref, repo, printable(ref), resolve_commit(repo, ref))


def without_old_findings(findings: list[Finding], options: Options, baseline: Baseline) -> tuple[list[Finding], int]:
    """(the findings REF does not have, how many were left out as present at REF)."""
    if baseline.commit is None or not findings:
        return findings, 0
    repo = baseline.repo
    now = Side(_repository_path_function(repo), _code_on_disk())
    with tempfile.TemporaryDirectory(prefix="kvlint-baseline-") as scratch_name:
        scratch = Path(scratch_name)
        meter = Progress(progress_display())
        meter.phase(f"reading {baseline.name} from git")
        tree = scratch / "ref"
        tree.mkdir()
        materialise_python_tree(repo, baseline.commit, tree)
        names = _names_at(repo, baseline.commit, tree, scratch, findings, now)
        targets = sorted({name for name in names.values() if name is not None})
        old: list[Finding] = []
        if targets:
            meter.phase(f"scanning {baseline.name}'s version of {len(targets)} file(s), to tell new findings from old")
            # Judged as the scan it is compared with: against the same releases, for code outside the vLLM tree.
            results = [
                scan(
                    [Path(p) for p in targets],
                    options.config,
                    options.select,
                    options.ignore,
                    options.jobs,
                    cache_dir=None,
                    progress=progress_display(),
                    display_root=tree,
                    reference=reference,
                    target=options.target_names,
                )
                for reference in options.references or (None,)
            ]
            result = merge_scans(results, options.versions)
            old = result.findings
            for line in result.degradations:
                click.echo(
                    f"kvlint: {baseline.name}: {printable(str(line))} (its findings may be shown as new)", err=True
                )

        def now_path(display: str) -> str | None:
            path = now.repository_path(display)
            return names.get(path, path) if path is not None else None

        before = Side(lambda path: path, _code_in(tree))
        return subtract(findings, Side(now_path, now.code_of), old, before)


def _names_at(
    repo: Path, commit: str, tree: Path, scratch: Path, findings: list[Finding], now: Side
) -> dict[str, str | None]:
    """Repository path now -> its path at REF (None: not there) for every file a finding names. git's
    renames are looked for only when a file is missing at REF: the snapshot reads the whole working tree."""
    paths = {now.repository_path(f.path) for f in findings}
    paths |= {now.repository_path(r.path) for f in findings for r in f.related}
    names: dict[str, str | None] = {p: (p if (tree / p).is_file() else None) for p in paths if p is not None}
    if all(name is not None for name in names.values()):
        return names
    snapshot, environment, _ = snapshot_working_tree(repo, scratch / "snapshot")
    renames = renamed_paths(repo, commit, snapshot, environment)
    for path, name in names.items():
        if name is None and path in renames and (tree / renames[path]).is_file():
            names[path] = renames[path]
    return names


def _repository_path_function(repo: Path):
    root = str(repo)

    @cache
    def repository_path(display: str) -> str | None:
        """The path in the repository of a file the scan shows as `display` (relative to the working folder)."""
        for absolute in (os.path.abspath(display), os.path.realpath(display)):
            relative = os.path.relpath(absolute, root)
            if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
                return Path(relative).as_posix()
        return None

    return repository_path


def _code_on_disk():
    @lru_cache(maxsize=8)
    def code_of(display: str):
        try:
            return file_code(read_regular_file(display))
        except OSError:
            return None

    return code_of


def _code_in(tree: Path):
    @lru_cache(maxsize=8)
    def code_of(path: str):
        try:
            return file_code(read_file_inside(tree, path))
        except OSError:
            return None

    return code_of
