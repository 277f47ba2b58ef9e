"""Where a vLLM tree starts: the folder that holds its KV cache interface module.

Apart from the tree index on purpose: a warm scan asks this of every path and must not load the analysis.
"""

from __future__ import annotations

from pathlib import Path

from kvlint.analysis.vocabulary import INTERFACE_MODULE
from kvlint.filesystem import probe_file


def find_tree_root(path: Path) -> Path | None:
    """The folder that holds `vllm/v1/kv_cache_interface.py`, looking at `path` and above it."""
    path = path.resolve()
    start = path if path.is_dir() else path.parent
    for candidate in (start, *start.parents):
        if probe_file(candidate / INTERFACE_MODULE):
            return candidate
    return None
