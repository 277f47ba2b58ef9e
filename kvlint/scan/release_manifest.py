"""A cached release folder is used only as kvlint extracted it: a manifest signed with the cache key says so.

Anyone who can write the cache folder could otherwise plant a release (`check` scans their one file and says
"no findings"; `verify` imports their package; `--upstream-tests` runs their conftest.py). So right after
extraction, before the folder is put in place, kvlint writes `.kvlint-manifest` inside it: every folder, and
every file with its size and sha256, signed (HMAC-SHA256, kvlint/scan/signing.py) with this user's key and
bound to the folder's name. Before a cached folder is scanned, imported or tested, it is walked without
following links: each entry must be in the manifest, each file listed must be there, a regular file of the
same size and digest. The digests are read again only for a file whose inode or change time moved since the
manifest was signed (neither can be set back without root): a warm check stats the files, it does not read
them. A folder restored as a copy (new inodes, same bytes) is hashed once and its manifest signed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from kvlint.filesystem import read_regular_file
from kvlint.scan.signing import sign, verify

MANIFEST = ".kvlint-manifest"
_CONTEXT = b"kvlint release manifest 1"
_LIMIT = 64 * 1024 * 1024  # 0.34.0's sdist sources and tests: 5,790 files, a manifest of about 0.8 MB


class Mismatch(Exception):
    """The folder is not what the manifest lists; the message names the first difference."""


def write_manifest(folder: Path, key: bytes, name: str) -> None:
    """Sign what `folder` holds now for the folder `name` it is about to become (called on the staging
    folder, which no one else can write)."""
    folders, files = _walk(folder)
    listed = {relative: _describe(path, info) for relative, (path, info) in files.items()}
    _store(folder, key, name, sorted(folders), listed)


def check_manifest(folder: Path, key: bytes) -> None:
    """Raise Mismatch unless `folder` holds exactly what its signed manifest lists."""
    folders_listed, files_listed = _load(folder, key)
    folders, files = _walk(folder)
    extra = sorted((set(folders) - set(folders_listed)) | (set(files) - set(files_listed)))
    if extra:
        raise Mismatch(f"{extra[0]} was added")
    missing = sorted(set(files_listed) - set(files))
    if missing:
        raise Mismatch(f"{missing[0]} is missing")
    moved = False
    for relative, (path, info) in files.items():
        size, digest, inode, changed = files_listed[relative]
        if (info.st_size, info.st_ino, info.st_ctime_ns) == (size, inode, changed):
            continue  # untouched since it was hashed and signed
        if info.st_size != size or _digest(path) != digest:
            raise Mismatch(f"{relative} was changed")
        moved = True
    if moved:  # the same bytes under new inodes (a restored copy): sign what is there now, where it can
        try:
            _store(
                folder,
                key,
                folder.name,
                folders_listed,
                {rel: _describe(path, info) for rel, (path, info) in files.items()},
            )
        except OSError:
            pass  # a read-only cache: checked by digest again next time


def _walk(folder: Path) -> tuple[list[str], dict[str, tuple[str, os.stat_result]]]:
    """Every folder and regular file below `folder` (relative, `/`-separated), the manifest aside;
    anything else (a link, a FIFO, …) is a Mismatch."""
    folders: list[str] = []
    files: dict[str, tuple[str, os.stat_result]] = {}
    pending = [(os.fspath(folder), "")]
    while pending:
        path, relative = pending.pop()
        with os.scandir(path) as entries:
            for entry in entries:
                name = f"{relative}{entry.name}"
                if name == MANIFEST:
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    folders.append(name)
                    pending.append((entry.path, name + "/"))
                elif stat.S_ISREG(info.st_mode):
                    files[name] = (entry.path, info)
                else:
                    raise Mismatch(f"{name} is not a regular file or folder")
    return folders, files


def _describe(path: str, info: os.stat_result) -> list:
    return [info.st_size, _digest(path), info.st_ino, info.st_ctime_ns]


def _digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | getattr(os, "O_NOFOLLOW", 0))) as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _store(folder: Path, key: bytes, name: str, folders: list[str], files: dict[str, list]) -> None:
    body = json.dumps({"folders": folders, "files": files}, sort_keys=True, separators=(",", ":")).encode()
    signature = sign(key, _CONTEXT, name.encode(), body)
    temporary = folder / f"{MANIFEST}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(temporary, flags, 0o600), "wb") as stream:
        stream.write(signature.encode() + b"\n" + body)
    os.replace(temporary, folder / MANIFEST)


def _load(folder: Path, key: bytes) -> tuple[list[str], dict[str, list]]:
    try:
        data = read_regular_file(folder / MANIFEST, _LIMIT, follow_symlinks=False)
    except FileNotFoundError:
        raise Mismatch(f"no {MANIFEST}: kept by an earlier kvlint, or not made by kvlint") from None
    except OSError as error:
        raise Mismatch(f"{MANIFEST} cannot be read ({error.strerror or type(error).__name__})") from None
    signature, _, body = data.partition(b"\n")
    if not verify(key, signature, _CONTEXT, folder.name.encode(), body):
        raise Mismatch(f"{MANIFEST} is not signed with this user's cache key")
    try:
        manifest = json.loads(body)
        return list(manifest["folders"]), dict(manifest["files"])
    except (ValueError, KeyError, TypeError):  # signed by this user's kvlint yet unreadable: a disk error
        raise Mismatch(f"{MANIFEST} is damaged") from None
