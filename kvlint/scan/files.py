"""Expand the paths a user gives into the Python files to scan, honouring excludes.

The walk itself (regular files only, never out of the scanned folder) is kvlint.filesystem's `walk_python`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from kvlint.filesystem import SKIPPED_FOLDERS, PathProblem, file_kind, notice, walk_python

__all__ = ["SKIPPED_FOLDERS", "PathProblem", "SourceFile", "collect_files", "is_excluded", "walk_python"]


@dataclass(frozen=True)
class SourceFile:
    path: str  # as the user named it (relative paths stay relative)
    display: str
    # The absolute path with every symbolic link resolved, when the walk knew it without asking the disk.
    real: str | None = None


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
        kind = _given_kind(on_disk)
        if kind == "file":
            add(str(on_disk), str(given))  # named explicitly: scanned whatever its suffix
        elif kind == "folder":
            base, shown = str(on_disk), str(given)

            def displayed(path: str, base: str = base, shown: str = shown) -> str:
                return path if base == shown or not path.startswith(base) else shown + path[len(base) :]

            def excluded_folder(path: str, displayed=displayed) -> bool:
                return bool(exclude) and is_excluded(displayed(path), exclude)

            walk_problems: list[PathProblem] = []
            for path, real in walk_python(base, excluded_folder, walk_problems):
                add(path, displayed(path), real)
            problems.extend(PathProblem(displayed(p.display), p.cause) for p in walk_problems)
        else:
            problems.append(PathProblem(str(given), kind, given=True))
    return files, problems


def _given_kind(path: Path) -> str:
    """ "file", "folder", or why a path the user named cannot be scanned (a name too long for this system,
    a FIFO or a device such as /dev/stdin, which would block or never end, …)."""
    notice("probe", path)  # a named file is read in a worker: this is what the run depends on
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        try:
            os.lstat(path)
        except OSError:
            missing = isinstance(error, (FileNotFoundError, NotADirectoryError))
            return "no such file or directory" if missing else f"cannot read: {error.strerror}"
        return "dangling symbolic link"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return f"not a regular file or folder ({file_kind(mode)})"
