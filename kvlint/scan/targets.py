"""Decide what tree a command scans when the user names no path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kvlint.analysis.tree_root import find_tree_root
from kvlint.errors import TargetError


def default_target(cwd: Path) -> tuple[Path, str]:
    """(path to scan, one line saying which tree it is)."""
    if (cwd / "vllm" / "v1" / "kv_cache_interface.py").is_file() or find_tree_root(cwd) is not None:
        root = find_tree_root(cwd) or cwd
        return root / "vllm", f"kvlint: scanning the vLLM checkout at {root}"
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it
    if spec is not None and spec.submodule_search_locations:
        location = Path(next(iter(spec.submodule_search_locations)))
        return location, f"kvlint: scanning the installed vllm package at {location}"
    raise TargetError(
        "no vLLM tree here: the current folder is not a vLLM checkout and no vllm package is installed; "
        "pass a PATH or --vllm-release VERSION"
    )
