"""`scan()`: lint every file under some paths, in phases — plan, cache, triage, execute, store.

Plan: collect the files, open the project index and the result cache. Cache and triage: the parent reads
every file once; it answers unchanged files from the result cache and settles the files no rule's text
prefilter accepts (nothing to report, no parse). Execute: it lints inline the few the engine must
diagnose without parsing (too large, undecodable) and hands the rest — the few files that must be
parsed — to worker processes (scan/jobs.py), largest first so that no worker is left with one big file
at the end. Store: it remembers what is worth keeping. Every file linted goes through `jobs.lint_job`.
"""

from __future__ import annotations

import os
from contextlib import closing
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.analysis.tree_root import find_tree_root
from kvlint.engine.registry import matches, rules_for_codes, select_codes
from kvlint.errors import TargetError
from kvlint.escaping import printable
from kvlint.filesystem import FileTooLarge, describe, read_regular_file
from kvlint.scan.config import Config
from kvlint.scan.files import PathProblem, SourceFile, collect_files
from kvlint.scan.index_cache import IndexHandle, class_headers_of, open_project_index
from kvlint.scan.jobs import Job, WorkerState, ignored_for, lint_job, module_path_of, pool_workers, run_jobs
from kvlint.scan.progress import Display, Progress
from kvlint.scan.result_cache import ResultCache, configuration_key
from kvlint.scan.storage import FileStat, content_digest
from kvlint.scan.triage import Triage, Verdict
from kvlint.types import UNREADABLE_CODE, FileResult, Finding, unreadable

if TYPE_CHECKING:
    from kvlint.analysis.target_names import TargetNames
    from kvlint.analysis.tree_index import TreeIndex as ProjectIndex
    from kvlint.engine.rule import Rule


@dataclass
class ScanResult:
    files: list[FileResult]
    index: IndexHandle
    codes: tuple[str, ...]  # the rules run, in order
    findings: list[Finding] = field(default_factory=list)
    cache_hits: int = 0  # files answered from the result cache
    # Files the configuration's `exclude` left out when it left nothing to check (0 otherwise): said, not silent.
    excluded_by_configuration: int = 0
    # The root of the vLLM release the files were judged against, apart from them (kvlint.scan.targets);
    # None when the index is the files' own tree (or there is none). Fixing never rebuilds it.
    reference: str | None = None
    # The other releases of a range the files were also judged against (kvlint.scan.target_scan).
    also: tuple[IndexHandle, ...] = ()
    # The result cache's folder and configuration key (None without a cache): `fix` keeps its own results
    # there under the same key (kvlint.fixing.fix_cache, kvlint.fixing.after).
    cache_dir: Path | None = None
    cache_key: str | None = None

    @property
    def degradations(self) -> tuple[str, ...]:
        """What the cross-file analysis could not do, one line each (empty when it did everything)."""
        return tuple(dict.fromkeys(f for handle in (self.index, *self.also) for f in handle.failures))

    @property
    def project(self) -> ProjectIndex:
        return self.index.index

    @property
    def rules(self) -> tuple[type[Rule], ...]:
        return rules_for_codes(self.codes)

    @property
    def files_scanned(self) -> int:
        return len(self.files)


# What a file's cache entry is keyed on, for each file read and hashed: (digest, scope, rule codes).
CacheKey = tuple[str, tuple[str, str] | None, tuple[str, ...]]


@dataclass
class _Scan:
    """One scan in progress: what the plan decided, and the results as the phases fill them in."""

    config: Config
    codes: tuple[str, ...]
    files: list[SourceFile]
    problems: list[PathProblem]
    index: IndexHandle
    settings: dict
    cache: ResultCache | None
    stats: list[FileStat | None]  # by file position; empty without a cache
    triage: Triage
    results: list[FileResult | None] = field(default_factory=list)
    keys: dict[int, CacheKey] = field(default_factory=dict)
    hits: int = 0
    real_folders: dict[str, str] = field(default_factory=dict)
    excluded: int = 0  # see ScanResult.excluded_by_configuration
    reference: Path | None = None  # see ScanResult.reference

    @cached_property
    def state(self) -> WorkerState:
        # Loads the project index: only when some file must really be linted.
        return WorkerState(self.index.index, self.settings)


