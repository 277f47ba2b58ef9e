"""What a fresh `kvlint check` of the fixed tree reports: the "finding(s) left" of `kvlint fix`.

A fix can change more than its own file's findings: the cross-file analysis (the tree index: sizing
divergences, container reachability) reads the fixed file too, so a KV103 placed in another function, or
another file, may appear or go. The index is therefore built again from the fixed tree, and every file
whose result may depend on what changed is linted again with it — by the same rule the result cache
follows (scan/index_cache.py: a file's result depends on the index's shared part and on the divergences
placed in its own module). The rest keep the first scan's result, which a fresh check would reproduce.

With `--diff` nothing is written: the fixed tree's index is built from the tree with the fixed texts read
in their files' place (TreeFiles' overlay), so it carries the tree's own root and its digests compare with
the first scan's (which the scan already has: nothing is built twice).

With the scan's cache, the fixed tree's index is kept, keyed on the digest of every file of the tree with the
fixed texts put in (kvlint.scan.fixed_index.fixed_tree_index), and each result linted again in a manifest of
its own keyed on that index (the scan's manifest holds the files as they are on disk): a repeated
`fix --diff` builds and lints nothing. Both are signed records, checked as the scan's are.
"""

from __future__ import annotations

import os
from pathlib import Path

from kvlint.fixing.fix_cache import entry_key
from kvlint.scan.config import Config
from kvlint.scan.fixed_index import fixed_tree_index
from kvlint.scan.index_cache import IndexDigests, IndexHandle
from kvlint.scan.jobs import Job, WorkerState, ignored_for, module_path_of, run_jobs
from kvlint.scan.result_cache import ResultCache, configuration_key
from kvlint.scan.runner import ScanResult, cacheable, read_source
from kvlint.scan.storage import content_digest
from kvlint.types import FileResult, Finding


def findings_after_fix(
    first: ScanResult, fixed: dict[str, bytes], written: bool, config: Config, jobs: int | None
) -> list[Finding]:
    """The findings a fresh check of the scanned paths reports once `fixed` (display path → new bytes)
    is applied; `written`: the new bytes are already on disk. With the scan's cache, the fixed tree's index
    and each result linted again are kept (a repeated `fix --diff` builds and lints nothing)."""
    if not fixed:
        return list(first.findings)  # nothing changed: the first scan is a fresh check
    root = first.index.root
    roles = tuple(config.scheduler_only_paths)
    if root is None or first.reference is not None:  # no tree of the files' own: only the changed files change
        after = first.index
        before_digests = after_digests = None
    else:
        after = fixed_tree_index(first.index, _overlay_of(Path(root), fixed), written, first.cache_dir, roles)
        before_digests, after_digests = first.index.digests, after.digests
    again = _to_lint_again(first, fixed, root, before_digests, after_digests)
    settings = config.rule_settings()
    cache = _after_cache(first, after, settings)
    results = list(first.files)
    work, keys = [], {}
    for position, result in enumerate(first.files):
        if position in again:
            data = fixed.get(result.path)
            if data is None:
                data = read_source(result.path, result.path)
                if isinstance(data, FileResult):
                    continue  # gone since the first scan: its first result stands
            ignored = ignored_for(result.path, config)
            job = Job(position, result.path, module_path_of(result.path, root), first.codes, data, ignored)
            if cache is not None:
                scope = (job.module_path, after.digests.of_module(job.module_path))
                keys[position] = (content_digest(data), scope, job.cache_codes)
                hit = cache.matching(job.display, keys[position][0], None, scope, job.cache_codes)
                if hit is not None:
                    results[position] = hit
                    continue
            work.append(job)
    if work:
        for job, result in run_jobs(work, jobs, WorkerState(after.index, settings)):
            results[job.index] = result
            if cache is not None and cacheable(result):
                cache.store(job.display, None, *keys[job.index], result)
    if cache is not None:
        cache.save()
    return sorted((f for r in results for f in r.findings if f.code in first.codes), key=Finding.sort_key)


def _after_cache(first: ScanResult, after: IndexHandle, settings: dict) -> ResultCache | None:
    """The results of the fixed tree's files, kept apart from the scan's own (whose entries hold the files
    as they are on disk): keyed on the fixed tree's index as the scan's are on its own."""
    if first.cache_dir is None or first.cache_key is None or first.also:
        return None
    return ResultCache(
        first.cache_dir, entry_key("after-fix", configuration_key(after.digests.shared, settings, first.codes))
    )


def _to_lint_again(
    first: ScanResult, fixed: dict[str, bytes], root: str | None, old: IndexDigests | None, new: IndexDigests | None
) -> set[int]:
    """Positions in `first.files` whose result may differ: the changed files, and the files the index
    change can reach (all that were parsed when its shared part changed, else those of the modules whose
    divergences changed). No digests: no tree, so no index change."""
    everything = old is not None and new is not None and old.shared != new.shared
    moved = (
        {module for module in old.modules.keys() | new.modules.keys() if old.of_module(module) != new.of_module(module)}
        if old is not None and new is not None
        else set()
    )
    again: set[int] = set()
    for position, result in enumerate(first.files):
        if result.path in fixed:
            again.add(position)
        elif not os.path.isfile(result.path) or result.skipped_by_prefilter:
            continue  # a path problem, or a file no rule looks at whatever the index says
        elif everything or module_path_of(result.path, root) in moved:
            again.add(position)
    return again


def _overlay_of(root: Path, fixed: dict[str, bytes]) -> dict[str, bytes]:
    """The fixed texts by their path relative to the tree ("/"-separated, as TreeFiles lists them); a file
    outside the tree is left out: the index never reads it."""
    overlay = {}
    resolved_root = root.resolve()
    for display, data in fixed.items():
        try:
            relative = Path(display).resolve().relative_to(resolved_root)
        except ValueError:
            continue
        overlay[relative.as_posix()] = data
    return overlay
