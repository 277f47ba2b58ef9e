"""The one tree walk and the one file read of kvlint: regular files only, size capped before reading, never
a step out of the folder being walked.

Every layer reads a tree through here: the scan (`kvlint.scan.files`, the runner, the caches), the engine,
the tree analysis (`kvlint.analysis.tree_files`) and `fix`. A tree may come from a pull request, so a name
ending in `.py` may be a FIFO (opening it would wait for a writer), a link to `/dev/zero` (reading it never
ends), a device whose open has effects, or a link to a folder outside the tree (`/`, the stdlib). None of
them is opened: the kind is checked before the open (by stat) and again on the open file (fstat, same
inode), the open never blocks (O_NONBLOCK), and the size is checked before a byte is read.

A leaf module: it imports nothing of kvlint, so that every layer may use it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

# The largest source file kvlint reads: a bigger one is a finding (KV000), never loaded.
MAX_FILE_BYTES = 10 * 1024 * 1024

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

# Told of every folder a walk lists, every file it finds and every path a lookup asks about, while a run is
# recorded to be replayed (kvlint.scan.replay): what the run's output depends on in the filesystem. None: no one asks.
_observer: Callable[[str, str], None] | None = None

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_READ_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, …): never read."""

    def __init__(self, path: str, kind: str):
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", path)
        self.kind = kind


class FileTooLarge(OSError):
    """A regular file over the size limit: refused before (or, if it grew, while) reading it."""

    def __init__(self, path: str, size: int, limit: int):
        super().__init__(errno.EFBIG, f"too large ({size / 2**20:.1f} MiB > {limit // 2**20} MiB)", path)
        self.size = size
        self.limit = limit


def observe(observer: Callable[[str, str], None] | None) -> None:
    """Tell `observer(kind, path)` — kind "folder" (listed), "file" (found or read) or "probe" (asked whether it
    is a file) — of what the walks and lookups of this process touch from now on; None stops it."""
    global _observer
    _observer = observer


def notice(kind: str, path: str | os.PathLike) -> None:
    """Tell the observer, if any, of a folder listed, a file read or a path looked up some other way (a glob, a
    stat) than this module's walk and read."""
    if _observer is not None:
        _observer(kind, os.fspath(path))


def probe_file(path: str | os.PathLike) -> bool:
    """Whether `path` is a regular file (or a link to one), as `Path.is_file` says: the lookup a search for a
    marker file (a configuration, a tree's root) makes, told to the observer whatever the answer."""
    name = os.fspath(path)
    if _observer is not None:
        _observer("probe", name)
    return os.path.isfile(name)


def file_kind(mode: int) -> str:
    """What a stat mode is, in words: `regular file`, `FIFO`, `character device`, …"""
    for test, name in (
        (stat.S_ISREG, "regular file"),
        (stat.S_ISDIR, "folder"),
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
    ):
        if test(mode):
            return name
    return "unknown kind of file"


def describe(error: OSError) -> str:
    """One line saying why a file was not read (no path: the caller names the file)."""
    if isinstance(error, (NotRegularFile, FileTooLarge)):
        return error.strerror
    return error.strerror or str(error)


