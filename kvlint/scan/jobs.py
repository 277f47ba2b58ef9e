"""Lint files as jobs: what one file's lint needs, the one place its LintRequest is assembled, and the pool.

`scan`, `kvlint fix` and the review's cross-file pass all lint through here, so a file is linted with the
same rules, ignores (`ignore` and its per-file-ignores), module path and settings whoever asks. The engine (and libcst with
it) is imported only when a job really runs: a scan answered from the cache never gets that far.
"""

from __future__ import annotations

import dataclasses
import os
import signal
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.collector import freeze_before_fork, paused_for_one_file, return_free_memory, tune_collector
from kvlint.engine.registry import rules_for_codes
from kvlint.scan.config import Config
from kvlint.scan.files import is_excluded
from kvlint.types import FileResult, unreadable

if TYPE_CHECKING:
    from kvlint.analysis.tree_index import TreeIndex as ProjectIndex
    from kvlint.engine.lint import LintRequest

# Below this much source to parse, starting worker processes costs more than it saves.
POOL_MIN_BYTES = 256 * 1024


@dataclass(frozen=True)
class Job:
    """One file to lint, with the exact bytes whose hash keys its cache entry."""

    index: int  # position in the scan's file list (0 for a file linted on its own)
    display: str  # the path as shown to the user
    module_path: str  # relative to the tree root, "/"-separated
    codes: tuple[str, ...]  # the rules that run on this file
    data: bytes
    # What the configuration ignores in this file (`ignore`, then its per-file-ignores): applied to root
    # causes after folding (kvlint.engine.suppress), so the ignored rules still run.
    ignored: tuple[str, ...] = ()

    @property
    def cache_codes(self) -> tuple[str, ...]:
        """What its cache entry is keyed on besides the content: the rules run, and the ignored (marked `-`)."""
        return (*self.codes, *(f"-{code}" for code in self.ignored))


@dataclass(frozen=True)
class WorkerState:
    """What every job of one scan shares. A worker process receives it once, not once per file:
    the project index can be large."""

    project: ProjectIndex
    settings: dict


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


def ignored_for(display: str, config: Config) -> tuple[str, ...]:
    """The codes or prefixes ignored in one file: the configuration's `ignore` (which holds `--ignore` too),
    then its per-file-ignores."""
    return (
        *config.ignore,
        *(
            code
            for glob, globbed in config.per_file_ignores.items()
            if is_excluded(display, [glob])
            for code in globbed
        ),
    )


def job_for_file(
    path: Path,
    display: str,
    codes: tuple[str, ...],
    config: Config,
    project: ProjectIndex | None,
    data: bytes,
    module_path: str | None = None,
) -> Job:
    """The job for one file linted on its own (by `fix` or the review), as a scan would have planned it;
    `module_path` spares loading the project index only to find it (its root is the scan's)."""
    if module_path is None:
        assert project is not None, "a module path or the project index"
        module_path = module_path_of(path, project.root)
    return Job(0, display, module_path, codes, data, ignored_for(display, config))


def request_for(job: Job, state: WorkerState) -> LintRequest:
    """The one place a LintRequest is assembled."""
    from kvlint.engine.lint import LintRequest  # libcst: only when some file must really be linted

    return LintRequest(
        job.display, job.module_path, state.project, rules_for_codes(job.codes), state.settings, job.ignored
    )


def lint_unfiltered(state: WorkerState, job: Job) -> FileResult:
    """Lint one file's bytes, a KV000 the scan did not select included (`fix` reads the findings as they are)."""
    from kvlint.engine.lint import lint_bytes

    with paused_for_one_file():
        return lint_bytes(request_for(job, state), job.data)


def lint_job(state: WorkerState, job: Job) -> FileResult:
    """Lint one file's bytes. Never raises: every failure becomes a KV000 result."""
    result = lint_unfiltered(state, job)
    if all(f.code in job.codes for f in result.findings):
        return result
    # a KV000 of a scan that did not select it
    return dataclasses.replace(result, findings=tuple(f for f in result.findings if f.code in job.codes))


