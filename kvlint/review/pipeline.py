"""A review from a git checkout: diff → scan the changed files → keep what the diff touches.

Nothing from the pull request runs. git reads it (kvlint.review.diff); the head commit's Python files
are written to a scratch folder, or the working tree is read as it is on disk; the configuration is the
base revision's. The scan reads paths relative to the tree (so excludes and per-file-ignores see repository
paths); worker processes must not import from the pull request's tree (`_worker_count`).
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
from pathlib import Path

from kvlint.engine.source import decode_source
from kvlint.errors import ConfigError, UnreadableSource
from kvlint.review.crossfile import findings_through_touched_targets, issue_key
from kvlint.review.diff import (
    ReviewError,
    changed_files,
    git,
    materialise_python_tree,
    read_blob,
    resolve_commit,
    review_trees,
)
from kvlint.review.placement import new_findings, place
from kvlint.review.review import Review, build_review, in_diff
from kvlint.scan.config import Config, load_config
from kvlint.scan.files import is_excluded
from kvlint.scan.index_cache import build_project_index
from kvlint.scan.progress import Display, Progress
from kvlint.scan.runner import scan
from kvlint.types import Finding


def _worker_count(jobs: int | None) -> int | None:
    """`jobs`, or 1 where a worker would be a fresh interpreter with the pull request's tree first on its
    sys.path: "spawn" and "forkserver" children start with `-c` from the current folder (a `multiprocessing/`
    folder in the pull request would run), unless this interpreter runs isolated (`-I`/`-P`), which they inherit."""
    if sys.flags.isolated or getattr(sys.flags, "safe_path", False):
        return jobs
    return jobs if multiprocessing.get_start_method() == "fork" else 1


def load_review_config(repo: Path, base: str, config_path: str | None, scratch: Path) -> Config:
    """--config, else the base revision's pyproject.toml: a pull request cannot switch rules off for itself."""
    if config_path:
        path = Path(config_path)
        if not path.is_file():
            raise ConfigError(f"{config_path}: no such config file")
        return load_config(path)
    data = read_blob(repo, base, "pyproject.toml")
    if data is None:
        return load_config(None)
    copy = scratch / "base-pyproject.toml"
    copy.write_bytes(data)
    return load_config(copy)


def make_review(
    repo: Path,
    base: str,
    head: str | None,
    config_path: str | None,
    select: list[str] | None,
    ignore: list[str],
    jobs: int | None,
    progress: Display = Display.NONE,
) -> tuple[Review, dict[str, str]]:
    """The review of `head` (the working tree when None) against its merge base with `base`, and the texts
    read; `progress` says how its phases are shown on stderr."""
    meter = Progress(progress)
    base_commit = resolve_commit(repo, base)
    head_commit = resolve_commit(repo, head) if head else None
    with tempfile.TemporaryDirectory(prefix="kvlint-review-") as scratch_name:
        scratch = Path(scratch_name)
        meter.phase("reading what the pull request changes")
        trees = review_trees(repo, base_commit, head_commit, scratch)
        change = changed_files(repo, trees)
        refused = list(change.refused)
        config = load_review_config(repo, base_commit, config_path, scratch)
        if head_commit is not None:
            tree = scratch / "head"
            tree.mkdir()
            refused += [entry for entry in materialise_python_tree(repo, head_commit, tree) if entry not in refused]
        else:
            tree = repo
        python = sorted(
            path
            for path in change.files
            if path.endswith(".py") and not is_excluded(path, config.exclude) and (tree / path).is_file()
        )
        findings, texts, files_checked, placed = [], {}, 0, {}
        if python:
            meter.phase(f"reviewing {len(python):,} changed Python file{'s' if len(python) != 1 else ''}")
            # Paths relative to the tree: findings, excludes and per-file-ignores see repository paths.
            result = scan(
                [Path(p) for p in python],
                config,
                select,
                ignore,
                _worker_count(jobs),
                cache_dir=None,
                progress=progress,
                display_root=tree,
            )
            texts = _texts(tree, python)
            findings = [f for f in result.findings if f.path in change.files]
            files_checked = len(result.files)
            base_tree = _BaseTree(repo, trees.base, scratch / "base")

            def base_issue_keys() -> set[tuple[str, str, str, str]]:
                root = base_tree.ready()
                inside = [root / p for p in python if (root / p).is_file()] or [root]
                sizing = build_project_index(inside, scheduler_only_paths=tuple(config.scheduler_only_paths)).sizing
                return {issue_key(issue) for issue in (sizing.divergences if sizing is not None else ())}

            anchored, replaced = findings_through_touched_targets(
                result.project, tree, change.files, texts, findings, result.rules, config, base_issue_keys
            )
            replaced_ids = {id(f) for f in replaced}
            findings = [f for f in findings if id(f) not in replaced_ids]
            # What the pull request causes on lines it does not change: new relative to the base's scan.
            untouched = [f for f in findings if not in_diff(f, change.files.get(f.path))]
            if untouched:
                meter.phase("scanning the base revision's versions of those files, to tell new findings from old")
                base_findings, base_texts = base_tree.scan(python, config, select, ignore, _worker_count(jobs))
                for finding in new_findings(untouched, texts, base_findings, base_texts):
                    placement = place(finding, change.files[finding.path], texts.get(finding.path, ""))
                    if placement is not None:
                        placed[id(finding)] = (placement.line, placement.note)
            findings += anchored
    review = build_review(findings, change.files, texts, refused, files_checked, placed)
    review.commit = head_commit or _head_commit(repo)
    return review, texts


class _BaseTree:
    """The base revision's Python files, written to a scratch folder once, when first needed."""

    def __init__(self, repo: Path, commit: str, path: Path):
        self.repo, self.commit, self.path = repo, commit, path

    def ready(self) -> Path:
        if not self.path.is_dir():
            self.path.mkdir()
            materialise_python_tree(self.repo, self.commit, self.path)
        return self.path

    def scan(
        self, python: list[str], config: Config, select: list[str] | None, ignore: list[str], jobs: int | None
    ) -> tuple[list[Finding], dict[str, str]]:
        """The base revision's findings in the files `python` names (those it has), and their texts."""
        root = self.ready()
        present = [path for path in python if (root / path).is_file() and not (root / path).is_symlink()]
        if not present:
            return [], {}
        result = scan([Path(p) for p in present], config, select, ignore, jobs, cache_dir=None, display_root=root)
        return result.findings, _texts(root, present)


def _texts(tree: Path, paths: list[str]) -> dict[str, str]:
    texts = {}
    for path in paths:
        try:
            texts[path] = decode_source((tree / path).read_bytes()).text
        except (UnreadableSource, OSError):
            continue
    return texts


def _head_commit(repo: Path) -> str | None:
    try:
        return git(repo, "rev-parse", "HEAD").decode().strip() or None
    except ReviewError:
        return None
