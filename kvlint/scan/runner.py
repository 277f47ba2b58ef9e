"""Run the rules over many files: inline for a few, a process pool for many; one code path for both.

The parent reads every file once: it answers unchanged files from the result cache, settles the files
no rule's text prefilter accepts (nothing to report, no parse), lints inline the few the engine must
diagnose without parsing (too large, undecodable), and hands the rest — the few files that must be
parsed — to worker processes, largest first so that no worker is left with one big file at the end.
Every file that is linted, wherever it runs, goes through `lint_job`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.scan.result_cache import FileStat, ResultCache, configuration_key, content_digest
from kvlint.scan.config import Config
from kvlint.scan.files import SourceFile, collect_files, is_excluded
from kvlint.engine.prefilter import Triggers, triggers_match
from kvlint.analysis.tree_index import TreeIndex as ProjectIndex
from kvlint.scan.index_cache import IndexHandle, open_project_index
from kvlint.engine.registry import matches, rules_for_codes, select_codes
from kvlint.engine.source import MAX_FILE_BYTES, UnreadableSource, decode_source
from kvlint.types import FileResult, Finding, unreadable

if TYPE_CHECKING:
    from kvlint.engine.rule import Rule

# Below this much source to parse, starting worker processes costs more than it saves.
POOL_MIN_BYTES = 256 * 1024
# A progress line appears only when a scan has run this long, and is redrawn at most this often.
PROGRESS_DELAY_S = 1.0
PROGRESS_INTERVAL_S = 0.1


@dataclass
class ScanResult:
    files: list[FileResult]
    index: IndexHandle
    codes: tuple[str, ...]  # the rules run, in order
    findings: list[Finding] = field(default_factory=list)
    cache_hits: int = 0  # files answered from the result cache

    @property
    def project(self) -> ProjectIndex:
        return self.index.index

    @property
    def rules(self) -> tuple[type[Rule], ...]:
        return rules_for_codes(self.codes)

    @property
    def files_scanned(self) -> int:
        return len(self.files)


@dataclass(frozen=True)
class _Job:
    """One file to lint, with the exact bytes whose hash keys its cache entry."""

    index: int  # position in the scan's file list
    display: str
    module_path: str
    codes: tuple[str, ...]
    data: bytes


def module_path_of(path: str | Path, root: str | None, real_folders: dict[str, str] | None = None) -> str:
    """`path` relative to the tree root, "/"-separated, symlinks resolved; as given when outside the tree.

    `real_folders` memoises each folder's real path across the files of one scan (a full `resolve()`
    per file costs a stat per path component).
    """
    path = Path(path)
    if root is None:
        return path.as_posix()
    text = os.path.abspath(path)
    folder, name = os.path.split(text)
    if real_folders is not None and ".." not in path.parts and not os.path.islink(text):
        real = real_folders.get(folder)
        if real is None:
            real = real_folders[folder] = os.path.realpath(folder)
        if real.startswith(root) and real[len(root) : len(root) + 1] == os.sep:
            return f"{real[len(root) + 1 :]}{os.sep}{name}".replace(os.sep, "/")
        resolved = Path(real, name)
    else:
        resolved = path.resolve()
    try:
        return resolved.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _source_module_path(source: SourceFile, root: str | None, real_folders: dict[str, str]) -> str:
    # The walk already knows most files' real paths: then it is a string operation.
    if source.real is not None and root is not None and source.real.startswith(root) and source.real[len(root) : len(root) + 1] == os.sep:
        return source.real[len(root) + 1 :].replace(os.sep, "/")
    return module_path_of(source.path, root, real_folders)


def codes_for(display: str, codes: tuple[str, ...], config: Config) -> tuple[str, ...]:
    """The codes that run on one file, after its per-file-ignores."""
    ignored = [code for glob, globbed in config.per_file_ignores.items() if is_excluded(display, [glob]) for code in globbed]
    return tuple(c for c in codes if not matches(c, ignored)) if ignored else codes


def rules_for(display: str, rules: tuple[type[Rule], ...], config: Config) -> tuple[type[Rule], ...]:
    kept = codes_for(display, tuple(r.CODE for r in rules), config)
    return tuple(r for r in rules if r.CODE in kept)


# What every job of a scan shares: set once per worker process (and in the parent for inline jobs),
# so the project index, however large, is not pickled once per file.
_shared: tuple[ProjectIndex, dict] | None = None


def _share(project: ProjectIndex, settings: dict) -> None:
    global _shared
    _shared = (project, settings)


def lint_job(job: _Job) -> FileResult:
    """Lint one file's bytes. Never raises: every failure becomes a KV000 result."""
    from kvlint.engine.lint import LintRequest, lint_bytes  # libcst: only when some file must really be linted

    assert _shared is not None, "_share() runs before any job"
    project, settings = _shared
    result = lint_bytes(LintRequest(job.display, job.module_path, project, rules_for_codes(job.codes), settings), job.data)
    if all(f.code in job.codes for f in result.findings):
        return result
    # per-file-ignores may switch off KV000 too
    return dataclasses.replace(result, findings=tuple(f for f in result.findings if f.code in job.codes))


