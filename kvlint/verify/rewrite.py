"""A scratch copy of a vLLM tree with `kvlint fix` applied: the "after" of the upstream tests.

The copy holds the tree's `vllm/` package: Python files copied (they are what the fix rewrites), every
other file (compiled extensions, data) linked, so that copying an installed vLLM does not copy its
binaries. The fix is `kvlint fix`'s own: the same scan, the same per-file fixer (fixing/fix_file.py).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kvlint.errors import VerifyError
from kvlint.fixing.fix_file import fix_scanned
from kvlint.scan.config import Config
from kvlint.scan.runner import scan


@dataclass(frozen=True)
class Rewritten:
    root: Path  # the copy: the folder holding its vllm/
    changed: tuple[str, ...]  # files the fix rewrote, relative to the root ("vllm/…/x.py")
    fixed_findings: int  # findings whose fixes were applied
    not_fixed: tuple[tuple[str, str], ...]  # (file, why kvlint fix left it unchanged)


def _copy_python_link_the_rest(source: str, destination: str) -> None:
    if source.endswith(".py"):
        shutil.copy2(source, destination)
    else:
        os.symlink(os.path.abspath(source), destination)


def rewrite_copy(
    tree: Path, destination: Path, config: Config, jobs: int | None = None, unsafe: bool = False
) -> Rewritten:
    """Copy tree/vllm to destination/vllm and apply kvlint's safe fixes there (and the unsafe ones with
    `unsafe`, as `kvlint fix --unsafe-fixes`); `tree` is never written."""
    try:
        shutil.copytree(
            tree / "vllm",
            destination / "vllm",
            copy_function=_copy_python_link_the_rest,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    except (OSError, shutil.Error) as error:
        raise VerifyError(f"cannot copy {tree / 'vllm'} to rewrite it: {error}") from None
    result = scan([destination / "vllm"], config, None, [], jobs, cache_dir=None)
    changed: list[str] = []
    applied = 0
    not_fixed: list[tuple[str, str]] = []
    for attempt in fix_scanned(result, config, unsafe=unsafe, write=True):
        relative = Path(attempt.path).relative_to(destination).as_posix()
        if attempt.fixed is None:
            not_fixed.append((relative, attempt.error))
        elif attempt.fixed.applied:
            changed.append(relative)
            applied += len(attempt.fixed.applied)
    return Rewritten(destination, tuple(changed), applied, tuple(not_fixed))
