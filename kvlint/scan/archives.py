"""Take the Python files out of a downloaded release archive (an sdist's .tar.gz or a wheel), nothing else.

The archive comes from the network, so it is read as hostile: a member name that could point outside the
destination (`..`, `.` or an empty part as in `a//b`, an absolute path, a backslash, a drive, a control
character) refuses the whole archive; the file written is the destination joined with the name's checked
parts (never the name's text), its folder resolved and checked to lie inside the destination, and it is
created new (O_EXCL, O_NOFOLLOW); only regular files are written (links, devices and the like are skipped:
no link is ever created, so none can be written through); encrypted or oddly compressed members and
archives of too many members are refused; and every size is capped, counted on the bytes actually read rather than on what
the headers claim — one file, all the files kept, how many of them, and for a .tar.gz the decompressed
stream as a whole, so that a small archive cannot unpack to hundreds of megabytes or fill a disk.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from kvlint.errors import ArchiveError
from kvlint.scan.ownership import make_folders
from kvlint.scan.zip_directory import check_zip_directory

MB = 1_000_000
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Caps on what one archive may unpack to. vLLM 0.34.0's sdist: 5,790 .py files kept (vllm/ and
    tests/) of 81 MB in all, the largest 0.35 MB, from a 150 MB tar stream: each cap leaves room to grow."""

    member_bytes: int = 8 * MB
    kept_bytes: int = 160 * MB
    kept_files: int = 50_000
    stream_bytes: int = 1_000 * MB
    members: int = 100_000  # every member, kept or not (0.34.0's sdist: 9,000)
    # A wheel's central directory, which zipfile reads whole and makes an object of each entry from: at 100,000
    # members of ~150-byte names, 20 MB. Checked, with the number of entries, before zipfile reads it.
    directory_bytes: int = 32 * MB


class Written(NamedTuple):
    """One file as extraction wrote it: what was hashed is what was written, from the archive being read."""

    size: int
    sha256: str
    inode: int
    changed_ns: int


class _Member(NamedTuple):
    name: str
    regular: bool
    size: int
    open: Callable[[], BinaryIO]


def extract_python(
    archive: Path,
    selections: Mapping[str, Path],
    limits: Limits = Limits(),
    *,
    source: BinaryIO | None = None,
    record: dict[str, Written] | None = None,
) -> dict[str, int]:
    """Write each regular `*.py` member whose name starts with a prefix of `selections` (e.g. `vllm-0.29.0/vllm/`)
    below that prefix's destination folder, keeping the rest of its path. Returns how many were written per prefix.

    `source`: the archive's open file (the one its digest was checked on), read from its start; else `archive`
    is opened. `record`: filled with each file written (its path → Written)."""
    try:
        if source is not None:
            source.seek(0)
            return _extract(source, archive, selections, limits, record)
        with open(archive, "rb") as opened:
            return _extract(opened, archive, selections, limits, record)
    except ArchiveError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile, NotImplementedError) as error:
        raise ArchiveError(f"{archive.name}: cannot unpack it ({type(error).__name__}: {_one_line(error)})") from None


def _extract(
    source: BinaryIO,
    archive: Path,
    selections: Mapping[str, Path],
    limits: Limits,
    record: dict[str, Written] | None,
) -> dict[str, int]:
    written = dict.fromkeys(selections, 0)
    homes = {prefix: _home(folder) for prefix, folder in selections.items()}
    kept_bytes = 0
    members = _zip_members if archive.name.endswith(".whl") else _tar_members
    for count, member in enumerate(members(source, archive, limits), start=1):
        if count > limits.members:
            raise ArchiveError(f"{archive.name}: refused, it holds more than {limits.members:,} members")
        parts = _checked_parts(archive, member.name)
        prefix = next((p for p in selections if member.name.startswith(p)), None)
        if prefix is None or not member.regular or not member.name.endswith(".py"):
            continue
        if sum(written.values()) >= limits.kept_files:
            raise ArchiveError(f"{archive.name}: more than {limits.kept_files:,} Python files")
        budget = min(limits.member_bytes, limits.kept_bytes - kept_bytes)
        if member.size > budget:
            raise ArchiveError(_over_limit(archive, member.name, limits, kept_bytes))
        target = _target(archive, member.name, homes[prefix], parts[len(prefix.rstrip("/").split("/")) :])
        with member.open() as stream:
            copied = _copy(stream, target, budget, archive)
        if copied.size > budget:  # the header understated the size
            raise ArchiveError(_over_limit(archive, member.name, limits, kept_bytes))
        if record is not None:
            record[os.fspath(target)] = copied
        kept_bytes += copied.size
        written[prefix] += 1
    return written