def _read(path: str, display: str) -> bytes | FileResult:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        return unreadable(display, "vanished before it could be read")
    except IsADirectoryError:
        return FileResult(path=display, parsed=False)
    except PermissionError:
        return unreadable(display, "permission denied")
    except OSError as error:
        return unreadable(display, f"cannot read: {error.strerror or error}")


class _Prefilter:
    """Which changed files some rule could report in, judged from their text before any parse.

    With the rules' TRIGGERS remembered by the cache (the same kvlint sources wrote them), a file that
    holds none of them is settled without importing the rules — and libcst with them. Otherwise the
    rules are imported and their own `could_match` decides.
    """

    def __init__(self, codes: tuple[str, ...], triggers: dict[str, Triggers] | None):
        self.codes = codes
        self.triggers = triggers if triggers is not None and all(code in triggers for code in codes) else None
        self.rules: dict[str, type[Rule]] | None = None

    def load_rules(self) -> dict[str, type[Rule]]:
        if self.rules is None:
            self.rules = {rule.CODE: rule for rule in rules_for_codes(self.codes)}
        return self.rules

    def must_parse(self, codes: tuple[str, ...], data: bytes) -> bool | None:
        """True: some rule's prefilter accepts the file; False: none does, nothing to report;
        None: the engine must say why it cannot read the file (too large, undecodable)."""
        if len(data) > MAX_FILE_BYTES:
            return None
        try:
            text = decode_source(data).text
        except UnreadableSource:
            return None
        if self.triggers is not None and not any(triggers_match(self.triggers[code], text) for code in codes):
            return False
        rules = self.load_rules()
        return any(rules[code].could_match(text) for code in codes)  # engine-only rules declare no triggers

    def triggers_to_remember(self) -> dict[str, Triggers] | None:
        if self.rules is None:
            return None
        return {code: tuple(rule.TRIGGERS) for code, rule in self.rules.items()}


def _cacheable(result: FileResult) -> bool:
    # A KV000 (syntax error, internal error, …) is cheap to reproduce and may be an environment accident.
    return not any(f.code == "KV000" for f in result.findings)


def _stat(path: str) -> FileStat | None:
    try:
        return FileStat.of(os.stat(path))
    except OSError:
        return None


