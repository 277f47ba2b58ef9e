"""The per-file result cache: a warm scan of an unchanged tree reads no source file.

One manifest per configuration (kvlint's own code, the rule settings, the project index) maps each
scanned file to the stat it had, the hash of its content and its FileResult. A file whose stat is
unchanged is answered from the manifest without being read; one whose stat changed is read and hashed,
and its result is reused only when the content hash is the same. Everything that goes into a result
is in the key, so a cached scan reports exactly what an uncached one would.

The cache is an optimisation only: an unreadable, corrupt or foreign manifest is treated as empty, and a
manifest that cannot be written is silently skipped.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import os
import pickle
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from kvlint import __version__
from kvlint.engine.prefilter import Triggers
from kvlint.types import FileResult

# Bumped when the manifest layout changes: old manifests are then simply not found.
FORMAT = 3
# A file modified this close to (or after) the scan's start may change again within the same
# timestamp tick without its stat changing ("racily clean" in git's words): its stat is not trusted.
RACY_WINDOW_NS = 2_000_000_000
# Parts of kvlint that never change a file's result: editing them keeps the cache.
_NOT_IN_RESULTS = ("verify", "reporters", "commands", "cli.py", "__main__.py")
# Manifests of configurations not used for this long are deleted when another one is written.
MAX_AGE_S = 30 * 24 * 3600


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
    def of(cls, stat: os.stat_result) -> "FileStat":
        return cls(stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


# A manifest entry, a plain tuple because a warm scan unpickles thousands of them:
# (stat as a tuple, or None when it is not to be trusted and the content hash decides; content digest;
#  scope: the module path and the digest of what the project index says about that module; the codes of
#  the rules run on the file (after per-file ignores); the result packed).
Entry = tuple


def _pack(result: FileResult) -> FileResult | None:
    # Most files are skipped by every rule's prefilter: their result is stored as None.
    return None if result == FileResult(path=result.path, skipped_by_prefilter=True) else result


def _unpack(packed: FileResult | None, display: str) -> FileResult:
    return FileResult(path=display, skipped_by_prefilter=True) if packed is None else packed


def _is_triggers(value: object) -> bool:
    return type(value) is tuple and all(type(c) is tuple and all(type(w) is str for w in c) for c in value)


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def configuration_key(project_digest: str, settings: dict, codes: tuple[str, ...]) -> str:
    """A hash of everything besides a file's own content, path and rules that its result depends on."""
    parts = (FORMAT, __version__, own_source_digest(), sys.version_info[:2], codes, stable_repr(settings), project_digest)
    return hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()


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
    import kvlint

    digest = hashlib.sha256()
    package = Path(kvlint.__file__).parent
    folders = [package]
    try:
        import kvlint.rules as rules

        folders.extend(Path(p) for p in rules.__path__)
    except ImportError:  # pragma: no cover - rules always ship with kvlint
        pass
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            if folder == package and path.relative_to(package).parts[0] in _NOT_IN_RESULTS:
                continue
            try:
                digest.update(path.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
            except OSError:
                digest.update(path.as_posix().encode() + b"\0unreadable\0")
    return digest.hexdigest()


def trusted_stat(stat: FileStat | None, started_ns: int) -> FileStat | None:
    """The stat to record for a file read at a scan that started at `started_ns`, or None if it is racy."""
    if stat is not None and stat.mtime_ns >= started_ns - RACY_WINDOW_NS:
        return None  # may still change within the same timestamp tick: check its content next time
    return stat


def load_pickle(path: Path) -> object | None:
    """What `save_pickle` wrote, or None when it is missing, truncated, corrupt or from another Python."""
    try:
        with open(path, "rb") as stream:
            return pickle.load(stream)
    except Exception:  # an unreadable cache is an empty cache, never an error
        return None


def save_pickle(path: Path, value: object) -> bool:
    """Write atomically: readers see the old file or the new one, never a mix. False when it cannot."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # only when something is written

        handle, temporary = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(handle, "wb") as stream:
                pickle.dump(value, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return False  # a read-only or full disk, or something unpicklable, costs speed, never the scan
    return True


class ResultCache:
    """The manifest of one configuration, loaded once per scan and saved once at its end."""

    def __init__(self, folder: Path, key: str):
        self.folder = folder
        self.path = folder / f"manifest-{key}.pickle"
        self.started_ns = time.time_ns()
        self.entries: dict[str, Entry] = {}
        # Each rule's TRIGGERS, as the rules of this configuration (same kvlint sources) declared them.
        self.triggers: dict[str, Triggers] | None = None
        self._load()
        self.changed = False

    def _load(self) -> None:
        loaded = load_pickle(self.path)
        if not isinstance(loaded, dict) or loaded.get("format") != FORMAT:
            return
        entries, triggers = loaded.get("entries"), loaded.get("triggers")
        if isinstance(entries, dict):
            self.entries = entries
        if isinstance(triggers, dict) and all(_is_triggers(t) for t in triggers.values()):
            self.triggers = triggers

    def _entry(self, display: str, scope: object, codes: tuple[str, ...]) -> Entry | None:
        entry = self.entries.get(display)
        if type(entry) is not tuple or len(entry) != 5 or entry[2] != scope or entry[3] != codes:
            return None
        if entry[4] is not None and not isinstance(entry[4], FileResult):
            return None
        return entry

    def fresh(self, display: str, stat: FileStat, scope: object, codes: tuple[str, ...]) -> FileResult | None:
        """The cached result when the file's stat is exactly what it was: no need to read it."""
        entry = self._entry(display, scope, codes)
        if entry is None or entry[0] is None or entry[0] != stat:
            return None
        return _unpack(entry[4], display)

    def matching(self, display: str, digest: str, stat: FileStat | None, scope: object, codes: tuple[str, ...]) -> FileResult | None:
        """The cached result when the file's content is the same (its stat changed, e.g. `touch`)."""
        entry = self._entry(display, scope, codes)
        if entry is None or entry[1] != digest:
            return None
        result = _unpack(entry[4], display)
        self.store(display, stat, digest, scope, codes, result)
        return result

    def store(self, display: str, stat: FileStat | None, digest: str, scope: object, codes: tuple[str, ...], result: FileResult) -> None:
        trusted = trusted_stat(stat, self.started_ns)
        entry = (None if trusted is None else tuple(trusted), digest, scope, codes, _pack(result))
        if self.entries.get(display) != entry:
            self.entries[display] = entry
            self.changed = True

    def remember_triggers(self, triggers: dict[str, Triggers]) -> None:
        if self.triggers != triggers:
            self.triggers = triggers
            self.changed = True

    def save(self) -> None:
        if self.changed and save_pickle(self.path, {"format": FORMAT, "entries": self.entries, "triggers": self.triggers}):
            self.changed = False
            self._prune()

    def _prune(self) -> None:
        cutoff = time.time() - MAX_AGE_S
        try:
            with os.scandir(self.folder) as listing:
                for item in listing:
                    if item.name.startswith(("manifest-", ".manifest-", "project-", ".project-")) and item.stat().st_mtime < cutoff:
                        os.unlink(item.path)
        except OSError:
            pass
