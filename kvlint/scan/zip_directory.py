"""Count a zip's entries before zipfile reads its directory: zipfile reads the whole central directory into
memory and makes an object of every entry (about 400 bytes each: 400 MB for a million entries of a few
bytes) before anyone can count them.

The end-of-central-directory record is found with zipfile's own reader (`_EndRecData`, the record zipfile
goes on to use, the Zip64 one included), so both agree on where the directory is and how long; then the
entry count it claims, the directory's size and the entries it really holds (walked header by header, as
zipfile walks them, without keeping any) are checked against the limits. What zipfile then reads is at most
`Limits.directory_bytes`, and at most `Limits.members` entries.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from kvlint.errors import ArchiveError

if TYPE_CHECKING:
    from kvlint.scan.archives import Limits

_HEADER = struct.Struct(zipfile.structCentralDir)
_NAME, _EXTRA, _COMMENT = zipfile._CD_FILENAME_LENGTH, zipfile._CD_EXTRA_FIELD_LENGTH, zipfile._CD_COMMENT_LENGTH
_CHUNK = 1 << 20


def check_zip_directory(source: BinaryIO, archive: Path, limits: Limits) -> None:
    """ArchiveError when the zip's directory claims or holds more than `limits.members` entries, or is over
    `limits.directory_bytes`; an archive zipfile cannot read at all is left to zipfile to say so."""
    try:
        end = zipfile._EndRecData(source)
    except OSError:
        return
    if not end:
        return
    claimed, size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if claimed > limits.members:
        raise ArchiveError(
            f"{archive.name}: refused, it holds more than {limits.members:,} members (its directory lists {claimed:,})"
        )
    if size > limits.directory_bytes:
        mb = limits.directory_bytes / 1e6
        raise ArchiveError(f"{archive.name}: refused, its directory is {size:,} bytes (over {mb:.0f} MB)")
    # Where zipfile starts reading it: data before the archive ("concat") shifts every offset.
    start = end[zipfile._ECD_LOCATION] - size
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:
        start -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
    if start < 0:
        return  # zipfile refuses it: "Bad offset for central directory"
    source.seek(start)
    if _entries(source, size, limits.members) > limits.members:
        raise ArchiveError(f"{archive.name}: refused, it holds more than {limits.members:,} members")
    source.seek(0)


def _entries(source: BinaryIO, size: int, most: int) -> int:
    """How many entries zipfile would make of the `size` bytes of directory at the stream's position; counting
    stops at `most` + 1. Only a chunk is held at a time."""
    buffer, position, total, count = b"", 0, 0, 0
    read = 0
    while total < size and count <= most:
        while len(buffer) - position < _HEADER.size and read < size:
            chunk = source.read(min(_CHUNK, size - read))
            if not chunk:
                return count  # truncated: zipfile says so
            read += len(chunk)
            buffer, position = buffer[position:] + chunk, 0
        if len(buffer) - position < _HEADER.size:
            return count
        header = _HEADER.unpack_from(buffer, position)
        if header[0] != zipfile.stringCentralDir:
            return count  # zipfile says "Bad magic number"
        count += 1
        length = _HEADER.size + header[_NAME] + header[_EXTRA] + header[_COMMENT]
        total += length
        skip = length - (len(buffer) - position)
        if skip > 0:  # the name, extra field and comment run past what is buffered
            source.seek(skip, 1)
            read += skip
            buffer, position = b"", 0
        else:
            position += length
    return count
