"""Expand the paths a user gives into the Python files to scan, honouring excludes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

# Never worth descending into.
SKIPPED_FOLDERS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", ".nox", ".mypy_cache", ".pytest_cache", "node_modules", "build", "dist", ".kvlint_cache"})


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
        if fnmatchcase(posix, pattern) or fnmatchcase(posix, folder) or any(fnmatchcase(part, pattern) for part in parts):
            return True
        # A relative pattern (`vllm/v1/worker/*`) also matches inside an absolute or prefixed path,
        # as a scan of `--vllm-release` or of a checkout from elsewhere produces.
        return not pattern.startswith("/") and (fnmatchcase(posix, "*/" + pattern) or fnmatchcase(posix, "*/" + folder))

    return any(matches(pattern) for pattern in patterns)


def collect_files(paths: list[Path], exclude: list[str]) -> tuple[list[SourceFile], list[PathProblem]]:
    files: list[SourceFile] = []
    problems: list[PathProblem] = []
    seen: set[str] = set()

    def add(path: str, real: str | None = None) -> None:
        display = os.path.normpath(path)
        if display in seen or (exclude and is_excluded(display, exclude)):
            return
        seen.add(display)
        files.append(SourceFile(path, display, real))

    for given in paths:
        if given.is_file():
            add(str(given))  # named explicitly: scanned whatever its suffix
        elif given.is_dir():
            _walk(str(given), exclude, add, problems)
        elif given.is_symlink():
            problems.append(PathProblem(str(given), "dangling symbolic link"))
        else:
            problems.append(PathProblem(str(given), "no such file or directory"))
    return files, problems


def _walk(root: str, exclude: list[str], add, problems: list[PathProblem]) -> None:
    """Depth first, folders and files in sorted order, following folder links once each (as `os.walk`
    with followlinks=True would, but from `os.scandir` entries: no stat per ordinary file). Real paths
    are carried down the walk, so only links cost a `realpath`."""
    visited: set[tuple[int, int]] = set()

    def walk(folder: str, real_folder: str) -> None:
        try:
            stat = os.stat(folder)
        except OSError:
            return
        if (stat.st_dev, stat.st_ino) in visited:  # a symlink loop: already walked
            return
        visited.add((stat.st_dev, stat.st_ino))
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            problems.append(PathProblem(str(error.filename if error.filename is not None else folder), f"cannot list folder: {error.strerror}"))
            return
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
            if not entry.name.endswith(".py"):
                continue
            path = entry.path  # folder + name, joined by scandir itself
            if entry.is_symlink():
                if not os.path.exists(path):
                    problems.append(PathProblem(os.path.normpath(path), "dangling symbolic link"))
                    continue
                real = os.path.realpath(path)
            else:
                real = f"{real_folder}{os.sep}{entry.name}"
            try:
                if not entry.is_file():
                    continue  # e.g. a socket named x.py: not source
            except OSError:
                continue
            add(path, real)
        folders.sort(key=lambda e: e.name)
        for entry in folders:
            name = entry.name
            path = entry.path
            if name not in SKIPPED_FOLDERS and not (exclude and is_excluded(path, exclude)):
                walk(path, os.path.realpath(path) if entry.is_symlink() else f"{real_folder}{os.sep}{name}")

    walk(root, os.path.realpath(root))