def run_jobs(
    work: list[Job], jobs: int | None, state: WorkerState, waiting: Callable[[], None] | None = None
) -> Iterator[tuple[Job, FileResult]]:
    """Yield (job, result) for every job, inline or from a pool of worker processes, in completion order.

    `waiting` is called about every WAIT_TICK_S while the pool has no result to give (a progress line
    redraws its clock). Closing the iterator early — Ctrl-C in the consumer included — stops the workers
    at once: a worker is terminated, not left to finish its file.
    """
    workers = pool_workers(work, jobs)
    if workers <= 1:
        for job in work:
            yield job, lint_job(state, job)
        return
    yield from _run_in_pool(work, workers, state, waiting)


def pool_workers(work: list[Job], jobs: int | None) -> int:
    """How many worker processes lint `work` (1: none, it is linted in this process)."""
    workers = min(jobs if jobs is not None else (os.cpu_count() or 1), len(work))
    return workers if workers > 1 and sum(len(job.data) for job in work) >= POOL_MIN_BYTES else 1


# How often a scan waiting on its workers wakes up to let the progress line redraw.
WAIT_TICK_S = 0.25


def _run_in_pool(
    work: Iterable[Job], workers: int, state: WorkerState, waiting: Callable[[], None] | None
) -> Iterator[tuple[Job, FileResult]]:
    """The pool's results. A worker that dies — past its memory cap, where libcst's native parser aborts the
    process — breaks the pool: the jobs then being linted are linted again each alone (the one that kills a
    worker alone is a KV000 line for its file), and the jobs not started yet in a new pool."""
    queue = list(work)
    _import_before_forking(queue)
    while queue:
        started = _started_flags(len(queue))
        finished: set[int] = set()
        broken = yield from _pool_round(queue, workers, state, waiting, started, finished)
        if not broken:
            return
        unfinished = [(position, job) for position, job in enumerate(queue) if position not in finished]
        in_flight = [job for position, job in unfinished if started[position]]
        if not in_flight:  # no job had started: nothing to blame, nothing to retry
            yield from ((job, _worker_failed(job, "BrokenProcessPool")) for _, job in unfinished)
            return
        for job in in_flight:
            alone: set[int] = set()
            results = list(_pool_round_results([job], state, waiting, alone))
            yield job, results[0] if results else unreadable(job.display, _memory_message())
        queue = [job for position, job in unfinished if not started[position]]


def _import_before_forking(work: list[Job]) -> None:
    """A forked worker starts with what this process has imported: the engine (libcst) and the rules are
    imported once here, not once in every worker (CPU and memory each worker would spend again)."""
    import multiprocessing

    if multiprocessing.get_start_method() == "fork":
        from kvlint.engine.lint import lint_bytes  # noqa: F401

        for codes in {job.codes for job in work}:
            rules_for_codes(codes)


def _pool_round_results(
    queue: list[Job], state: WorkerState, waiting: Callable[[], None] | None, finished: set[int]
) -> Iterator[FileResult]:
    """The results of `queue` linted by one worker (nothing for a job whose worker died)."""
    round_ = _pool_round(queue, 1, state, waiting, _started_flags(len(queue)), finished)
    yield from (result for _, result in round_)


