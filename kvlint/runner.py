"""Run the rules over many files: inline for a few, a process pool for many; one code path for both.

The parent reads every file once: it answers unchanged files from the result cache, lints inline the
files that no rule's text prefilter accepts (no parse: microseconds each), and hands the rest — the
few files that must be parsed — to worker processes, largest first so that no worker is left with one
big file at the end. Every file, wherever it runs, goes through `lint_job`.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.cache import FileStat, ResultCache, configuration_key, content_digest
from kvlint.config import Config
from kvlint.engine import LintRequest, UnreadableSource, decode_source, lint_bytes, unreadable, MAX_FILE_BYTES
from kvlint.files import SourceFile, collect_files
from kvlint.project import ProjectIndex, build_project_index
from kvlint.registry import matches, select_rules
from kvlint.rule import Rule
from kvlint.types import FileResult, Finding

# Below this much source to parse, starting worker processes costs more than it saves.
POOL_MIN_BYTES = 256 * 1024
# A progress line appears only when a scan has run this long, and is redrawn at most this often.
PROGRESS_DELAY_S = 1.0
PROGRESS_INTERVAL_S = 0.1


@dataclass
class ScanResult:
    files: list[FileResult]
    project: ProjectIndex
    rules: tuple[type[Rule], ...]
    findings: list[Finding] = field(default_factory=list)
    cache_hits: int = 0  # files answered from the result cache

    @property
    def files_scanned(self) -> int:
        return len(self.files)


@dataclass(frozen=True)
class _Job:
    """One file to lint, with the exact bytes whose hash keys its cache entry."""

    index: int  # position in the scan's file list
    display: str
    module_path: str
    rules: tuple[type[Rule], ...]
    data: bytes


def _module_path(path: Path, root: str | None, real_folders: dict[str, str] | None = None) -> str:
    """`path` relative to the tree root, "/"-separated, symlinks resolved; as given when outside the tree.

    `real_folders` memoises each folder's real path across the files of one scan (a full `resolve()`
    per file costs a stat per path component).
    """
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


# What every job of a scan shares: set once per worker process (and in the parent for inline jobs),
# so the project index, however large, is not pickled once per file.
_shared: tuple[ProjectIndex, dict] | None = None


def _share(project: ProjectIndex, settings: dict) -> None:
    global _shared
    _shared = (project, settings)


def lint_job(job: _Job) -> FileResult:
    """Lint one file's bytes. Never raises: every failure becomes a KV000 result."""
    assert _shared is not None, "_share() runs before any job"
    project, settings = _shared
    result = lint_bytes(LintRequest(job.display, job.module_path, project, job.rules, settings), job.data)
    codes = {rule.CODE for rule in job.rules}
    if all(f.code in codes for f in result.findings):
        return result
    # per-file-ignores may switch off KV000 too
    return dataclasses.replace(result, findings=tuple(f for f in result.findings if f.code in codes))


def _read(path: Path, display: str) -> bytes | FileResult:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return unreadable(display, "vanished before it could be read")
    except IsADirectoryError:
        return FileResult(path=display, parsed=False)
    except PermissionError:
        return unreadable(display, "permission denied")
    except OSError as error:
        return unreadable(display, f"cannot read: {error.strerror or error}")


def _must_parse(rules: tuple[type[Rule], ...], data: bytes) -> bool:
    """Whether some rule's text prefilter accepts the file: only a scheduling hint, never a verdict."""
    if len(data) > MAX_FILE_BYTES:
        return False
    try:
        text = decode_source(data).text
    except UnreadableSource:
        return False
    return any(not getattr(r, "ENGINE_ONLY", False) and r.could_match(text) for r in rules)


def _cacheable(result: FileResult) -> bool:
    # A KV000 (syntax error, internal error, …) is cheap to reproduce and may be an environment accident.
    return not any(f.code == "KV000" for f in result.findings)


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
    rules = select_rules(select if select is not None else config.select, [*config.ignore, *ignore])
    files, problems = collect_files(paths, config.exclude)
    project = build_project_index(paths, cache_dir)
    settings = config.rule_settings()
    _share(project, settings)
    codes = tuple(rule.CODE for rule in rules)
    cache = ResultCache(cache_dir, configuration_key(project, settings, codes)) if cache_dir is not None else None
    meter = _Progress(len(files), enabled=progress)

    results: list[FileResult | None] = [None] * len(files)
    to_parse: list[_Job] = []
    stats: dict[int, FileStat | None] = {}
    # For each file read and hashed: (digest, module path, rule codes), what its cache entry is keyed on.
    keys: dict[int, tuple[str, str, tuple[str, ...]]] = {}
    hits = 0
    real_folders: dict[str, str] = {}
    for index, source in enumerate(files):
        file_rules = _rules_for(source, rules, config)
        file_codes = tuple(rule.CODE for rule in file_rules)
        module_path = _module_path(source.path, project.root, real_folders)
        if cache is not None:
            try:
                stats[index] = FileStat.of(os.stat(source.path))
            except OSError:
                stats[index] = None
            cached = cache.fresh(source.display, stats[index], module_path, file_codes) if stats[index] else None
            if cached is not None:
                results[index], hits = cached, hits + 1
                meter.advance()
                continue
        data = _read(source.path, source.display)
        if isinstance(data, FileResult):
            results[index] = data
            meter.advance()
            continue
        if cache is not None:
            keys[index] = (content_digest(data), module_path, file_codes)
            cached = cache.matching(source.display, keys[index][0], stats[index], module_path, file_codes)
            if cached is not None:
                results[index], hits = cached, hits + 1
                meter.advance()
                continue
        job = _Job(index, source.display, module_path, file_rules, data)
        if _must_parse(file_rules, data):
            to_parse.append(job)
        else:
            results[index] = lint_job(job)
            meter.advance()
    # Largest first: the long files start early and the short ones fill in the gaps at the end.
    to_parse.sort(key=lambda job: len(job.data), reverse=True)
    for job, result in run_jobs(to_parse, jobs, project, settings):
        results[job.index] = result
        meter.advance()
    meter.close()

    if cache is not None:
        for index, (digest, module_path, file_codes) in keys.items():
            result = results[index]
            if result is not None and _cacheable(result):
                cache.store(files[index].display, stats[index], digest, module_path, file_codes, result)
        cache.save()

    done = [unreadable(p.display, p.cause) for p in problems if matches("KV000", codes)]
    done.extend(r for r in results if r is not None)
    findings = sorted((f for r in done for f in r.findings if f.code in codes), key=Finding.sort_key)
    return ScanResult(files=done, project=project, rules=rules, findings=findings, cache_hits=hits)


def _rules_for(source: SourceFile, rules: tuple[type[Rule], ...], config: Config) -> tuple[type[Rule], ...]:
    from kvlint.files import is_excluded

    ignored = [code for glob, codes in config.per_file_ignores.items() if is_excluded(source.display, [glob]) for code in codes]
    return tuple(r for r in rules if not matches(r.CODE, ignored)) if ignored else rules


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
