"""Run the rules over many files: inline for a few, a process pool for many; one code path for both."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.config import Config
from kvlint.engine import LintRequest, lint_bytes, unreadable
from kvlint.files import SourceFile, collect_files
from kvlint.project import ProjectIndex, build_project_index
from kvlint.registry import matches, select_rules
from kvlint.rule import Rule
from kvlint.types import FileResult, Finding

# Below this many files a pool costs more to start than it saves.
POOL_THRESHOLD = 64


@dataclass
class ScanResult:
    files: list[FileResult]
    project: ProjectIndex
    rules: tuple[type[Rule], ...]
    findings: list[Finding] = field(default_factory=list)

    @property
    def files_scanned(self) -> int:
        return len(self.files)


@dataclass(frozen=True)
class _Job:
    path: str  # filesystem path to read
    request: LintRequest


def _module_path(path: Path, root: str | None) -> str:
    resolved = path.resolve()
    if root is not None:
        try:
            return resolved.relative_to(root).as_posix()
        except ValueError:
            pass
    return path.as_posix()


def lint_job(job: _Job) -> FileResult:
    """Read and lint one file. Never raises: every failure becomes a KV000 result."""
    try:
        data = Path(job.path).read_bytes()
    except FileNotFoundError:
        return unreadable(job.request.path, "vanished before it could be read")
    except IsADirectoryError:
        return FileResult(path=job.request.path, parsed=False)
    except PermissionError:
        return unreadable(job.request.path, "permission denied")
    except OSError as error:
        return unreadable(job.request.path, f"cannot read: {error.strerror or error}")
    result = lint_bytes(job.request, data)
    codes = {rule.CODE for rule in job.request.rules}
    if all(f.code in codes for f in result.findings):
        return result
    # per-file-ignores may switch off KV000 too
    return FileResult(result.path, tuple(f for f in result.findings if f.code in codes), result.parsed, result.skipped_by_prefilter, result.suppressed)


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
    project = build_project_index(paths)
    settings = config.rule_settings()
    work = []
    for source in files:
        file_rules = _rules_for(source, rules, config)
        request = LintRequest(source.display, _module_path(source.path, project.root), project, file_rules, settings)
        work.append(_Job(str(source.path), request))
    results = [unreadable(p.display, p.cause) for p in problems if matches("KV000", [r.CODE for r in rules])]
    results.extend(run_jobs(work, jobs))
    findings = sorted((f for r in results for f in r.findings if any(f.code == rule.CODE for rule in rules)), key=Finding.sort_key)
    return ScanResult(files=results, project=project, rules=rules, findings=findings)


def _rules_for(source: SourceFile, rules: tuple[type[Rule], ...], config: Config) -> tuple[type[Rule], ...]:
    from kvlint.files import is_excluded

    ignored = [code for glob, codes in config.per_file_ignores.items() if is_excluded(source.display, [glob]) for code in codes]
    return tuple(r for r in rules if not matches(r.CODE, ignored)) if ignored else rules


def run_jobs(work: list[_Job], jobs: int | None) -> list[FileResult]:
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers <= 1 or len(work) < POOL_THRESHOLD:
        return [lint_job(job) for job in work]
    from concurrent.futures import ProcessPoolExecutor  # imported only when a pool is worth it

    chunk = max(1, len(work) // (workers * 8))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lint_job, work, chunksize=chunk))
