"""Fix one file: lint a fresh snapshot of it, apply its fixes, check the result is still valid Python,
and write it atomically (or only give the patch).

The file is linted as a scan would lint it (scan/jobs.py), so the fixes are those of the findings the
user saw. What is left after fixing is fixing/after.py's to say: a fix can change the cross-file
findings of other functions and files too.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvlint.engine.source import decode_source
from kvlint.errors import FixError, UnreadableSource
from kvlint.fixing.apply import fixable
from kvlint.fixing.fix_cache import FixCache, FixOutcome, entry_key
from kvlint.fixing.syntax_gate import oldest_python_at
from kvlint.fixing.write import encode_like, read_original, write_atomically
from kvlint.scan.config import Config
from kvlint.scan.jobs import WorkerState, job_for_file, lint_unfiltered, module_path_of
from kvlint.scan.runner import ScanResult
from kvlint.scan.storage import content_digest
from kvlint.types import Finding


@dataclass(frozen=True)
class FixAttempt:
    path: str  # as the scan showed it
    fixed: FileFix | None  # None when the file was left untouched
    error: str = ""  # why it was left untouched


def fix_scanned(
    result: ScanResult, config: Config, unsafe: bool, write: bool, patch_name: Callable[[str], str] | None = None
) -> Iterator[FixAttempt]:
    """Fix every file of a scan that has something to fix, one after the other, in path order. With the
    scan's cache, a file fixed before from the same bytes under the same configuration is answered from
    fixing/fix_cache.py (and written, without --diff, as it would have been)."""
    fixer = _Fixer(result, config, unsafe)
    by_file: dict[str, list[Finding]] = {}
    for finding in result.findings:
        by_file.setdefault(finding.path, []).append(finding)
    try:
        for path, findings in sorted(by_file.items()):
            if not any(fixable(f, unsafe) for f in findings):
                continue
            name = patch_name(path) if patch_name is not None else path
            try:
                fixed = fixer.fix(Path(path), path, write, name)
            except (FixError, UnreadableSource, OSError) as error:
                yield FixAttempt(path, None, str(error))
                continue
            yield FixAttempt(path, fixed)
    finally:
        fixer.save()


@dataclass(frozen=True)
class FileFix:
    applied: tuple[Finding, ...]  # the findings whose fixes were applied; empty when none could be
    diff: bytes  # the change as a patch `git apply` takes, b"" when nothing changed
    fixed: bytes = b""  # the file's new bytes, b"" when nothing changed
    original: bytes = b""  # the bytes it was fixed from (on disk still, with --diff)


class _Fixer:
    """The files of one scan fixed one by one; the project index is loaded only when a file must really be
    linted (a fix answered from the cache needs only the index's digests)."""

    def __init__(self, result: ScanResult, config: Config, unsafe: bool):
        self.result, self.config, self.unsafe = result, config, unsafe
        self.oldest = oldest_python_at(config.source)
        folder, key = result.cache_dir, result.cache_key
        self.cache = FixCache(folder, key) if folder is not None and key is not None and not result.also else None
        self._state: WorkerState | None = None

    @property
    def state(self) -> WorkerState:
        if self._state is None:
            self._state = WorkerState(self.result.project, self.config.rule_settings())
        return self._state

    def fix(self, path: Path, display: str, write: bool, name: str) -> FileFix:
        original = read_original(path)
        root = self.result.index.root
        if self.cache is None:
            outcome = self._compute(path, display, original, name)
        else:
            module_path = module_path_of(path, root)
            job = job_for_file(path, display, self.result.codes, self.config, None, original, module_path)
            key = entry_key(
                display,
                module_path,
                self.result.index.digests.of_module(module_path),
                content_digest(original),
                job.cache_codes,
                self.unsafe,
                name,
                self.oldest,
            )
            outcome = self.cache.get(key, display)
            if outcome is None:
                outcome = self._compute(path, display, original, name)
                self.cache.put(key, display, outcome)
        if outcome.error:
            raise FixError(outcome.error)
        if not outcome.applied:
            return FileFix((), b"")
        if write:
            write_atomically(path, original, outcome.fixed, root)
        return FileFix(outcome.applied, outcome.diff, outcome.fixed, original)

    def _compute(self, path: Path, display: str, original: bytes, name: str) -> FixOutcome:
        try:
            return compute_fix(path, display, self.result.codes, self.state, self.config, self.unsafe, original, name)
        except (FixError, UnreadableSource) as error:
            return FixOutcome(error=str(error))

    def save(self) -> None:
        if self.cache is not None:
            self.cache.save()


def fix_file(
    path: Path,
    display: str,
    codes: tuple[str, ...],
    state: WorkerState,
    config: Config,
    unsafe: bool,
    write: bool,
    patch_name: str | None = None,
    root: str | None = None,
) -> FileFix:
    """Fix `path` (shown as `display`) with the rules `codes` selects; the patch names it `patch_name`
    (default: `display`); it is written only inside `root` (see write.open_folder). Raises FixError, UnreadableSource or OSError when the file is left untouched."""
    original = read_original(path)
    outcome = compute_fix(path, display, codes, state, config, unsafe, original, patch_name or display)
    if not outcome.applied:
        return FileFix((), b"")
    if write:
        write_atomically(path, original, outcome.fixed, root)
    return FileFix(outcome.applied, outcome.diff, outcome.fixed, original)


def compute_fix(
    path: Path,
    display: str,
    codes: tuple[str, ...],
    state: WorkerState,
    config: Config,
    unsafe: bool,
    original: bytes,
    patch_name: str,
) -> FixOutcome:
    """What fixing `original` (the bytes of `path`) gives: a function of those bytes, the rules, the index and
    the configuration alone, so fixing/fix_cache.py may keep it. Raises FixError or UnreadableSource."""
    from kvlint.fixing.apply import apply_fixes, check_compiles

    decoded = decode_source(original)
    current = lint_unfiltered(state, job_for_file(path, display, codes, config, state.project, original))
    outcome = apply_fixes(decoded.text, list(current.findings), unsafe)
    if not outcome.applied:
        return FixOutcome()
    # Valid for the oldest Python the project supports (its requires-python), as `review`'s suggestions are.
    check_compiles(outcome.text, str(path), original=decoded.text, oldest=oldest_python_at(config.source))
    fixed = encode_like(outcome.text, decoded.encoding)
    return FixOutcome(outcome.applied, fixed, unified_patch(original, fixed, patch_name))


def unified_patch(original: bytes, fixed: bytes, name: str) -> bytes:
    """A unified diff of one file as `git diff` writes it: `a/NAME` and `b/NAME`, the file's own bytes
    (encoding, BOM and line endings kept: the patch applies to the file as it is), lines split at
    "\\n" only, and git's marker after a last line without a newline."""
    header = name.replace(os.sep, "/")
    lines = difflib.diff_bytes(
        difflib.unified_diff,
        _lines(original),
        _lines(fixed),
        fromfile=os.fsencode(f"a/{header}"),
        tofile=os.fsencode(f"b/{header}"),
    )
    out = bytearray()
    for line in lines:
        out += line
        if not line.endswith(b"\n"):
            out += b"\n\\ No newline at end of file\n"
    return bytes(out)


def _lines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    return [part + b"\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