def _checked_parts(archive: Path, name: str) -> list[str]:
    """The parts of a member's name, split on `/` only; refused unless each is a plain name.
    A folder's trailing `/` is allowed; `a//b`, `./a`, `a/../b`, `/a`, `C:a` and `a\\b` are not."""
    parts = name[:-1].split("/") if name.endswith("/") else name.split("/")
    unsafe = (
        any(part in ("", ".", "..") for part in parts)
        or "\\" in name  # a separator on Windows
        or ":" in parts[0]  # a Windows drive
        or any(ord(character) < 32 or ord(character) == 127 for character in name)
    )
    if unsafe:
        raise ArchiveError(f"{archive.name}: refused, it holds a member named {name!r}")
    return parts


def _home(folder: Path) -> Path:
    make_folders(folder)
    return folder.resolve(strict=True)


def _target(archive: Path, name: str, home: Path, parts: list[str]) -> Path:
    """`home` joined with `parts`, its folders made; refused unless it lies inside `home` once resolved."""
    target = home.joinpath(*parts)
    make_folders(target.parent)
    folder = target.parent.resolve(strict=True)
    if not parts or PurePosixPath(*parts).is_absolute() or not folder.is_relative_to(home):
        raise ArchiveError(f"{archive.name}: refused, member {name!r} would be written outside {home.name}/")
    return folder / parts[-1]


def _over_limit(archive: Path, name: str, limits: Limits, kept_bytes: int) -> str:
    if limits.kept_bytes - kept_bytes < limits.member_bytes:
        return f"{archive.name}: refused, its Python files unpack to more than {limits.kept_bytes // MB} MB"
    return f"{archive.name}: refused, {name!r} unpacks to more than {limits.member_bytes // MB} MB"


def _copy(source: BinaryIO, target: Path, budget: int, archive: Path) -> Written:
    """Copy at most `budget` + 1 bytes (one more tells that the budget is exceeded), hashing them."""
    copied = 0
    digest = hashlib.sha256()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(target, flags, 0o644)
    except FileExistsError:
        raise ArchiveError(f"{archive.name}: refused, it holds {target.name!r} twice") from None
    with os.fdopen(descriptor, "wb") as sink:
        while copied <= budget:
            chunk = source.read(min(_CHUNK, budget + 1 - copied))
            if not chunk:
                break
            copied += len(chunk)
            digest.update(chunk)
            sink.write(chunk)
        sink.flush()
        info = os.fstat(descriptor)
    return Written(copied, digest.hexdigest(), info.st_ino, info.st_ctime_ns)


def _tar_members(source: BinaryIO, archive: Path, limits: Limits) -> Iterator[_Member]:
    # Stream mode ("r|"): one pass, no seeking; the counting reader caps the decompressed stream, which
    # also bounds what tarfile itself reads into memory (long names, pax headers).
    with (
        gzip.GzipFile(fileobj=source, mode="rb") as compressed,
        tarfile.open(fileobj=_CountingReader(compressed, limits.stream_bytes, archive), mode="r|") as tar,
    ):
        for info in tar:
            regular = info.type in (tarfile.REGTYPE, tarfile.AREGTYPE)  # not sparse, links, devices, fifos
            yield _Member(info.name, regular, info.size, lambda info=info: tar.extractfile(info))


def _zip_members(source: BinaryIO, archive: Path, limits: Limits) -> Iterator[_Member]:
    check_zip_directory(source, archive, limits)
    with zipfile.ZipFile(source) as wheel:
        if len(wheel.infolist()) > limits.members:
            raise ArchiveError(f"{archive.name}: refused, it holds more than {limits.members:,} members")
        for info in wheel.infolist():
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{archive.name}: refused, member {info.filename!r} is encrypted")
            mode = info.external_attr >> 16  # the Unix mode when the archive recorded one
            regular = not info.is_dir() and (stat.S_IFMT(mode) == 0 or stat.S_ISREG(mode))
            yield _Member(info.filename, regular, info.file_size, lambda info=info: wheel.open(info))


class _CountingReader:
    """A read-only stream that fails once more than `limit` bytes have been read from it."""

    def __init__(self, stream: BinaryIO, limit: int, archive: Path) -> None:
        self._stream, self._limit, self._archive, self._read = stream, limit, archive, 0

    def read(self, size: int = -1) -> bytes:
        left = self._limit + 1 - self._read  # one byte more than allowed tells that the limit is passed
        data = self._stream.read(min(size, left) if size >= 0 else left)
        self._read += len(data)
        if self._read > self._limit:
            raise ArchiveError(f"{self._archive.name}: refused, it unpacks to more than {self._limit // MB} MB")
        return data


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]
