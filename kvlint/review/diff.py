"""What a pull request changes, read from git: changed lines per file, and the head tree's sources.

git runs with an argument list (never a shell), with external diff drivers and textconv filters off,
so nothing the pull request ships is executed. Paths that would leave the repository are refused.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from kvlint.errors import ReviewError

# GitHub shows three lines of context around each change; a review comment may sit on any of them.
CONTEXT_LINES = 3
_GIT_TIMEOUT_S = 300
_SYMLINK_MODE = "120000"


@dataclass
class ChangedFile:
    """One file the pull request adds or modifies, on the head side ("RIGHT" in GitHub's terms)."""

    path: str
    added: set[int] = field(default_factory=set)  # lines the pull request adds or changes
    visible: set[int] = field(default_factory=set)  # added lines plus the context lines GitHub shows

    def touches(self, first: int, last: int) -> bool:
        return any(first <= line <= last for line in self.added)

    def first_added(self, first: int, last: int) -> int | None:
        return min((line for line in self.added if first <= line <= last), default=None)


@dataclass
class Change:
    files: dict[str, ChangedFile]
    refused: list[str]  # "path: why" for each changed path kvlint will not read


def git(repo: Path, *arguments: str, input_bytes: bytes | None = None) -> bytes:
    """Run git in `repo` and return its stdout; a failure becomes a ReviewError with git's own first line."""
    command = ["git", "-C", str(repo), "-c", "core.quotepath=off", "-c", "core.fsmonitor=false", *arguments]
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0"}
    try:
        completed = subprocess.run(command, input=input_bytes, capture_output=True, timeout=_GIT_TIMEOUT_S, env=environment, check=False)
    except FileNotFoundError:
        raise ReviewError("git is not installed (kvlint review reads the pull request with git)") from None
    except subprocess.TimeoutExpired:
        raise ReviewError(f"git {arguments[0]} did not finish within {_GIT_TIMEOUT_S}s") from None
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        first = next((line for line in message if line.strip()), f"exit status {completed.returncode}")
        raise ReviewError(f"git {arguments[0]} failed: {first.removeprefix('fatal: ')}")
    return completed.stdout


def repository_root(start: Path) -> Path:
    try:
        output = git(start, "rev-parse", "--show-toplevel")
    except ReviewError as error:
        raise ReviewError(f"{start}: not inside a git checkout ({error})") from None
    return Path(output.decode("utf-8", "surrogateescape").strip()).resolve()


def resolve_commit(repo: Path, ref: str) -> str:
    if ref.startswith("-"):
        raise ReviewError(f"{ref!r} is not a git revision")
    try:
        output = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except ReviewError:
        output = b""
    commit = output.decode().strip()
    if not ref or not commit:
        raise ReviewError(f"unknown git revision {ref!r}")
    return commit


def safe_relative_path(path: str) -> str | None:
    """Why `path` (as git names it) must not be read, or None when it stays inside the repository."""
    if not path or "\0" in path or "\n" in path or "\r" in path:
        return "an unprintable path"
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        return "an absolute path"
    if any(part in ("..", ".git") for part in pure.parts) or "\\" in path:
        return "a path that leaves the repository"
    return None


def changed_files(repo: Path, base: str, head: str | None) -> Change:
    """The lines each file changes between the merge base of `base` and `head` (the working tree when None)."""
    arguments = [
        "diff",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        f"--unified={CONTEXT_LINES}",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--diff-filter=AMRC",  # deleted files leave nothing to comment on
    ]
    if head is None:
        arguments += ["--merge-base", base]  # merge base of base and HEAD, against the working tree
    else:
        arguments.append(f"{base}...{head}")
    arguments += ["--", "."]
    text = git(repo, *arguments).decode("utf-8", "surrogateescape")
    try:
        patch = PatchSet(text)
    except UnidiffParseError as error:
        raise ReviewError(f"cannot parse git's diff: {error}") from None
    files: dict[str, ChangedFile] = {}
    refused: list[str] = []
    for patched in patch:
        target = patched.target_file or ""
        if target == "/dev/null":
            continue
        path = target[2:] if target.startswith("b/") else target
        why = "a quoted path git could not print plainly" if path.startswith('"') else safe_relative_path(path)
        if why is None and head is None:
            why = _working_tree_problem(repo, path)
        if why is not None:
            refused.append(f"{path}: {why}")
            continue
        if getattr(patched, "is_symlink", False):
            refused.append(f"{path}: a symbolic link")
            continue
        changed = files.setdefault(path, ChangedFile(path))
        for hunk in patched:
            for line in hunk:
                if line.target_line_no is None:
                    continue
                changed.visible.add(line.target_line_no)
                if line.is_added:
                    changed.added.add(line.target_line_no)
    return Change(files, refused)


def _working_tree_problem(repo: Path, path: str) -> str | None:
    candidate = repo / path
    if candidate.is_symlink():
        target = candidate.resolve()
        if not target.is_relative_to(repo):
            return "a symbolic link that points outside the repository"
    try:
        candidate.resolve().relative_to(repo)
    except ValueError:
        return "a path that leaves the repository"
    return None


def read_blob(repo: Path, commit: str, path: str) -> bytes | None:
    """`git show commit:path`; None when the file does not exist there."""
    try:
        return git(repo, "show", "--no-textconv", f"{commit}:{path}")
    except ReviewError:
        return None


def materialise_python_tree(repo: Path, commit: str, destination: Path) -> list[str]:
    """Write every Python source of `commit` under `destination` (regular blobs only); returns refusals.

    The whole tree is needed, not only the changed files: the cross-file analysis reads the spec hierarchy,
    the resolver and the scheduler's sizing path from wherever the tree defines them.
    """
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    wanted: list[tuple[str, str]] = []
    refused: list[str] = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind != "blob" or not path.endswith(".py"):
            continue
        if mode == _SYMLINK_MODE:
            refused.append(f"{path}: a symbolic link")
            continue
        why = safe_relative_path(path)
        if why is not None:
            refused.append(f"{path}: {why}")
            continue
        wanted.append((path, sha))
    if not wanted:
        return refused
    # One git process for all blobs: `git cat-file --batch` is `git show <sha>` without a process per file.
    output = git(repo, "cat-file", "--batch", input_bytes="".join(f"{sha}\n" for _, sha in wanted).encode())
    position = 0
    root = destination.resolve()
    for path, sha in wanted:
        header_end = output.index(b"\n", position)
        header = output[position:header_end].split()
        size = int(header[2])
        data = output[header_end + 1 : header_end + 1 + size]
        position = header_end + 1 + size + 1
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.resolve().is_relative_to(root):
            refused.append(f"{path}: a path that leaves the repository")
            continue
        target.write_bytes(data)
    return refused
