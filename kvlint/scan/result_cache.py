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

import hashlib
import os
import sys
import time
from pathlib import Path

from kvlint import __version__
from kvlint.engine.prefilter import Triggers
from kvlint.scan.storage import (
    FileStat,
    load_pickle,
    own_source_digest,
    save_pickle,
    stable_repr,
    trusted_stat,
)
from kvlint.types import FileResult

# Bumped when the manifest layout changes: old manifests are then simply not found.
FORMAT = 3
# Manifests of configurations not used for this long are deleted when another one is written.
MAX_AGE_S = 30 * 24 * 3600


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


def configuration_key(project_digest: str, settings: dict, codes: tuple[str, ...]) -> str:
    """A hash of everything besides a file's own content, path and rules that its result depends on."""
    parts = (
        FORMAT,
        __version__,
        own_source_digest(),
        sys.version_info[:2],
        codes,
        stable_repr(settings),
        project_digest,
    )
    return hashlib.sha256(repr(parts).encode("utf-8", "backslashreplace")).hexdigest()


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

    def matching(
        self, display: str, digest: str, stat: FileStat | None, scope: object, codes: tuple[str, ...]
    ) -> FileResult | None:
        """The cached result when the file's content is the same (its stat changed, e.g. `touch`)."""
        entry = self._entry(display, scope, codes)
        if entry is None or entry[1] != digest:
            return None
        result = _unpack(entry[4], display)
        self.store(display, stat, digest, scope, codes, result)
        return result

    def store(
        self,
        display: str,
        stat: FileStat | None,
        digest: str,
        scope: object,
        codes: tuple[str, ...],
        result: FileResult,
    ) -> None:
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
        if self.changed and save_pickle(
            self.path, {"format": FORMAT, "entries": self.entries, "triggers": self.triggers}
        ):
            self.changed = False
            self._prune()

    def _prune(self) -> None:
        cutoff = time.time() - MAX_AGE_S
        try:
            with os.scandir(self.folder) as listing:
                for item in listing:
                    if (
                        item.name.startswith(("manifest-", ".manifest-", "project-", ".project-"))
                        and item.stat().st_mtime < cutoff
                    ):
                        os.unlink(item.path)
        except OSError:
            pass
