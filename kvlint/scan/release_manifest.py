"""A cached release folder is used only as kvlint extracted it: a manifest signed with the cache key says so.

Anyone who can write the cache folder could otherwise plant a release (`check` scans their one file and says
"no findings"; `verify` imports their package; `--upstream-tests` runs their conftest.py). So right after
extraction, before the folder is put in place, kvlint writes `.kvlint-manifest` inside it: every folder, and
every file with its size and sha256, signed (HMAC-SHA256, kvlint/scan/signing.py) with this user's key and
bound to the folder's name. The digests signed are those of the bytes extraction wrote (taken from the
archive whose digest was checked): the staging folder must hold exactly the files extraction made, the very
same ones (inode), or nothing is signed. Before a cached folder is scanned, imported or tested, it is walked
without following links: each entry must be in the manifest, each file listed must be there, a regular file of
the same size and digest. Both walks open every folder from the one above it (O_DIRECTORY | O_NOFOLLOW, by
descriptor, never by path again) and refuse a link anywhere, the folder itself included, and any folder or
file another account could write (kvlint/scan/ownership.py). The digests are read again only for a file whose inode or change time moved since the
manifest was signed (neither can be set back without root): a warm check stats the files, it does not read
them. A folder restored as a copy (new inodes, same bytes) is hashed once and its manifest signed again.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from kvlint.scan.ownership import others_may_write
from kvlint.scan.signing import sign, verify

MANIFEST = ".kvlint-manifest"
_CONTEXT = b"kvlint release manifest 1"
_LIMIT = 64 * 1024 * 1024  # 0.34.0's sdist sources and tests: 5,790 files, a manifest of about 0.8 MB
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_DEPTH = 64  # vLLM's deepest file is 8 folders down; a deeper cache is not kvlint's
_FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC


class Mismatch(Exception):
    """The folder is not what the manifest lists; the message names the first difference."""


class _File(NamedTuple):
    info: os.stat_result
    folder: int  # the open folder holding it, valid while the walk is at it
    name: str


def write_manifest(
    folder: Path, key: bytes | None, name: str, extracted: Mapping[str, tuple[int, str, int, int]]
) -> tuple[int, int]:
    """Sign what `folder` holds for the folder `name` it is about to become; returns the folder's (device, inode).
    `extracted`: every file extraction wrote (relative name → size, sha256, inode, change time). Mismatch
    unless `folder` holds exactly those, as written: a link, another file or another account's entry is never
    signed. Without a `key` the folder is checked all the same, and nothing is written."""
    root = _open_root(folder)
    try:
        listed: dict[str, list] = {}

        def sign_file(relative: str, entry: _File) -> None:
            written = extracted.get(relative)
            if written is None:
                raise Mismatch(f"{relative} was not extracted")
            size, digest, inode, changed = written
            info = entry.info
            if (info.st_size, info.st_ino) != (size, inode):
                raise Mismatch(f"{relative} is not the file extraction wrote")
            if info.st_ctime_ns != changed and _digest(entry) != digest:
                raise Mismatch(f"{relative} changed after extraction")
            listed[relative] = [size, digest, info.st_ino, info.st_ctime_ns]

        folders = _walk(root, sign_file)
        missing = sorted(set(extracted) - set(listed))
        if missing:
            raise Mismatch(f"{missing[0]} is missing")
        if key is not None:
            _store(root, key, name, sorted(folders), listed)
        identity = os.fstat(root)
        return identity.st_dev, identity.st_ino
    finally:
        os.close(root)


def check_manifest(folder: Path, key: bytes) -> None:
    """Raise Mismatch unless `folder` holds exactly what its signed manifest lists."""
    root = _open_root(folder)
    try:
        folders_listed, files_listed = _load(root, key, folder.name)
        seen: dict[str, list] = {}
        changed: list[str] = []

        def check_file(relative: str, entry: _File) -> None:
            info = entry.info
            seen[relative] = listed = [info.st_size, None, info.st_ino, info.st_ctime_ns]
            expected = files_listed.get(relative)
            if expected is None:
                return
            size, digest, inode, ctime = expected
            listed[1] = digest
            if (info.st_size, info.st_ino, info.st_ctime_ns) == (size, inode, ctime):
                return  # untouched since it was hashed and signed
            if info.st_size != size or _digest(entry) != digest:
                changed.append(relative)

        folders = set(_walk(root, check_file))
        extra = sorted((folders - set(folders_listed)) | (set(seen) - set(files_listed)))
        if extra:
            raise Mismatch(f"{extra[0]} was added")
        missing = sorted(set(files_listed) - set(seen))
        if missing:
            raise Mismatch(f"{missing[0]} is missing")
        if changed:
            raise Mismatch(f"{sorted(changed)[0]} was changed")
        if seen != files_listed:  # the same bytes under new inodes (a restored copy): sign what is there now
            try:
                _store(root, key, folder.name, folders_listed, seen)
            except OSError:
                pass  # a read-only cache: checked by digest again next time
    finally:
        os.close(root)


def _open_root(folder: Path) -> int:
    """`folder` opened without following a link; Mismatch when it is a link, not a folder, or not this user's alone."""
    try:
        descriptor = os.open(folder, _FOLDER_FLAGS)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
            kind = "a symbolic link" if os.path.islink(folder) else "not a folder"
            raise Mismatch(f"the folder itself is {kind}") from None
        raise
    problem = others_may_write(os.fstat(descriptor))
    if problem:
        os.close(descriptor)
        raise Mismatch(f"the folder itself is {problem}")
    return descriptor


