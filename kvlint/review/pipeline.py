"""A review from a git checkout: diff → scan the changed files → keep what the diff touches.

Nothing from the pull request runs. git reads it (kvlint.review.diff); the head commit's Python files
are written to a scratch folder, or the working tree is read as it is on disk; the configuration is the
base revision's. The scan reads paths relative to the tree (so excludes and per-file-ignores see repository
paths); worker processes must not import from the pull request's tree (`_worker_count`).

Every file of the pull request is read with kvlint's one reader (kvlint.filesystem: a regular file inside the
tree, never through a link, at most 10 MiB by its size before a byte is read, never waited on); one it refuses
is said with its reason, and listed in the review's body. A file the cross-file analysis needed that kvlint's
reading rules refuse (a name it does not read, a link, too large: what the pull request brings) is listed
the same way and counted in `Review.analysis_unread`: the review goes on and says its cross-file findings
may be incomplete. What the analysis could not do for any other reason is kept in `Review.incomplete`:
the command says it and exits 2, and the review's body says it, as `check` does.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kvlint.analysis.tree_files import UnreadFile
from kvlint.analysis.vocabulary import INTERFACE_MODULE, RESOLVER_HOME
from kvlint.errors import ConfigError
from kvlint.filesystem import describe, read_file_inside
from kvlint.fixing.syntax_gate import oldest_python_at
from kvlint.review.crossfile import findings_through_touched_targets, issue_key
from kvlint.review.diff import (
    SYMLINK_REFUSAL,
    WRITE_FAILURE,
    ReviewError,
    changed_files,
    git,
    materialise_python_tree,
    read_blob,
    resolve_commit,
    review_trees,
)
from kvlint.review.fitting import fit_comments
from kvlint.review.placement import new_findings, place
from kvlint.review.review import Review, build_review, in_diff
from kvlint.review.tree_texts import TreeTexts
from kvlint.scan.config import Config, load_config
from kvlint.scan.files import is_excluded
from kvlint.scan.index_cache import build_project_index
from kvlint.scan.progress import Display, Progress
from kvlint.scan.runner import scan
from kvlint.types import Finding

if TYPE_CHECKING:
    from kvlint.analysis.target_names import TargetNames


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
    reference: Path | None = None,
    target: TargetNames | None = None,
) -> tuple[Review, dict[str, str]]:
    """The review of `head` (the working tree when None) against its merge base with `base`, and the texts
    read; `progress` says how its phases are shown on stderr. `reference` and `target`: a repository outside
    the vLLM tree judged against a vLLM release, as `check` judges it (kvlint.scan.runner.scan)."""
    meter = Progress(progress)
    base_commit = resolve_commit(repo, base)
    head_commit = resolve_commit(repo, head) if head else None
    with tempfile.TemporaryDirectory(prefix="kvlint-review-") as scratch_name:
        scratch = Path(scratch_name)
        meter.phase("reading what the pull request changes")
        trees = review_trees(repo, base_commit, head_commit, scratch)
        change = changed_files(repo, trees)
        refused = list(change.refused)
        incomplete: list[str] = []  # what the cross-file analysis could not read (UnreadFile) or do
        config = load_review_config(repo, base_commit, config_path, scratch)
        oldest = oldest_python_at(config.source)  # the same file: a pull request cannot lower the bar for itself
        if head_commit is not None:
            tree = scratch / "head"
            tree.mkdir()
            left_out = materialise_python_tree(repo, head_commit, tree)
            refused += [entry for entry in left_out if entry not in refused]
            incomplete += index_failures(tree, left_out)
        else:
            tree = repo
        python = _readable_changed(tree, change.files, config.exclude, refused)
        texts = TreeTexts(tree, python)  # read when asked, a few kept: memory does not grow with the files
        findings, files_checked, placed = [], 0, {}
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
                reference=reference,
                target=target,
            )
            findings = [f for f in result.findings if f.path in change.files]
            files_checked = len(result.files)
            base_tree = _BaseTree(repo, trees.base, scratch / "base", reference, target)

            def base_issue_keys() -> set[tuple[str, str, str, str]]:
                root = base_tree.ready()
                inside = [root / p for p in python if (root / p).is_file()] or [root]
                index = build_project_index(inside, scheduler_only_paths=tuple(config.scheduler_only_paths))
                base_tree.failures += index.failures
                sizing = index.sizing
                return {issue_key(issue) for issue in (sizing.divergences if sizing is not None else ())}

            anchored, replaced = findings_through_touched_targets(
                result.project, tree, change.files, texts, findings, result.rules, config, base_issue_keys, incomplete
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
            # Asked last, when every use of the tree index has happened (it is built on first use).
            incomplete += result.degradations
            incomplete += [_in_base(line) for line in base_tree.failures]
        unread = _not_read_by_analysis(incomplete, refused)
        review = build_review(findings, change.files, texts, refused, files_checked, placed, oldest)
        # Each comment within GitHub's and stage two's limits: a long line degrades its comment, not the review.
        review.comments = fit_comments(review.comments)
        kept = texts.keep(f.path for f in [*review.in_diff, *review.outside_diff])  # the tree goes with `scratch`
    review.commit = head_commit or _head_commit(repo)
    # A file the analysis needed that kvlint's reading rules refuse is listed as not read (the review goes on);
    # only what the analysis could not do for other reasons is an error.
    review.incomplete = list(dict.fromkeys(line for line in incomplete if not isinstance(line, UnreadFile)))
    review.analysis_unread = unread
    review.fail_on = config.fail_on
    return review, kept


def index_failures(tree: Path, left_out: list[tuple[str, str]]) -> list[str]:
    """The files of a tree written from git that its tree index would have read but that were left out,
    said as the index says a file it could not read: a vLLM tree's index reads every `.py` under `vllm/` (a
    link there only when it is the interface or the resolver's home, which it reads by name; any other link
    it would follow only inside the tree, to a file it reads under its own name)."""
    if not (tree / INTERFACE_MODULE).is_file() and all(path != INTERFACE_MODULE for path, _ in left_out):
        return []
    return [
        # A blob the system would not write is kvlint's failure; any other file was refused for what it is.
        f"cross-file analysis incomplete: {path} not read: {why}"
        if why.startswith(WRITE_FAILURE)
        else UnreadFile(path, why)
        for path, why in left_out
        if path in (INTERFACE_MODULE, RESOLVER_HOME)
        or (path.startswith("vllm/") and why != SYMLINK_REFUSAL and not _hidden(path))
    ]


def _in_base(line: str) -> str:
    """A failure of the base revision's analysis, said as such."""
    if isinstance(line, UnreadFile):
        return UnreadFile(line.path, f"{line.why} (base revision)")
    return f"{line} (base revision)"


