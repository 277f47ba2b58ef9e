"""What kvlint's caches are built from: where they live, a file's stat and content digest, stable keys, and
records — signed JSON data, written atomically, read back as "nothing" unless kvlint itself wrote them.

Shared by the result cache (scan/result_cache.py) and the project index cache: neither knows the other.

A record file is one header line, `kvlint-cache <FORMAT> <signature>`, then the JSON document. The signature
(scan/signing.py: HMAC with this user's secret key) covers the record's kind ("manifest", "snapshot",
"index"), its key (the configuration it belongs to) and the document, so a record can be neither forged nor
moved to another kind or configuration. It is read only as a regular file (no link followed, no FIFO or
device opened, nothing waited for) of at most MAX_RECORD_BYTES; whatever fails — missing, over the size,
unsigned, signed with another key, not JSON — is "not cached", never an error and never "clean".
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import kvlint
import kvlint.rules
from kvlint.filesystem import read_regular_file, walk_python
from kvlint.scan.ownership import make_folders
from kvlint.scan.signing import cache_key, signed_document, signed_record

# A file modified this close to (or after) the scan's start may change again within the same
# timestamp tick without its stat changing ("racily clean" in git's words): its stat is not trusted.
RACY_WINDOW_NS = 2_000_000_000
# Parts of kvlint that never change a file's result: editing them keeps the cache.
_NOT_IN_RESULTS = ("verify", "reporters", "commands", "cli.py", "__main__.py")
# A manifest holds about 250 bytes per file scanned: this is room for a tree of several hundred thousand.
MAX_RECORD_BYTES = 256 * 1024 * 1024


def cache_root() -> Path:
    """Where kvlint keeps fetched releases and scan results: $KVLINT_CACHE_DIR, else the XDG cache folder."""
    configured = os.environ.get("KVLINT_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvlint"


class FileStat(NamedTuple):
    """What must be unchanged for a file's content to be assumed unchanged without reading it."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileStat:
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stable_repr(value: object) -> str:
    """A repr that is the same in every process: sets and dicts sorted, dataclasses field by field.

    `repr()` of a set depends on the process's string hash seed; two runs must compute one key.
    """
    if isinstance(value, (str, bytes, int, float, bool, type(None))):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = ", ".join(f"{f.name}={stable_repr(getattr(value, f.name))}" for f in dataclasses.fields(value))
        return f"{type(value).__module__}.{type(value).__qualname__}({fields})"
    if isinstance(value, dict):
        items = sorted((stable_repr(k), stable_repr(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(stable_repr(v) for v in value)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(stable_repr(v) for v in value) + "]"
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    text = repr(value)
    if " at 0x" in text:  # an identity-based repr would make every key unique: the cache would never hit
        return f"{type(value).__module__}.{type(value).__qualname__}({stable_repr(vars(value)) if hasattr(value, '__dict__') else text})"
    return text


@lru_cache(maxsize=1)
def own_source_digest() -> str:
    """Hash of kvlint's own sources, so an edited rule invalidates results even without a version bump."""
    digest = hashlib.sha256()
    package = Path(kvlint.__file__).parent
    folders = [package, *(Path(p) for p in kvlint.rules.__path__)]
    for folder in folders:
        base = str(folder)

        def outside_results(path: str, base: str = base, skipping: bool = folder == package) -> bool:
            return skipping and path[len(base) + 1 :] in _NOT_IN_RESULTS  # a top-level name of the package

        for path, _ in walk_python(base, outside_results, links_may_leave=True):
            if outside_results(path):
                continue
            try:
                digest.update(Path(path).as_posix().encode() + b"\0" + Path(path).read_bytes() + b"\0")
            except OSError:
                digest.update(Path(path).as_posix().encode() + b"\0unreadable\0")
    return digest.hexdigest()


def trusted_stat(stat: FileStat | None, started_ns: int) -> FileStat | None:
    """The stat to record for a file read at a scan that started at `started_ns`, or None if it is racy."""
    if stat is not None and stat.mtime_ns >= started_ns - RACY_WINDOW_NS:
        return None  # may still change within the same timestamp tick: check its content next time
    return stat


def load_record(path: Path, kind: str, key: str) -> object | None:
    """The JSON value `save_record` wrote for this kind and key, or None: missing, not a regular file, over
    MAX_RECORD_BYTES, damaged, or not signed by this user's kvlint for this kind and key."""
    secret = cache_key()
    if secret is None:
        return None
    try:
        data = read_regular_file(path, MAX_RECORD_BYTES, follow_symlinks=False)
    except OSError:
        return None
    document = signed_document(secret, kind, key, data)
    if document is None:
        return None
    try:
        return json.loads(document)
    except (ValueError, RecursionError):  # signed by us yet not JSON: a bug or a disk error, never a result
        return None


def save_record(path: Path, kind: str, key: str, value: object) -> bool:
    """Write atomically (readers see the old file or the new one, never a mix), signed. False when it cannot."""
    secret = cache_key()
    if secret is None:
        return False
    try:
        # ASCII with \u escapes: a path that is not UTF-8 (a surrogate escape) round-trips too.
        document = json.dumps(value, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        return False  # something that is not data: not cached
    try:
        make_folders(path.parent)  # never group-writable, whatever the umask: releases/ beside it must not be
        import tempfile  # only when something is written

        handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(signed_record(secret, kind, key, document))
            os.replace(temporary, path)  # a link or FIFO planted at `path` is replaced, never written through
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError:
        return False  # a read-only or full disk costs speed, never the scan
    return True