def scan(
    paths: list[Path],
    config: Config,
    select: list[str] | None,
    ignore: list[str],
    jobs: int | None = None,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> ScanResult:
    """Lint every file under `paths`. `cache_dir` None disables the result cache; `progress` may draw on a TTY."""
    codes = select_codes(select if select is not None else config.select, [*config.ignore, *ignore])
    files, problems = collect_files(paths, config.exclude)
    settings = config.rule_settings()
    stats = [_stat(source.path) for source in files] if cache_dir is not None else []
    known = {source.real: stat for source, stat in zip(files, stats) if source.real is not None and stat is not None}
    index = open_project_index(paths, cache_dir, known, tuple(config.scheduler_only_paths))
    cache = ResultCache(cache_dir, configuration_key(index.digests.shared, settings, codes)) if cache_dir is not None else None
    prefilter = _Prefilter(codes, cache.triggers if cache is not None else None)
    meter = _Progress(len(files), enabled=progress)

    results: list[FileResult | None] = [None] * len(files)
    to_parse: list[_Job] = []
    inline: list[_Job] = []
    # For each file read and hashed: (digest, scope, rule codes), what its cache entry is keyed on.
    keys: dict[int, tuple[str, tuple[str, str], tuple[str, ...]]] = {}
    hits = 0
    real_folders: dict[str, str] = {}
    for position, source in enumerate(files):
        file_codes = codes_for(source.display, codes, config) if config.per_file_ignores else codes
        module_path = _source_module_path(source, index.root, real_folders)
        stat = stats[position] if cache is not None else None
        scope = (module_path, index.digests.of_module(module_path)) if cache is not None else None
        if cache is not None and stat is not None:
            cached = cache.fresh(source.display, stat, scope, file_codes)
            if cached is not None:
                results[position], hits = cached, hits + 1
                meter.advance()
                continue
        data = _read(source.path, source.display)
        if isinstance(data, FileResult):
            results[position] = data
            meter.advance()
            continue
        if cache is not None:
            keys[position] = (content_digest(data), scope, file_codes)
            cached = cache.matching(source.display, keys[position][0], stat, scope, file_codes)
            if cached is not None:
                results[position], hits = cached, hits + 1
                meter.advance()
                continue
        verdict = prefilter.must_parse(file_codes, data)
        if verdict is False:
            results[position] = FileResult(path=source.display, skipped_by_prefilter=True)  # what the engine would say
            meter.advance()
        else:
            (to_parse if verdict else inline).append(_Job(position, source.display, module_path, file_codes, data))
    if to_parse or inline:
        _share(index.index, settings)
    for job in inline:
        results[job.index] = lint_job(job)
        meter.advance()
    # Largest first: the long files start early and the short ones fill in the gaps at the end.
    to_parse.sort(key=lambda job: len(job.data), reverse=True)
    for job, result in run_jobs(to_parse, jobs, index.index if to_parse else None, settings):
        results[job.index] = result
        meter.advance()
    meter.close()

    if cache is not None:
        for position, (digest, scope, file_codes) in keys.items():
            result = results[position]
            if result is not None and _cacheable(result):
                cache.store(files[position].display, stats[position], digest, scope, file_codes, result)
        triggers = prefilter.triggers_to_remember()
        if triggers is not None:
            cache.remember_triggers(triggers)
        cache.save()

    done = [unreadable(p.display, p.cause) for p in problems if matches("KV000", codes)]
    done.extend(r for r in results if r is not None)
    findings = sorted((f for r in done for f in r.findings if f.code in codes), key=Finding.sort_key)
    return ScanResult(files=done, index=index, codes=codes, findings=findings, cache_hits=hits)


def run_jobs(work: list[_Job], jobs: int | None, project: ProjectIndex, settings: dict):
    """Yield (job, result) for every job, inline or from a pool of worker processes, in completion order."""
    workers = min(jobs if jobs is not None else (os.cpu_count() or 1), len(work))
    if workers <= 1 or sum(len(job.data) for job in work) < POOL_MIN_BYTES:
        for job in work:
            yield job, lint_job(job)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed  # imported only when a pool is worth it

    with ProcessPoolExecutor(max_workers=workers, initializer=_share, initargs=(project, settings)) as pool:
        futures = {pool.submit(lint_job, job): job for job in work}
        try:
            for future in as_completed(futures):
                job = futures[future]
                try:
                    yield job, future.result()
                except Exception as error:  # a worker died (killed, out of memory): say which file, go on
                    yield job, unreadable(job.display, f"internal error in kvlint (worker process failed: {type(error).__name__}); re-run with --jobs 1")
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


class _Progress:
    """`checked 812/2512 files` on stderr, redrawn in place; only on a terminal and only for slow scans."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.visible = False

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < PROGRESS_DELAY_S or now - self.drawn_at < PROGRESS_INTERVAL_S:
            return
        self.drawn_at = now
        self.visible = True
        sys.stderr.write(f"\rkvlint: checked {self.done}/{self.total} files")
        sys.stderr.flush()

    def close(self) -> None:
        if self.visible:
            sys.stderr.write("\r\x1b[K")  # leave the line empty for what the command prints next
            sys.stderr.flush()
            self.visible = False