def read_regular_file(path: str | os.PathLike, limit: int = MAX_FILE_BYTES, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; OSError otherwise (NotRegularFile, FileTooLarge,
    IsADirectoryError, FileNotFoundError, …). With follow_symlinks False, a symbolic link is refused (ELOOP).

    The file's kind is checked before it is opened (opening a device or a FIFO may do something), and on the
    open descriptor (it may have been swapped in between); the open never waits; nothing past `limit` is read.
    """
    name = os.fspath(path)
    if _observer is not None:
        _observer("file", name)
    before = os.stat(name, follow_symlinks=follow_symlinks)
    _check_kind(name, before, limit)
    flags = _OPEN_FLAGS | (0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0))
    descriptor = os.open(name, flags)
    try:
        info = os.fstat(descriptor)
        _check_kind(name, info, limit)
        if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise FileNotFoundError(errno.ENOENT, "replaced while being opened", name)
        chunks: list[bytes] = []
        total = 0
        while True:
            # The first read asks for the whole file and one byte more: usually one read, then end of file.
            chunk = os.read(descriptor, min(limit + 1 - total, max(info.st_size + 1 - total, _READ_CHUNK)))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileTooLarge(name, total, limit)  # it grew since fstat
    finally:
        os.close(descriptor)


def read_file_inside(root: str | os.PathLike, relative: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file `relative` under `root`, read as read_regular_file reads (at most `limit`
    bytes, without blocking) and never through a link: the file itself must not be one (NotRegularFile:
    `not a regular file (symbolic link)`), and its folder must resolve inside `root` (ELOOP otherwise)."""
    path = os.path.join(os.fspath(root), relative)
    if not is_inside(os.path.realpath(os.path.dirname(path)), os.path.realpath(root)):
        raise OSError(errno.ELOOP, "under a symbolic link out of the tree", path)
    return read_regular_file(path, limit, follow_symlinks=False)


def _check_kind(name: str, info: os.stat_result, limit: int) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
    if not stat.S_ISREG(info.st_mode):
        raise NotRegularFile(name, file_kind(info.st_mode))
    if info.st_size > limit:
        raise FileTooLarge(name, info.st_size, limit)


def is_inside(real: str, boundary: str) -> bool:
    """Whether the resolved path `real` is `boundary` or lies under it (both resolved, absolute)."""
    return real == boundary or real.startswith(boundary.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class PathProblem:
    """A path that was not read, and why (one line). `given`: the user named it (then it is an error)."""

    display: str
    cause: str
    given: bool = False


OUTSIDE_FOLDER = "symbolic link to a folder outside the scanned folder: not followed"
OUTSIDE_FILE = "symbolic link to a file outside the scanned folder: not read"


def walk_python(
    root: str,
    skip_folder: Callable[[str], bool] | None = None,
    problems: list[PathProblem] | None = None,
    *,
    links_may_leave: bool = False,
) -> Iterator[tuple[str, str]]:
    """Every regular `.py` file under `root` as (path, real path): the one tree walk of kvlint.

    Depth first, a folder's files before its subfolders, each in sorted order; SKIPPED_FOLDERS and the
    folders `skip_folder` rejects are not entered. A symbolic link is followed only when it resolves inside
    `root` (a folder link at most once: a loop, or two links to one folder, is walked once); a link out of
    it (to `/`, to the stdlib, to a secret) is a problem, never walked or read. Real paths are carried down
    the walk, so only links cost a `realpath`. A folder that cannot be listed, a dangling link and a `.py`
    that is not a regular file (a FIFO, a device, a link to one) are added to `problems`.
    `links_may_leave`: only for a trusted tree (kvlint's own sources, which an install may link from elsewhere).
    """
    boundary = os.sep if links_may_leave else os.path.realpath(root)
    visited: set[tuple[int, int]] = set()
    # (folder, its real path), popped in walk order: subfolders are pushed in reverse.
    stack = [(root, os.path.realpath(root))]
    while stack:
        folder, real_folder = stack.pop()
        try:
            info = os.stat(folder)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in visited:  # a symlink loop, or a second link to it: already walked
            continue
        visited.add((info.st_dev, info.st_ino))
        if _observer is not None:
            _observer("folder", folder)
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            _note(
                problems,
                str(error.filename if error.filename is not None else folder),
                f"cannot list folder: {error.strerror}",
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
            found = _python_file(entry, real_folder, boundary, problems)
            if found is not None:
                if _observer is not None:
                    _observer("file", found[0])
                yield found
        folders.sort(key=lambda e: e.name, reverse=True)
        for entry in folders:
            if entry.name in SKIPPED_FOLDERS or (skip_folder is not None and skip_folder(entry.path)):
                continue
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if not is_inside(real, boundary):
                    _note(problems, entry.path, OUTSIDE_FOLDER)
                    continue
            else:
                real = f"{real_folder}{os.sep}{entry.name}"
            stack.append((entry.path, real))


def _python_file(
    entry: os.DirEntry, real_folder: str, boundary: str, problems: list[PathProblem] | None
) -> tuple[str, str] | None:
    if not entry.name.endswith(".py"):
        return None
    path = entry.path  # folder + name, joined by scandir itself
    try:
        if entry.is_symlink():
            real = os.path.realpath(path)
            if not os.path.exists(real):
                return _note(problems, path, "dangling symbolic link")
            if not is_inside(real, boundary):
                return _note(problems, path, OUTSIDE_FILE)
        else:
            real = f"{real_folder}{os.sep}{entry.name}"
        if not entry.is_file():  # follows the link: what the name leads to
            return _note(problems, path, f"not a regular file ({file_kind(entry.stat().st_mode)}): not read")
    except OSError as error:
        return _note(problems, path, f"cannot read: {error.strerror}")
    return path, real


def _note(problems: list[PathProblem] | None, path: str, cause: str) -> None:
    if _observer is not None:  # a dangling link, a link out of the tree, …: what it leads to may change
        _observer("probe", path)
    if problems is not None:
        problems.append(PathProblem(os.path.normpath(path), cause))