def _not_read_by_analysis(failures: list[str], refused: list[tuple[str, str]]) -> int:
    """How many files the cross-file analysis needed and could not read (UnreadFile); each is added to
    `refused` (the review's list of what it could not read) unless that path is there already."""
    said = {path for path, _ in refused}
    paths: set[str] = set()
    for line in failures:
        if isinstance(line, UnreadFile):
            paths.add(line.path)
            if line.path not in said:
                refused.append((line.path, line.why))
                said.add(line.path)
    return len(paths)


def _hidden(path: str) -> bool:
    # The index does not walk hidden folders (kvlint.analysis.tree_files.is_hidden).
    return any(part.startswith(".") for part in path.split("/")[:-1])


def _readable_changed(tree: Path, files, exclude, refused: list[tuple[str, str]]) -> list[str]:
    """The changed Python files to review that kvlint's one reader reads (each read, then let go: their
    texts are read again when needed); one it refuses (not a regular file, a link, too large) is added to
    `refused` with its reason unless already said there."""
    readable: list[str] = []
    said = {path for path, _ in refused}
    for path in sorted(files):
        if not path.endswith(".py") or is_excluded(path, exclude):
            continue
        try:
            read_file_inside(tree, path)
        except OSError as error:
            if path not in said:
                why = "not in the reviewed tree" if isinstance(error, FileNotFoundError) else describe(error)
                refused.append((path, why))
                said.add(path)
            continue
        readable.append(path)
    return readable


class _BaseTree:
    """The base revision's Python files, written to a scratch folder once, when first needed."""

    def __init__(
        self, repo: Path, commit: str, path: Path, reference: Path | None = None, target: TargetNames | None = None
    ):
        self.repo, self.commit, self.path = repo, commit, path
        self.reference, self.target = reference, target  # judged as the head is (make_review)
        self.failures: list[str] = []  # what its cross-file analysis could not read or do, once used

    def ready(self) -> Path:
        if not self.path.is_dir():
            self.path.mkdir()
            self.failures += index_failures(self.path, materialise_python_tree(self.repo, self.commit, self.path))
        return self.path

    def scan(
        self, python: list[str], config: Config, select: list[str] | None, ignore: list[str], jobs: int | None
    ) -> tuple[list[Finding], TreeTexts]:
        """The base revision's findings in the files `python` names (those it has), and their texts."""
        root = self.ready()
        present: list[str] = []
        for path in python:
            try:
                read_file_inside(root, path)
            except OSError:
                continue  # not in the base revision (or left out when written: in `failures` under vllm/)
            present.append(path)
        if not present:
            return [], TreeTexts(root, ())
        result = scan(
            [Path(p) for p in present],
            config,
            select,
            ignore,
            jobs,
            cache_dir=None,
            display_root=root,
            reference=self.reference,
            target=self.target,
        )
        self.failures += result.degradations
        return result.findings, TreeTexts(root, present)


def _head_commit(repo: Path) -> str | None:
    try:
        return git(repo, "rev-parse", "HEAD").decode().strip() or None
    except ReviewError:
        return None