def scan(
    paths: list[Path],
    config: Config,
    select: list[str] | None,
    ignore: list[str],
    jobs: int | None = None,
    cache_dir: Path | None = None,
    progress: Display | bool = False,
    display_root: Path | None = None,
    reference: Path | None = None,
    target: TargetNames | None = None,
) -> ScanResult:
    """Lint every file under `paths`. `cache_dir` None disables the result cache; `progress` says how the
    scan's phases are shown on stderr (True: a live line on a terminal); with `display_root`, relative
    paths are read under it and shown as given (collect_files). `reference`: the root of a vLLM release
    the paths (code outside the vLLM tree) are judged against, its index built from there; `target`: what
    every release they target defines (kvlint.analysis.target_names).

    Ctrl-C stops the worker processes at once (scan/jobs.py) and leaves the result cache as it was."""
    chosen = select if select is not None else config.select
    # Ignored rules still run: ignoring the finding shown ignores its root cause (kvlint.engine.suppress).
    config = replace(config, ignore=list(dict.fromkeys([*config.ignore, *ignore])))
    select_codes(chosen, config.ignore)  # an unknown selector is an error
    codes = select_codes(chosen, None)
    meter = Progress(progress)
    try:
        run = _plan(paths, config, codes, cache_dir, display_root, meter, reference, target)
        meter.counting(len(run.files))
        diagnose, parse = _settle_without_parsing(run, meter)
        _execute(run, diagnose, parse, jobs, meter)
    finally:
        meter.close()  # an interrupted scan too: the next line starts at the left margin
    if run.cache is not None:
        _store(run, run.cache)
    return _result(run)


def _plan(
    paths: list[Path],
    config: Config,
    codes: tuple[str, ...],
    cache_dir: Path | None,
    display_root: Path | None,
    meter: Progress,
    reference: Path | None = None,
    target: TargetNames | None = None,
) -> _Scan:
    """Which files, which project index, which cache: all decided before the first file is read."""
    files, problems = collect_files(paths, config.exclude, display_root)
    named = next((p for p in problems if p.given), None)
    if named is not None:  # a path the user named that is not there is an error, not a finding
        raise TargetError(f"{printable(named.display)}: {named.cause}")
    settings = config.rule_settings()
    stats = [_stat(source.path) for source in files] if cache_dir is not None else []
    known = {source.real: stat for source, stat in zip(files, stats) if source.real is not None and stat is not None}
    on_disk = paths if display_root is None else [display_root / path for path in paths]
    if cache_dir is not None and _in_a_tree([reference] if reference is not None else on_disk):
        meter.phase("indexing the tree")  # with a cache the index is checked (or built) now
    roles = tuple(config.scheduler_only_paths)
    # The code outside the tree's own spec classes, and its classes' bases across its modules.
    headers, package = class_headers_of([source.path for source in files]) if reference is not None else ((), ())
    index = open_project_index(on_disk, cache_dir, known, roles, reference).targeting(
        target, headers, package, outside=reference is not None
    )
    cache = (
        ResultCache(cache_dir, configuration_key(index.digests.shared, settings, codes))
        if cache_dir is not None
        else None
    )
    triage = Triage(codes, cache.triggers if cache is not None else None)
    run = _Scan(config, codes, files, problems, index, settings, cache, stats, triage)
    run.results = [None] * len(files)
    run.reference = reference
    if not files and config.exclude:
        run.excluded = len(collect_files(paths, [], display_root)[0])
    return run


def _in_a_tree(paths: list[Path]) -> bool:
    return any(find_tree_root(path) is not None for path in paths)


def _settle_without_parsing(run: _Scan, meter: Progress) -> tuple[list[Job], list[Job]]:
    """Settle every file the cache or the triage can answer; return (jobs the engine must diagnose
    without parsing, jobs to parse)."""
    diagnose: list[Job] = []
    parse: list[Job] = []
    for position, source in enumerate(run.files):
        settled = _settle(run, position, source)
        if isinstance(settled, FileResult):
            run.results[position] = settled
            meter.advance()
        elif settled[0] is Verdict.PARSE:
            parse.append(settled[1])
        else:
            diagnose.append(settled[1])
    return diagnose, parse


def _settle(run: _Scan, position: int, source: SourceFile) -> FileResult | tuple[Verdict, Job]:
    """One file: its result from the cache (by stat, then by content) or the triage, else its job."""
    module_path = _source_module_path(source, run.index.root, run.real_folders)
    scope = (module_path, run.index.digests.of_module(module_path)) if run.cache is not None else None
    stat = run.stats[position] if run.cache is not None else None
    job = Job(position, source.display, module_path, run.codes, b"", ignored_for(source.display, run.config))
    file_codes = job.cache_codes
    if run.cache is not None and stat is not None:
        cached = run.cache.fresh(source.display, stat, scope, file_codes)
        if cached is not None:
            run.hits += 1
            return cached
    data = read_source(source.path, source.display)
    if isinstance(data, FileResult):
        return data
    if run.cache is not None:
        run.keys[position] = (content_digest(data), scope, file_codes)
        cached = run.cache.matching(source.display, run.keys[position][0], stat, scope, file_codes)
        if cached is not None:
            run.hits += 1
            return cached
    verdict = run.triage.verdict(run.codes, data)
    if verdict is Verdict.NOTHING_TO_REPORT:
        return FileResult(path=source.display, skipped_by_prefilter=True)  # what the engine would say
    return verdict, replace(job, data=data)


