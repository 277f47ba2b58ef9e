"""Run vLLM's own tests against one vLLM tree, in the interpreter that can import it.

Run by `kvlint verify --upstream-tests` as
``python -I -B pytest_child.py --vllm TREE --status FILE -- PYTEST-ARGUMENTS``: by path, isolated (-I), and
writing no bytecode (-B) into the trees it reads. Standard library only: kvlint is not importable here.

It puts TREE first on sys.path and imports `vllm` from it before pytest starts, so that no later sys.path
entry (pytest adds the tests' parent folder, which may hold another vllm/) can shadow the tree under test.
Without a CUDA device it sets VLLM_TARGET_DEVICE=cpu unless the environment says otherwise: vLLM then
takes its CPU platform, as its CPU test jobs do, and tests that need a GPU skip with their own reasons.
What it found goes to FILE as JSON; pytest's results go where its arguments say (a JUnit XML file).
"""

from __future__ import annotations

import json
import os
import sys


def _write(path: str, status: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(status, handle)


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _device() -> str:
    if "VLLM_TARGET_DEVICE" in os.environ:
        return f"{os.environ['VLLM_TARGET_DEVICE']} (VLLM_TARGET_DEVICE as set)"
    try:
        import torch

        if torch.cuda.is_available():
            return "cuda"
    except Exception:  # no torch, or a broken one: vLLM's own import says more below
        pass
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
    return "cpu (no CUDA device: VLLM_TARGET_DEVICE=cpu)"


def main(argv: list[str]) -> int:
    split = argv.index("--")
    options, pytest_arguments = argv[:split], argv[split + 1 :]
    tree = os.path.abspath(options[options.index("--vllm") + 1])
    status_path = options[options.index("--status") + 1]
    status: dict = {"python": sys.version.split()[0]}
    sys.path.insert(0, tree)
    status["device"] = _device()
    try:
        import vllm
    except BaseException as error:  # any failure to import is "the tree cannot be imported"
        status["import_error"] = _one_line(error)
        _write(status_path, status)
        return 3
    location = os.path.dirname(os.path.abspath(vllm.__file__))
    status["vllm"] = {"version": getattr(vllm, "__version__", "unknown"), "path": location}
    if os.path.dirname(location) != tree:
        status["import_error"] = f"imported vllm from {location}, not from {tree}"
        _write(status_path, status)
        return 3
    try:
        import pytest
    except ImportError as error:
        status["no_pytest"] = _one_line(error)
        _write(status_path, status)
        return 3
    status["pytest"] = pytest.__version__
    _write(status_path, status)
    return int(pytest.main(pytest_arguments))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
