"""Write a fixed file so that nothing is lost: same encoding, a temp file in the same folder, then a rename
that happens only if the file still holds what kvlint read."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from pathlib import Path

from kvlint.errors import FixError

TEMP_SUFFIX = ".kvlint-tmp"
# A live run holds its temp file for the time of one write, fsync and rename; one this old was left by a
# killed run. Age, not a pid, decides: a run in another container or on another NFS client has pids we can't see.
STALE_TEMP_AGE_S = 600


def write_atomically(path: Path, original: bytes, new: bytes) -> None:
    """Replace `path` with `new` only if it still holds `original`; temp file in the same folder, then rename."""
    folder = path.parent
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError as error:
        raise FixError(f"cannot stat: {error.strerror}") from None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as error:
        raise FixError(f"cannot write in {folder}: {error.strerror}; left unchanged") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        try:
            current = path.read_bytes()
        except OSError as error:
            raise FixError(f"cannot re-read before writing: {error.strerror}; left unchanged") from None
        if current != original:
            raise FixError("changed on disk since kvlint read it; left unchanged")
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    remove_stale_temporaries(path)


def remove_stale_temporaries(path: Path) -> None:
    """Delete `path`'s own temp files (`.<name>.<mkstemp chars>.kvlint-tmp`) that a SIGKILLed run left behind.

    Only regular files of exactly that shape, older than STALE_TEMP_AGE_S; best effort, never fails a fix.
    """
    shape = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]+{re.escape(TEMP_SUFFIX)}")
    now = time.time()
    try:
        with os.scandir(path.parent) as listing:
            entries = [e for e in listing if shape.fullmatch(e.name)]
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_AGE_S:
                os.unlink(entry.path)
        except OSError:
            pass


def encode_like(text: str, encoding: str) -> bytes:
    """Encode back exactly as read: same codec, BOM kept (utf-8-sig writes it)."""
    return text.encode(encoding)
