"""The per-file result cache: a warm scan of an unchanged tree reads no source file.

One manifest per configuration (kvlint's own code, the rule settings, the project index) maps each
scanned file to the stat it had, the hash of its content and its FileResult. A file whose stat is
unchanged is answered from the manifest without being read; one whose stat changed is read and hashed,
and its result is reused only when the content hash is the same. Everything that goes into a result
is in the key, so a cached scan reports exactly what an uncached one would.

The cache is an optimisation only, and data only: the manifest is signed JSON (scan/storage.py records),
each entry is checked field by field when it is looked up and its result rebuilt by scan/cache_codec.py.
A manifest kvlint did not write itself (planted, forged, from another user or configuration), a damaged
one and an entry of the wrong shape are "not cached": the file is read and linted, never taken as clean.
A manifest that cannot be written is silently skipped.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

from kvlint import __version__
from kvlint.engine.prefilter import Triggers
from kvlint.scan.cache_codec import CodecError, result_from_data, result_to_data
from kvlint.scan.storage import (
    FileStat,
    load_record,
    own_source_digest,
    save_record,
    stable_repr,
    trusted_stat,
)
from kvlint.types import FileResult

# Bumped when the manifest layout changes: old manifests are then simply not found.
FORMAT = 4
KIND = "manifest"
# Manifests of configurations not used for this long are deleted when another one is written.
MAX_AGE_S = 30 * 24 * 3600


# A manifest entry, a JSON list: [stat as a list, or null when it is not to be trusted and the content hash
# decides; content digest; scope: [the module path, the digest of what the project index says about that
# module] or null; the codes of the rules run on the file (after per-file ignores), as a position in the
# manifest's table of code lists (one list of a dozen codes per file made the manifest slow to read); the
# result as data, or null for a file every rule's prefilter skipped (most files)].
Entry = list


def _pack(result: FileResult) -> dict | None:
    if result == FileResult(path=result.path, skipped_by_prefilter=True):
        return None
    return result_to_data(result)


def _unpack(packed: object, display: str) -> FileResult | None:
    """The entry's result; None when it is not a result for this file."""
    if packed is None:
        return FileResult(path=display, skipped_by_prefilter=True)
    try:
        result = result_from_data(packed)
    except CodecError:
        return None
    if result.path != display or any(finding.path != display for finding in result.findings):
        return None
    return result


def _triggers(value: object) -> Triggers | None:
    """A rule's TRIGGERS as the manifest holds them (lists of lists of words), or None when damaged."""
    if type(value) is not list or not all(type(c) is list and all(type(w) is str for w in c) for c in value):
        return None
    return tuple(tuple(clause) for clause in value)


def _code_table(value: object) -> bool:
    return type(value) is list and all(type(c) is list and all(type(code) is str for code in c) for c in value)


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
        self.key = key
        self.path = folder / f"manifest-{key}.json"
        self.started_ns = time.time_ns()
        self.entries: dict[str, Entry] = {}
        self.code_lists: list[list[str]] = []  # the table entries point into
        self._code_ids: dict[tuple[str, ...], int] = {}
        # Each rule's TRIGGERS, as the rules of this configuration (same kvlint sources) declared them.
        self.triggers: dict[str, Triggers] | None = None
        self._load()
        self.changed = False

    def _load(self) -> None:
        loaded = load_record(self.path, KIND, self.key)
        if type(loaded) is not dict or loaded.get("format") != FORMAT:
            return
        entries, code_lists, triggers = loaded.get("entries"), loaded.get("codes"), loaded.get("triggers")
        if type(entries) is dict and _code_table(code_lists):
            self.entries = entries  # each entry is checked when it is looked up: most never are
            self.code_lists = code_lists
            self._code_ids = {tuple(codes): position for position, codes in enumerate(code_lists)}
        if type(triggers) is dict:
            checked = {code: _triggers(value) for code, value in triggers.items()}
            if all(value is not None for value in checked.values()):
                self.triggers = checked

    def _entry(self, display: str, scope: tuple[str, str] | None, codes: tuple[str, ...]) -> Entry | None:
        entry = self.entries.get(display)
        # The shape only: a stat or digest of another type compares unequal below, so it is never a hit.
        if type(entry) is not list or len(entry) != 5 or type(entry[3]) is not int:
            return None
        if entry[2] != (None if scope is None else list(scope)) or entry[3] != self._code_ids.get(codes, -1):
            return None
        return entry

    def fresh(
        self, display: str, stat: FileStat, scope: tuple[str, str] | None, codes: tuple[str, ...]
    ) -> FileResult | None:
        """The cached result when the file's stat is exactly what it was: no need to read it."""
        entry = self._entry(display, scope, codes)
        if entry is None or type(entry[0]) is not list or tuple(entry[0]) != stat:
            return None
        return _unpack(entry[4], display)

    def matching(
        self, display: str, digest: str, stat: FileStat | None, scope: tuple[str, str] | None, codes: tuple[str, ...]
    ) -> FileResult | None:
        """The cached result when the file's content is the same (its stat changed, e.g. `touch`)."""
        entry = self._entry(display, scope, codes)
        if entry is None or entry[1] != digest:
            return None
        result = _unpack(entry[4], display)
        if result is not None:
            self.store(display, stat, digest, scope, codes, result)
        return result

    def store(
        self,
        display: str,
        stat: FileStat | None,
        digest: str,
        scope: tuple[str, str] | None,
        codes: tuple[str, ...],
        result: FileResult,
    ) -> None:
        trusted = trusted_stat(stat, self.started_ns)
        try:
            packed = _pack(result)
        except CodecError:
            return  # a result the codec cannot write is simply not cached
        entry = [
            None if trusted is None else list(trusted),
            digest,
            None if scope is None else list(scope),
            self._code_id(codes),
            packed,
        ]
        if self.entries.get(display) != entry:
            self.entries[display] = entry
            self.changed = True

    def _code_id(self, codes: tuple[str, ...]) -> int:
        if codes not in self._code_ids:
            self._code_ids[codes] = len(self.code_lists)
            self.code_lists.append(list(codes))
        return self._code_ids[codes]

    def remember_triggers(self, triggers: dict[str, Triggers]) -> None:
        if self.triggers != triggers:
            self.triggers = triggers
            self.changed = True

    def save(self) -> None:
        triggers = None if self.triggers is None else {code: [list(c) for c in t] for code, t in self.triggers.items()}
        if self.changed and save_record(
            self.path,
            KIND,
            self.key,
            {"format": FORMAT, "entries": self.entries, "codes": self.code_lists, "triggers": triggers},
        ):
            self.changed = False
            self._prune()

    def _prune(self) -> None:
        cutoff = time.time() - MAX_AGE_S
        try:
            with os.scandir(self.folder) as listing:
                for item in listing:
                    if (
                        item.name.startswith(("manifest-", ".manifest-", "project-", ".project-", "fixes-", ".fixes-"))
                        and item.stat().st_mtime < cutoff
                    ):
                        os.unlink(item.path)
        except OSError:
            pass
