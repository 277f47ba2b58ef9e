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
    path: Path  # as the user named it (relative paths stay relative)
    display: str


@dataclass(frozen=True)
class PathProblem:
    display: str
    cause: str


def is_excluded(display: str, patterns: list[str]) -> bool:
    posix = display.replace(os.sep, "/")
    parts = posix.split("/")
    return any(
        fnmatchcase(posix, pattern) or fnmatchcase(posix, pattern.rstrip("/") + "/*") or any(fnmatchcase(part, pattern) for part in parts)
        for pattern in patterns
    )


def collect_files(paths: list[Path], exclude: list[str]) -> tuple[list[SourceFile], list[PathProblem]]:
    files: list[SourceFile] = []
    problems: list[PathProblem] = []
    seen: set[str] = set()

    def add(path: Path) -> None:
        display = os.path.normpath(str(path))
        if display in seen or is_excluded(display, exclude):
            return
        seen.add(display)
        files.append(SourceFile(path, display))

    for given in paths:
        if given.is_file():
            add(given)  # named explicitly: scanned whatever its suffix
        elif given.is_dir():
            _walk(given, exclude, add, problems)
        elif given.is_symlink():
            problems.append(PathProblem(str(given), "dangling symbolic link"))
        else:
            problems.append(PathProblem(str(given), "no such file or directory"))
    return files, problems


def _walk(root: Path, exclude: list[str], add, problems: list[PathProblem]) -> None:
    visited: set[tuple[int, int]] = set()

    def on_error(error: OSError) -> None:
        problems.append(PathProblem(str(error.filename), f"cannot list folder: {error.strerror}"))

    for folder, dirs, names in os.walk(root, onerror=on_error, followlinks=True):
        try:
            stat = os.stat(folder)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in visited:  # a symlink loop: already walked
            dirs[:] = []
            continue
        visited.add((stat.st_dev, stat.st_ino))
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_FOLDERS and not is_excluded(os.path.join(folder, d), exclude))
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            if path.is_symlink() and not path.exists():
                problems.append(PathProblem(os.path.normpath(str(path)), "dangling symbolic link"))
                continue
            if not path.is_file():
                continue  # e.g. a folder or socket named x.py: not source
            add(path)