def _execute(run: _Scan, diagnose: list[Job], parse: list[Job], jobs: int | None, meter: Progress) -> None:
    """Lint what is left: the few files to diagnose inline, the ones to parse inline or in a pool."""
    if (diagnose or parse) and run.cache is None and run.index.root is not None:
        meter.phase("indexing the tree")  # without a cache the index is built when a file needs it: now
    # Workers forked after the index is built start as large as this process: built apart then (scan.apart).
    run.index.apart = pool_workers(parse, jobs) > 1
    for job in diagnose:
        run.results[job.index] = lint_job(run.state, job)
        meter.advance()
    if not parse:
        return
    # Largest first: the long files start early and the short ones fill in the gaps at the end.
    parse.sort(key=lambda job: len(job.data), reverse=True)
    state = run.state
    meter.parsing(len(parse), sum(len(job.data) for job in parse))
    # closing(): an exception here (Ctrl-C between two results) stops the workers now, not when the
    # generator happens to be collected.
    with closing(run_jobs(parse, jobs, state, waiting=meter.tick)) as results:
        for job, result in results:
            run.results[job.index] = result
            meter.advance(len(job.data))


def _store(run: _Scan, cache: ResultCache) -> None:
    """Remember every result worth keeping, and the rules' triggers when they were loaded."""
    for position, (digest, scope, file_codes) in run.keys.items():
        result = run.results[position]
        if result is not None and cacheable(result):
            cache.store(run.files[position].display, run.stats[position], digest, scope, file_codes, result)
    triggers = run.triage.triggers_to_remember()
    if triggers is not None:
        cache.remember_triggers(triggers)
    cache.save()


def _result(run: _Scan) -> ScanResult:
    done = [
        unreadable(p.display, p.cause)
        for p in run.problems
        if matches(UNREADABLE_CODE, run.codes) and not matches(UNREADABLE_CODE, ignored_for(p.display, run.config))
    ]
    done.extend(r for r in run.results if r is not None)
    findings = sorted((f for r in done for f in r.findings if _reported(f, run)), key=Finding.sort_key)
    return ScanResult(
        files=done,
        index=run.index,
        codes=run.codes,
        findings=findings,
        cache_hits=run.hits,
        excluded_by_configuration=run.excluded,
        reference=str(run.index.root) if run.reference is not None and run.index.root is not None else None,
        cache_dir=run.cache.folder if run.cache is not None else None,
        cache_key=run.cache.key if run.cache is not None else None,
    )


def _reported(finding: Finding, run: _Scan) -> bool:
    """A finding of a rule run and not ignored (the engine applied the ignores to what it linted; a file the
    scan could not read it never saw)."""
    if finding.code != UNREADABLE_CODE:
        return finding.code in run.codes
    return matches(UNREADABLE_CODE, run.codes) and not matches(UNREADABLE_CODE, ignored_for(finding.path, run.config))


def _source_module_path(source: SourceFile, root: str | None, real_folders: dict[str, str]) -> str:
    if root is None:  # outside a tree: the path as shown, not where `display_root` put it on disk
        return module_path_of(source.display, None)
    # The walk already knows most files' real paths: then it is a string operation.
    if (
        source.real is not None
        and root is not None
        and source.real.startswith(root)
        and source.real[len(root) : len(root) + 1] == os.sep
    ):
        return source.real[len(root) + 1 :].replace(os.sep, "/")
    return module_path_of(source.path, root, real_folders)


def read_source(path: str, display: str) -> bytes | FileResult:
    """A file's bytes, or the result that says why they cannot be read: a regular file of at most 10 MiB,
    opened without blocking (kvlint.filesystem), so a FIFO or a device swapped in after the walk is refused."""
    try:
        return read_regular_file(path)
    except FileTooLarge as error:
        return unreadable(display, describe(error))  # what the engine says of a file it was handed too large
    except FileNotFoundError:
        return unreadable(display, "vanished before it could be read")
    except IsADirectoryError:
        return FileResult(path=display, parsed=False)
    except PermissionError:
        return unreadable(display, "permission denied")
    except OSError as error:
        return unreadable(display, f"cannot read: {describe(error)}")


def cacheable(result: FileResult) -> bool:
    # A KV000 (syntax error, internal error, …) is cheap to reproduce and may be an environment accident.
    return not any(f.code == UNREADABLE_CODE for f in result.findings)


def _stat(path: str) -> FileStat | None:
    try:
        return FileStat.of(os.stat(path))
    except OSError:
        return None