def _pool_round(
    queue: list[Job],
    workers: int,
    state: WorkerState,
    waiting: Callable[[], None] | None,
    started,
    finished: set[int],
) -> Generator[tuple[Job, FileResult], None, bool]:
    """Yield (job, result) for each job a worker finished (its position added to `finished`); return
    whether the pool broke (a worker died)."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait  # only when a pool is worth it
    from concurrent.futures.process import BrokenProcessPool

    # No `with`: its exit joins the pool's manager thread, which on Python 3.10 can wait forever for workers
    # that were terminated mid-file; an interrupted scan must not wait on them.
    freeze_before_fork()
    return_free_memory()
    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=_start_worker, initargs=(state, started, _worker_memory())
    )
    broken = False
    try:
        futures = {pool.submit(_lint_in_worker, position, job): position for position, job in enumerate(queue)}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=WAIT_TICK_S, return_when=FIRST_COMPLETED)
            if not done and waiting is not None:
                waiting()
            for future in done:
                position = futures[future]
                error = future.exception()
                if isinstance(error, BrokenProcessPool):
                    broken = True
                    continue
                finished.add(position)
                job = queue[position]
                yield job, _worker_failed(job, type(error).__name__) if error else future.result()
    except BaseException:  # KeyboardInterrupt, or the consumer closed us (GeneratorExit): stop now
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    return broken


def _worker_failed(job: Job, cause: str) -> FileResult:
    return unreadable(job.display, f"internal error in kvlint (worker process failed: {cause}); re-run with --jobs 1")


# What a worker may take beyond the address space it starts with (its memory cap): libcst's parser needs
# ~0.3 MB per KB of ordinary code (vLLM's largest module: under 100 MB), far more for pathological code.
WORKER_MEMORY_VARIABLE = "KVLINT_WORKER_MEMORY_MIB"
DEFAULT_WORKER_MEMORY_MIB = 2048


def _worker_memory() -> int:
    """The memory cap of a worker, in bytes beyond its start (KVLINT_WORKER_MEMORY_MIB; 0: none)."""
    value = os.environ.get(WORKER_MEMORY_VARIABLE, "")
    mebibytes = int(value) if value.strip().isdigit() else DEFAULT_WORKER_MEMORY_MIB
    return mebibytes * 2**20


def _memory_message() -> str:
    limit = _worker_memory() // 2**20
    return (
        f"too costly to parse: the worker process linting it died (out of its {limit:,} MiB of memory, or "
        f"killed); {WORKER_MEMORY_VARIABLE} sets that memory"
    )


def _started_flags(count: int):
    """One shared byte per job, set by the worker that takes it: after a worker dies, the jobs in flight."""
    import multiprocessing

    return multiprocessing.Array("b", max(count, 1), lock=False)


def _cap_memory(allowance: int) -> None:
    """Cap this process's address space at its present size plus `allowance` bytes (Linux; never above an
    inherited cap). Past it, an allocation fails: a MemoryError, or an abort in libcst's native parser."""
    if allowance <= 0:
        return
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as handle:
            present = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = present + allowance
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError, ImportError):  # no /proc (macOS, where the cap is not enforced anyway)
        return


# Whether this process terminated a pool's workers (Ctrl-C): its exit must then not wait for the pool's
# manager thread, which on Python 3.10 can wait for ever on workers terminated mid-file.
_stopped_a_pool = False


def stopped_a_pool() -> bool:
    return _stopped_a_pool


def _stop_workers(pool) -> None:
    """Cancel what has not started and terminate the workers; the pool's exit then reaps them.

    `shutdown(cancel_futures=True)` alone lets every worker finish its current file and the files already
    queued to it: seconds of full CPU after Ctrl-C on a large tree.
    """
    global _stopped_a_pool
    _stopped_a_pool = True
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())  # as terminate_workers does
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except (ProcessLookupError, ValueError):  # already gone, or already closed
            continue


# The WorkerState of this worker process, set once by the pool's initializer. Only worker processes
# set it; the parent passes its state to lint_job explicitly.
_worker_state: WorkerState | None = None


_started = None  # the shared flags of the pool this worker belongs to (_started_flags)


def _start_worker(state: WorkerState, started, memory: int) -> None:
    global _worker_state, _started
    _worker_state, _started = state, started
    tune_collector()  # inherited through fork, not through another start method
    from kvlint.engine.lint import load_native_parser  # the allowed lazy boundary: only a worker that lints

    load_native_parser()  # before the cap: mapping the parser's shared object needs room
    _cap_memory(memory)
    # Ctrl-C reaches the whole process group: the parent stops the workers (_stop_workers); a worker
    # that raised KeyboardInterrupt itself would only print a traceback and take its next file.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _lint_in_worker(position: int, job: Job) -> FileResult:
    assert _worker_state is not None and _started is not None, "the pool's initializer runs before any job"
    _started[position] = 1
    return lint_job(_worker_state, job)
