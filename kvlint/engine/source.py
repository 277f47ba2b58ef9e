"""Turn a file's bytes into text as Python would, or say in one line why it cannot be.

Kept apart from the engine (and libcst) so that a scan answered mostly from the cache can still decode
the one file that changed without loading the parser.
"""

from __future__ import annotations

import tokenize
from dataclasses import dataclass
from io import BytesIO

from kvlint.errors import UnreadableSource
from kvlint.filesystem import MAX_FILE_BYTES  # the one size limit, checked by every reader before it reads

__all__ = ["MAX_FILE_BYTES", "DecodedSource", "decode_source"]


@dataclass(frozen=True)
class DecodedSource:
    text: str
    encoding: str  # as tokenize names it; "utf-8-sig" when the file starts with a BOM


def decode_source(data: bytes) -> DecodedSource:
    if b"\x00" in data:
        raise UnreadableSource("contains NUL bytes (not Python source)")
    try:
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
        return DecodedSource(data.decode(encoding), encoding)
    except (SyntaxError, LookupError) as error:
        try:  # tokenize blames the declaration even when there is none: name the undecodable byte instead
            data.decode("utf-8")
        except UnicodeDecodeError as undecodable:
            raise UnreadableSource(f"cannot decode as utf-8 at byte {undecodable.start}") from None
        raise UnreadableSource(f"bad encoding declaration: {error}") from None
    except UnicodeDecodeError as error:
        raise UnreadableSource(f"cannot decode as {error.encoding} at byte {error.start}") from None
