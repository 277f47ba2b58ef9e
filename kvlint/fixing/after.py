"""What a fresh `kvlint check` of the fixed tree reports: the "finding(s) left" of `kvlint fix`.

A fix can change more than its own file's findings: the cross-file analysis (the tree index: sizing
divergences, container reachability) reads the fixed file too, so a KV103 placed in another function, or
another file, may appear or go. The index is therefore built again from the fixed tree, and every file
whose result may depend on what changed is linted again with it — by the same rule the result cache
follows (scan/index_cache.py: a file's result depends on the index's shared part and on the divergences
placed in its own module). The rest keep the first scan's result, which a fresh check would reproduce.

With `--diff` nothing is written: the fixed tree is a scratch copy of the tree's Python files with the
fixed texts in place; its index is compared with the index of an unfixed copy, so both carry the same root.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from kvlint.analysis.tree_index import TreeIndex, build_tree_index
from kvlint.scan.config import Config
from kvlint.scan.index_cache import index_digests
from kvlint.scan.jobs import Job, WorkerState, codes_for, module_path_of, run_jobs
from kvlint.scan.runner import ScanResult, read_source
from kvlint.types import FileResult, Finding


def findings_after_fix(
    first: ScanResult, fixed: dict[str, bytes], written: bool, config: Config, jobs: int | None
) -> list[Finding]:
    """The findings a fresh check of the scanned paths reports once `fixed` (display path → new bytes)
    is applied; `written`: the new bytes are already on disk."""
    if not fixed:
        return list(first.findings)  # nothing changed: the first scan is a fresh check
    root = first.index.root
    roles = tuple(config.scheduler_only_paths)
    if root is None:  # no tree: no cross-file analysis, only the changed files can change
        before = after = first.project
    elif written:
        before, after = first.project, build_tree_index(Path(root), roles)
    else:
        before, after = _indexes_of_copies(Path(root), fixed, roles)
    again = _to_lint_again(first, fixed, root, before, after)
    state = WorkerState(after, config.rule_settings())
    work = []
    for position, result in enumerate(first.files):
        if position in again:
            data = fixed.get(result.path)
            if data is None:
                data = read_source(result.path, result.path)
                if isinstance(data, FileResult):
                    continue  # gone since the first scan: its first result stands
            codes = codes_for(result.path, first.codes, config)
            work.append(Job(position, result.path, module_path_of(result.path, root), codes, data))
    results = list(first.files)
    for job, result in run_jobs(work, jobs, state):
        results[job.index] = result
    return sorted((f for r in results for f in r.findings if f.code in first.codes), key=Finding.sort_key)


def _to_lint_again(
    first: ScanResult, fixed: dict[str, bytes], root: str | None, before: TreeIndex, after: TreeIndex
) -> set[int]:
    """Positions in `first.files` whose result may differ: the changed files, and the files the index
    change can reach (all that were parsed when its shared part changed, else those of the modules whose
    divergences changed)."""
    old, new = index_digests(before), index_digests(after)
    everything = old.shared != new.shared
    moved = {
        module for module in old.modules.keys() | new.modules.keys() if old.of_module(module) != new.of_module(module)
    }
    again: set[int] = set()
    for position, result in enumerate(first.files):
        if result.path in fixed:
            again.add(position)
        elif not os.path.isfile(result.path) or result.skipped_by_prefilter:
            continue  # a path problem, or a file no rule looks at whatever the index says
        elif everything or module_path_of(result.path, root) in moved:
            again.add(position)
    return again


def _indexes_of_copies(root: Path, fixed: dict[str, bytes], roles: tuple[str, ...]) -> tuple[TreeIndex, TreeIndex]:
    """(index of the tree, index of the tree with `fixed` in place), both read from one scratch copy of its
    Python files so that their digests compare; the tree itself is never written."""
    with tempfile.TemporaryDirectory(prefix="kvlint-fixed-tree-") as scratch:
        copy = Path(scratch)
        shutil.copytree(root / "vllm", copy / "vllm", ignore=_all_but_python, ignore_dangling_symlinks=True)
        before = build_tree_index(copy, roles)
        for display, data in fixed.items():
            try:
                relative = Path(display).resolve().relative_to(root.resolve())
            except ValueError:
                continue  # outside the tree: the index never reads it
            if (copy / relative).is_file():
                (copy / relative).write_bytes(data)
        after = build_tree_index(copy, roles)
    return before, after


def _all_but_python(folder: str, names: list[str]) -> list[str]:
    """Keep real folders and regular .py files only: a link (to /dev/zero, out of the tree), a FIFO or a
    device is never opened by the copy (the walker reports them in the scan itself)."""
    ignored = []
    for name in names:
        try:
            mode = os.lstat(os.path.join(folder, name)).st_mode
        except OSError:
            ignored.append(name)
            continue
        if not (stat.S_ISDIR(mode) or (stat.S_ISREG(mode) and name.endswith(".py"))):
            ignored.append(name)
    return ignored
