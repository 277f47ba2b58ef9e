"""Take the Python files out of a downloaded release archive (an sdist's .tar.gz or a wheel), nothing else.

The archive comes from the network, so it is read as hostile: a member name that could point outside the
destination (`..`, an absolute path, a backslash, a control character) refuses the whole archive; only
regular files are written (links, devices and the like are skipped: no link is ever created, so none can
be written through); and every size is capped, counted on the bytes actually read rather than on what
the headers claim — one file, all the files kept, how many of them, and for a .tar.gz the decompressed
stream as a whole, so that a small archive cannot unpack to hundreds of megabytes or fill a disk.
"""

from __future__ import annotations

import gzip
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, NamedTuple

from kvlint.errors import ArchiveError

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


class _Member(NamedTuple):
    name: str
    regular: bool
    size: int
    open: Callable[[], BinaryIO]


def extract_python(archive: Path, selections: Mapping[str, Path], limits: Limits = Limits()) -> dict[str, int]:
    """Write each regular `*.py` member whose name starts with a prefix of `selections` (e.g. `vllm-0.29.0/vllm/`)
    below that prefix's destination folder, keeping the rest of its path. Returns how many were written per prefix."""
    written = dict.fromkeys(selections, 0)
    kept_bytes = 0
    members = _zip_members if archive.name.endswith(".whl") else _tar_members
    try:
        for member in members(archive, limits):
            _check_name(archive, member.name)
            prefix = next((p for p in selections if member.name.startswith(p)), None)
            if prefix is None or not member.regular or not member.name.endswith(".py"):
                continue
            if sum(written.values()) >= limits.kept_files:
                raise ArchiveError(f"{archive.name}: more than {limits.kept_files:,} Python files")
            budget = min(limits.member_bytes, limits.kept_bytes - kept_bytes)
            if member.size > budget:
                raise ArchiveError(_over_limit(archive, member.name, limits, kept_bytes))
            target = selections[prefix] / member.name[len(prefix) :]
            target.parent.mkdir(parents=True, exist_ok=True)
            with member.open() as source:
                copied = _copy(source, target, budget)
            if copied > budget:  # the header understated the size
                raise ArchiveError(_over_limit(archive, member.name, limits, kept_bytes))
            kept_bytes += copied
            written[prefix] += 1
    except ArchiveError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError, zipfile.BadZipFile) as error:
        raise ArchiveError(f"{archive.name}: cannot unpack it ({type(error).__name__}: {_one_line(error)})") from None
    return written


def _check_name(archive: Path, name: str) -> None:
    path = PurePosixPath(name)
    unsafe = (
        path.is_absolute()
        or ".." in path.parts
        or "\\" in name  # a separator on Windows
        or (len(name) > 1 and name[1] == ":")  # a Windows drive
        or any(ord(character) < 32 or ord(character) == 127 for character in name)
    )
    if unsafe:
        raise ArchiveError(f"{archive.name}: refused, it holds a member named {name!r}")


def _over_limit(archive: Path, name: str, limits: Limits, kept_bytes: int) -> str:
    if limits.kept_bytes - kept_bytes < limits.member_bytes:
        return f"{archive.name}: refused, its Python files unpack to more than {limits.kept_bytes // MB} MB"
    return f"{archive.name}: refused, {name!r} unpacks to more than {limits.member_bytes // MB} MB"


def _copy(source: BinaryIO, target: Path, budget: int) -> int:
    """Copy at most `budget` + 1 bytes (one more tells that the budget is exceeded); returns the count."""
    copied = 0
    with open(target, "wb") as sink:
        while copied <= budget:
            chunk = source.read(min(_CHUNK, budget + 1 - copied))
            if not chunk:
                break
            copied += len(chunk)
            sink.write(chunk)
    return copied


def _tar_members(archive: Path, limits: Limits) -> Iterator[_Member]:
    # Stream mode ("r|"): one pass, no seeking; the counting reader caps the decompressed stream, which
    # also bounds what tarfile itself reads into memory (long names, pax headers).
    with (
        gzip.open(archive, "rb") as compressed,
        tarfile.open(fileobj=_CountingReader(compressed, limits.stream_bytes, archive), mode="r|") as tar,
    ):
        for info in tar:
            regular = info.type in (tarfile.REGTYPE, tarfile.AREGTYPE)  # not sparse, links, devices, fifos
            yield _Member(info.name, regular, info.size, lambda info=info: tar.extractfile(info))


def _zip_members(archive: Path, limits: Limits) -> Iterator[_Member]:
    with zipfile.ZipFile(archive) as wheel:
        for info in wheel.infolist():
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