def _walk(root: int, on_file: Callable[[str, _File], None]) -> list[str]:
    """Every folder below the open `root` (relative, `/`-separated), and `on_file` called on each regular file
    while its folder is open (read it through that descriptor, by name, never by path), the manifest aside.
    Each entry must be this user's alone; anything else (a link, a FIFO, another account's file) is a Mismatch."""
    folders: list[str] = []
    uid = os.geteuid()

    def visit(folder: int, relative: str, depth: int) -> None:
        if depth > _DEPTH:
            raise Mismatch(f"{relative} is nested over {_DEPTH} folders deep")
        with os.scandir(folder) as entries:
            found = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
        for name, info in found:
            path = relative + name
            if path == MANIFEST:
                continue
            mode = info.st_mode
            if info.st_uid != uid or mode & 0o022 or not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                problem = others_may_write(info) if stat.S_ISDIR(mode) or stat.S_ISREG(mode) else None
                raise Mismatch(f"{path} is {problem or 'not a regular file or folder'}")
            if stat.S_ISREG(mode):
                on_file(path, _File(info, folder, name))
                continue
            folders.append(path)
            try:
                child = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError:
                raise Mismatch(f"{path} changed while it was checked") from None
            try:
                opened = os.fstat(child)
                if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                    raise Mismatch(f"{path} changed while it was checked")
                visit(child, path + "/", depth + 1)
            finally:
                os.close(child)

    visit(root, "", 0)
    return folders


def _digest(entry: _File) -> str:
    digest = hashlib.sha256()
    descriptor = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.folder)
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise Mismatch(f"{entry.name} is not a regular file")
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _store(root: int, key: bytes, name: str, folders: list[str], files: Mapping[str, list]) -> None:
    body = json.dumps({"folders": folders, "files": files}, sort_keys=True, separators=(",", ":")).encode()
    signature = sign(key, _CONTEXT, name.encode(), body)
    temporary = f"{MANIFEST}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    with os.fdopen(os.open(temporary, flags, 0o600, dir_fd=root), "wb") as stream:
        stream.write(signature.encode() + b"\n" + body)
    os.replace(temporary, MANIFEST, src_dir_fd=root, dst_dir_fd=root)


def _load(root: int, key: bytes, name: str) -> tuple[list[str], dict[str, list]]:
    try:
        data = _read_manifest(root)
    except FileNotFoundError:
        raise Mismatch(f"no {MANIFEST}: kept by an earlier kvlint, or not made by kvlint") from None
    except OSError as error:
        raise Mismatch(f"{MANIFEST} cannot be read ({error.strerror or type(error).__name__})") from None
    signature, _, body = data.partition(b"\n")
    if not verify(key, signature, _CONTEXT, name.encode(), body):
        raise Mismatch(f"{MANIFEST} is not signed with this user's cache key")
    try:
        manifest = json.loads(body)
        return list(manifest["folders"]), dict(manifest["files"])
    except (ValueError, KeyError, TypeError):  # signed by this user's kvlint yet unreadable: a disk error
        raise Mismatch(f"{MANIFEST} is damaged") from None


def _read_manifest(root: int) -> bytes:
    descriptor = os.open(MANIFEST, _FILE_FLAGS, dir_fd=root)
    with os.fdopen(descriptor, "rb") as stream:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = stream.read(_LIMIT + 1)
    if len(data) > _LIMIT:
        raise OSError(errno.EFBIG, "too large")
    return data
