"""The runtime tests' view of the CPU virtualenv with the real vLLM 0.29.0: the recipe and the cached
environment are kvlint's own (kvlint/verify/runtime_env.py, what `kvlint verify --setup` builds), so the
tests and `kvlint verify` share one environment under ~/.cache/kvlint-tests/ (override: KVLINT_TEST_CACHE).

Run as a script to build it and print where it is: `python tests/vllm_runtime.py` (the same as
`kvlint verify --setup`).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from kvlint.verify.runtime_env import (  # noqa: F401 - the names the tests import from here
    INFO_FILE,
    RECIPE_VERSION,
    TORCH_VERSION,
    VLLM_VERSION,
    RuntimeUnavailable,
    VllmRuntime,
    cache_root,
    environment_key,
    vllm_runtime,
)


def _is_compiled(path: str) -> bool:
    if path.endswith((".so", ".pyd")) or ".so." in os.path.basename(path):
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def copy_vllm_tree(site_packages: Path, destination: Path) -> Path:
    """Copy the installed `vllm` package (sources and data, not its compiled binaries).

    The binaries are most of the 0.8 GB and none is loaded by the harness's imports.
    Returns the folder to pass as `--vllm` (it holds `vllm/`).
    """

    def ignore(folder: str, names: list[str]) -> list[str]:
        return [
            name
            for name in names
            if name == "__pycache__"
            or (not os.path.isdir(os.path.join(folder, name)) and _is_compiled(os.path.join(folder, name)))
        ]

    destination.mkdir(parents=True, exist_ok=True)
    shutil.copytree(site_packages / "vllm", destination / "vllm", ignore=ignore)
    return destination


if __name__ == "__main__":
    runtime = vllm_runtime(progress=lambda message: print(message, file=sys.stderr))
    state = "built now" if runtime.built_now else "cached"
    print(f"{runtime.python} ({state}; build took {runtime.build_seconds:.0f}s)")
