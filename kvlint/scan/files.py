"""Expand the paths a user gives into the Python files to scan, honouring excludes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

# Never worth descending into.
SKIPPED_FOLDERS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        "node_modules",
        "build",
        "dist",
        ".kvlint_cache",
    }
)


@dataclass(frozen=True)
class SourceFile:
    path: str  # as the user named it (relative paths stay relative)
    display: str
    # The absolute path with every symbolic link resolved, when the walk knew it without asking the disk.
    real: str | None = None


@dataclass(frozen=True)
class PathProblem:
    display: str
    cause: str


def is_excluded(display: str, patterns: list[str]) -> bool:
    posix = display.replace(os.sep, "/")
    parts = posix.split("/")

    def matches(pattern: str) -> bool:
        folder = pattern.rstrip("/") + "/*"
        if (
            fnmatchcase(posix, pattern)
            or fnmatchcase(posix, folder)
            or any(fnmatchcase(part, pattern) for part in parts)
        ):
            return True
        # A relative pattern (`vllm/v1/worker/*`) also matches inside an absolute or prefixed path,
        # as a scan of `--vllm-release` or of a checkout from elsewhere produces.
        return not pattern.startswith("/") and (fnmatchcase(posix, "*/" + pattern) or fnmatchcase(posix, "*/" + folder))

    return any(matches(pattern) for pattern in patterns)


def collect_files(
    paths: list[Path], exclude: list[str], display_root: Path | None = None
) -> tuple[list[SourceFile], list[PathProblem]]:
    """The files under `paths`, in walk order, each once. With `display_root`, a relative path is read
    under that folder but shown (and matched against excludes and per-file-ignores) as given."""
    files: list[SourceFile] = []
    problems: list[PathProblem] = []
    seen: set[str] = set()

    def add(path: str, display: str, real: str | None = None) -> None:
        display = os.path.normpath(display)
        if display in seen or (exclude and is_excluded(display, exclude)):
            return
        seen.add(display)
        files.append(SourceFile(path, display, real))

    for given in paths:
        on_disk = given if display_root is None else display_root / given
        if on_disk.is_file():
            add(str(on_disk), str(given))  # named explicitly: scanned whatever its suffix
        elif on_disk.is_dir():
            base, shown = str(on_disk), str(given)

            def displayed(path: str, base: str = base, shown: str = shown) -> str:
                return path if base == shown or not path.startswith(base) else shown + path[len(base) :]

            def excluded_folder(path: str, displayed=displayed) -> bool:
                return bool(exclude) and is_excluded(displayed(path), exclude)

            walk_problems: list[PathProblem] = []
            for path, real in walk_python(base, excluded_folder, walk_problems):
                add(path, displayed(path), real)
            problems.extend(PathProblem(displayed(p.display), p.cause) for p in walk_problems)
        elif on_disk.is_symlink():
            problems.append(PathProblem(str(given), "dangling symbolic link"))
        else:
            problems.append(PathProblem(str(given), "no such file or directory"))
    return files, problems


def walk_python(
    root: str,
    skip_folder: Callable[[str], bool] | None = None,
    problems: list[PathProblem] | None = None,
) -> Iterator[tuple[str, str]]:
    """Every `.py` file under `root` as (path, real path): the one tree walk of kvlint.

    Depth first, a folder's files before its subfolders, each in sorted order; SKIPPED_FOLDERS and the
    folders `skip_folder` rejects are not entered; folder links are followed once each (as `os.walk`
    with followlinks=True would, but from `os.scandir` entries: no stat per ordinary file). Real paths
    are carried down the walk, so only links cost a `realpath`. A folder that cannot be listed and a
    dangling link are added to `problems`; a `.py` that is not a regular file is left out.
    """
    visited: set[tuple[int, int]] = set()
    # (folder, its real path), popped in walk order: subfolders are pushed in reverse.
    stack = [(root, os.path.realpath(root))]
    while stack:
        folder, real_folder = stack.pop()
        try:
            stat = os.stat(folder)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in visited:  # a symlink loop: already walked
            continue
        visited.add((stat.st_dev, stat.st_ino))
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            if problems is not None:
                problems.append(
                    PathProblem(
                        str(error.filename if error.filename is not None else folder),
                        f"cannot list folder: {error.strerror}",
                    )
                )
            continue
        folders: list[os.DirEntry] = []
        names: list[os.DirEntry] = []
        for entry in entries:
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            (folders if is_folder else names).append(entry)
        names.sort(key=lambda e: e.name)
        for entry in names:
            found = _python_file(entry, real_folder, problems)
            if found is not None:
                yield found
        folders.sort(key=lambda e: e.name, reverse=True)
        for entry in folders:
            name = entry.name
            if name not in SKIPPED_FOLDERS and not (skip_folder is not None and skip_folder(entry.path)):
                stack.append(
                    (entry.path, os.path.realpath(entry.path) if entry.is_symlink() else f"{real_folder}{os.sep}{name}")
                )


def _python_file(entry: os.DirEntry, real_folder: str, problems: list[PathProblem] | None) -> tuple[str, str] | None:
    if not entry.name.endswith(".py"):
        return None
    path = entry.path  # folder + name, joined by scandir itself
    if entry.is_symlink():
        if not os.path.exists(path):
            if problems is not None:
                problems.append(PathProblem(os.path.normpath(path), "dangling symbolic link"))
            return None
        real = os.path.realpath(path)
    else:
        real = f"{real_folder}{os.sep}{entry.name}"
    try:
        if not entry.is_file():
            return None  # e.g. a socket named x.py: not source
    except OSError:
        return None
    return path, real
