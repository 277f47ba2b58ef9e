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

from kvlint.engine.lint import lint_bytes
from kvlint.engine.source import decode_source
from kvlint.errors import FixError, UnreadableSource
from kvlint.fixing.apply import apply_fixes, check_compiles, fixable
from kvlint.fixing.syntax_gate import oldest_python_at
from kvlint.fixing.write import encode_like, read_original, write_atomically
from kvlint.scan.config import Config
from kvlint.scan.jobs import WorkerState, job_for_file, request_for
from kvlint.scan.runner import ScanResult
from kvlint.types import Finding


@dataclass(frozen=True)
class FixAttempt:
    path: str  # as the scan showed it
    fixed: FileFix | None  # None when the file was left untouched
    error: str = ""  # why it was left untouched


def fix_scanned(
    result: ScanResult, config: Config, unsafe: bool, write: bool, patch_name: Callable[[str], str] | None = None
) -> Iterator[FixAttempt]:
    """Fix every file of a scan that has something to fix, one after the other, in path order."""
    state = WorkerState(result.project, config.rule_settings())
    by_file: dict[str, list[Finding]] = {}
    for finding in result.findings:
        by_file.setdefault(finding.path, []).append(finding)
    for path, findings in sorted(by_file.items()):
        if not any(fixable(f, unsafe) for f in findings):
            continue
        name = patch_name(path) if patch_name is not None else path
        try:
            fixed = fix_file(Path(path), path, result.codes, state, config, unsafe, write, name, result.index.root)
        except (FixError, UnreadableSource, OSError) as error:
            yield FixAttempt(path, None, str(error))
            continue
        yield FixAttempt(path, fixed)


@dataclass(frozen=True)
class FileFix:
    applied: tuple[Finding, ...]  # the findings whose fixes were applied; empty when none could be
    diff: bytes  # the change as a patch `git apply` takes, b"" when nothing changed
    fixed: bytes = b""  # the file's new bytes, b"" when nothing changed
    original: bytes = b""  # the bytes it was fixed from (on disk still, with --diff)


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
    decoded = decode_source(original)
    job = job_for_file(path, display, codes, config, state.project, original)
    request = request_for(job, state)
    current = lint_bytes(request, original)
    outcome = apply_fixes(decoded.text, list(current.findings), unsafe)
    if not outcome.applied:
        return FileFix((), b"")
    # Valid for the oldest Python the project supports (its requires-python), as `review`'s suggestions are.
    check_compiles(outcome.text, str(path), original=decoded.text, oldest=oldest_python_at(config.source))
    fixed = encode_like(outcome.text, decoded.encoding)
    diff = unified_patch(original, fixed, patch_name or display)
    if write:
        write_atomically(path, original, fixed, root)
    return FileFix(outcome.applied, diff, fixed, original)


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
