"""Fix one file: lint a fresh snapshot of it, apply its fixes, check the result compiles, lint it again,
and write it atomically (or only show the diff).

The file is linted as a scan would lint it (scan/jobs.py), so the fixes are those of the findings the
user saw, and what is left after fixing is what a new `kvlint check` would report.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from kvlint.engine.lint import lint_bytes
from kvlint.engine.source import decode_source
from kvlint.fixing.apply import apply_fixes, check_compiles
from kvlint.fixing.write import encode_like, read_original, write_atomically
from kvlint.scan.config import Config
from kvlint.scan.jobs import WorkerState, job_for_file, request_for
from kvlint.types import Finding


@dataclass(frozen=True)
class FileFix:
    applied: tuple[Finding, ...]  # the findings whose fixes were applied; empty when none could be
    left: tuple[Finding, ...]  # what the fixed file still reports
    diff: str  # unified diff of the change, "" when nothing changed


def fix_file(
    path: Path,
    display: str,
    codes: tuple[str, ...],
    state: WorkerState,
    config: Config,
    unsafe: bool,
    write: bool,
) -> FileFix:
    """Fix `path` (shown as `display`) with the rules `codes` selects. Raises FixError, UnreadableSource
    or OSError when the file is left untouched."""
    original = read_original(path)
    decoded = decode_source(original)
    job = job_for_file(path, display, codes, config, state.project, original)
    request = request_for(job, state)
    current = lint_bytes(request, original)
    outcome = apply_fixes(decoded.text, list(current.findings), unsafe)
    if not outcome.applied:
        return FileFix((), current.findings, "")
    check_compiles(outcome.text, str(path))
    fixed = encode_like(outcome.text, decoded.encoding)
    # Lint the result: what is left is what the user still has to look at (and proves idempotence).
    after = lint_bytes(request, fixed)
    diff = "".join(
        difflib.unified_diff(
            decoded.text.splitlines(keepends=True),
            outcome.text.splitlines(keepends=True),
            fromfile=f"a/{display}",
            tofile=f"b/{display}",
        )
    )
    if write:
        write_atomically(path, original, fixed)
    return FileFix(outcome.applied, after.findings, diff)
