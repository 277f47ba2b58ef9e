"""Import the sizing modules of a vLLM source tree with only torch and light packages.

The GPU machine has PyTorch but not vLLM's service stack (pydantic, zmq, msgspec, …),
and vLLM's wheel is too large to carry there. The KV-cache sizing code itself needs
none of that: `kv_cache_interface`, `kv_cache_utils` and the offloading connector's
`config` only name a few heavy modules at import time, for annotations or for code the
sizing paths never run. So, when the full import fails, this module:

- registers the heavy connector packages (``vllm.distributed`` …) as bare packages, so
  importing a leaf module does not run their ``__init__``;
- puts inert placeholders in for the few heavy modules named at import time
  (``vllm.config``, ``vllm.v1.request``, ``vllm.distributed.kv_events``, … below);

and imports the real modules from the tree. The functions under test stay the tree's
own. `needed_files()` lists the files such an import reads, so that only those travel.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KV_CACHE_INTERFACE = "vllm.v1.kv_cache_interface"
KV_CACHE_UTILS = "vllm.v1.core.kv_cache_utils"
OFFLOADING_CONFIG = "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config"
MODULES = (KV_CACHE_INTERFACE, KV_CACHE_UTILS, OFFLOADING_CONFIG)

# Packages whose __init__ pulls in the distributed runtime; their leaves are light.
BARE_PACKAGES = (
    "vllm.distributed",
    "vllm.distributed.kv_transfer",
    "vllm.distributed.kv_transfer.kv_connector",
    "vllm.distributed.kv_transfer.kv_connector.v1",
    "vllm.distributed.kv_transfer.kv_connector.v1.offloading",
)


class _Placeholder:
    """Stands for a heavy class or function a module names but the sizing code never uses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a light-import placeholder was used; the sizing code should not need it")


# Heavy modules the sizing modules name at import time. Any name imported from one is a
# placeholder (a class that refuses to be instantiated), except the answers given here.
PLACEHOLDERS: dict[str, dict[str, Any]] = {
    # The spec registry asks for the current config (None: none is set) when it registers.
    "vllm.config": {"get_current_vllm_config_or_none": lambda: None},
    "vllm.v1.request": {},
    "vllm.v1.utils": {},
    "vllm.utils.hashing": {},
    # Named by the block pool, which the KV cache managers' module (where the spec
    # registry registers the built-in specs) imports.
    "vllm.distributed.kv_events": {},
    "vllm.v1.metrics.stats": {},
}


def _placeholder_module(name: str, answers: dict[str, Any]) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(answers)

    def __getattr__(attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return type(attribute, (_Placeholder,), {"__module__": name})

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


@dataclass(frozen=True)
class SizingModules:
    interface: Any
    utils: Any
    offloading: Any
    torch: Any
    # "full": the tree imported normally; "light": with the placeholders above.
    mode: str


class _BarePackageFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name not in BARE_PACKAGES:
            return None
        folder = self.root.joinpath(*name.split("."))
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        return spec


def _pin_platform() -> None:
    """Give vLLM the platform it uses when it detects none, before anything asks.

    Detection on a GPU host would import vLLM's CUDA platform (compiled ops, the wheel's
    metadata), none of which a light tree has; the sizing code never consults it.
    """
    platforms = importlib.import_module("vllm.platforms")
    if getattr(platforms, "_current_platform", None) is None:
        interface = importlib.import_module("vllm.platforms.interface")
        platforms._current_platform = interface.UnspecifiedPlatform()


def _imports_fully(root: Path) -> bool:
    script = f"import sys; sys.path.insert(0, {str(root)!r}); import " + ", ".join(MODULES)
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
    )
    return completed.returncode == 0


def _check_origin(module: Any, root: Path) -> None:
    location = Path(module.__file__).resolve()
    if root.resolve() not in location.parents:
        raise ImportError(f"{module.__name__} came from {location}, not from the tree at {root}")


def import_sizing_modules(root: Path, allow_full: bool = True) -> SizingModules:
    """The tree's sizing modules, from `root` (the folder holding `vllm/`)."""
    root = Path(root)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    torch = importlib.import_module("torch")
    # Probe the full import in a child: a failed import half-way would leave torch
    # custom-op registrations behind that a second import of the same modules trips on.
    if allow_full and _imports_fully(root):
        modules = [importlib.import_module(name) for name in MODULES]
        for module in modules:
            _check_origin(module, root)
        return SizingModules(*modules, torch=torch, mode="full")
    finder = _BarePackageFinder(root)
    sys.meta_path.insert(0, finder)
    try:
        for name, answers in PLACEHOLDERS.items():
            sys.modules[name] = _placeholder_module(name, answers)
        _pin_platform()
        modules = [importlib.import_module(name) for name in MODULES]
    finally:
        sys.meta_path.remove(finder)
    for module in modules:
        _check_origin(module, root)
    return SizingModules(*modules, torch=torch, mode="light")


def needed_files(root: Path) -> list[str]:
    """Files under `root` that a light import and the tests' spec building read.

    Run in a fresh interpreter. Building every kind of the verify matrix pulls in what
    vLLM imports lazily on the way (the spec registry registers the built-in specs from
    the KV cache managers' module on first use).
    """
    from kvlint.verify import child

    sizing = import_sizing_modules(root, allow_full=False)
    specs = child.SpecFactory(sizing.interface, sizing.torch)
    for make_groups in child.build_kinds(specs).values():
        worker = child.build_worker_config(sizing.interface, make_groups())
        sizing.utils.generate_scheduler_kv_cache_config([worker])
    files = set()
    for name, module in list(sys.modules.items()):
        if name == "vllm" or name.startswith("vllm."):
            location = getattr(module, "__file__", None)
            if location and Path(location).resolve().is_relative_to(Path(root).resolve()):
                files.add(os.path.relpath(Path(location).resolve(), Path(root).resolve()))
    return sorted(files)


if __name__ == "__main__":
    # python tests/gpu/vllm_light.py TREE: print the files a light import of TREE reads.
    print("\n".join(needed_files(Path(sys.argv[1]))))
