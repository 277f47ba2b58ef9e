"""What `kvlint fix` computed for a file, kept between runs: a repeated `kvlint fix --diff` answers each file
it would fix from here instead of linting it again, applying its fixes and checking the result compiles.

An entry is keyed, as the result cache's entries are (scan/result_cache.py), on everything the fix of one
file depends on: the scan's configuration key (kvlint's sources and version, the rules run, their settings,
the tree index's shared part), the file's path, module path and its slice of the index, its content digest,
the rules it runs and ignores, `--unsafe-fixes`, the name the patch gives it and the oldest Python the fix
must compile for. What it holds is the outcome: the findings whose fixes were applied, the new bytes and
the patch, or the one-line reason the file was not fixed.

The same rules as the other caches (docs/security.md §3): a signed JSON record (scan/storage.py), read only
as this user's own, each entry checked field by field when it is used and the findings rebuilt by
scan/cache_codec.py; anything else — planted, forged, damaged, another key's — is "not cached" and the file
is fixed again, never taken as it claims.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path

from kvlint.scan.cache_codec import CodecError, result_from_data, result_to_data
from kvlint.scan.storage import load_record, save_record, stable_repr
from kvlint.types import FileResult, Finding

# Bumped when the record's layout changes: older records are then simply not found.
FORMAT = 1
KIND = "fixes"
# The files a repeated fix answers from here are the ones it fixes (a handful); this bounds a record anyway.
MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class FixOutcome:
    """One file's fix as `fix_file` computed it: what was applied, the new bytes and the patch, or why not."""

    applied: tuple[Finding, ...] = ()
    fixed: bytes = b""
    diff: bytes = b""
    error: str = ""  # set: the file is left untouched, and this is why


def entry_key(*parts: object) -> str:
    return hashlib.sha256(stable_repr(parts).encode("utf-8", "backslashreplace")).hexdigest()


class FixCache:
    """The fix outcomes of one scan configuration, loaded once and saved once per run."""

    def __init__(self, folder: Path, scan_key: str):
        self.key = entry_key(FORMAT, KIND, scan_key)
        self.path = folder / f"fixes-{self.key}.json"
        loaded = load_record(self.path, KIND, self.key)
        entries = loaded.get("entries") if type(loaded) is dict and loaded.get("format") == FORMAT else None
        self.entries: dict[str, object] = entries if type(entries) is dict else {}
        self.changed = False

    def get(self, key: str, display: str) -> FixOutcome | None:
        """The outcome kept for `key`, or None when there is none or it is not a fix of `display`."""
        value = self.entries.get(key)
        if type(value) is not dict:
            return None
        if set(value) == {"error"} and type(value["error"]) is str and value["error"]:
            return FixOutcome(error=value["error"])
        if set(value) != {"applied", "fixed", "diff"}:
            return None
        try:
            result = result_from_data(value["applied"])
            fixed, diff = _bytes(value["fixed"]), _bytes(value["diff"])
        except (CodecError, ValueError, TypeError):
            return None
        if result.path != display or any(finding.path != display for finding in result.findings):
            return None
        return FixOutcome(result.findings, fixed, diff)

    def put(self, key: str, display: str, outcome: FixOutcome) -> None:
        if outcome.error:
            value: dict = {"error": outcome.error}
        else:
            try:
                applied = result_to_data(FileResult(path=display, findings=outcome.applied))
            except CodecError:
                return  # what the codec cannot write is simply not kept
            value = {"applied": applied, "fixed": _text(outcome.fixed), "diff": _text(outcome.diff)}
        if self.entries.get(key) != value:
            if len(self.entries) >= MAX_ENTRIES:
                self.entries.clear()  # a record past its bound starts again rather than growing
            self.entries[key] = value
            self.changed = True

    def save(self) -> None:
        if self.changed and save_record(self.path, KIND, self.key, {"format": FORMAT, "entries": self.entries}):
            self.changed = False


def _text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _bytes(value: object) -> bytes:
    if type(value) is not str:
        raise TypeError("not base64 text")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as error:
        raise ValueError(str(error)) from None
