"""Shared fixtures: real vLLM releases fetched from PyPI once and cached (~/.cache/kvlint/releases), the CPU
vLLM runtime virtualenv (tests/vllm_runtime.py), and the guard that keeps both out of the fast tests.

A test that needs a real release (a download on a fresh machine, then a scan of ~2,500 files) or the runtime
environment (minutes to build) is marked `slow`, as is one that waits half a minute by design (the SIGKILL
fault test); `pytest -m "not slow"` must run offline in about a minute.
The guard below fails such a test at once, before any download, when it lacks the marker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple


def _keep_bytecode() -> None:
    """Compiled modules kept between the suite's processes, in a folder of this user's outside every source tree.

    Hundreds of tests run `kvlint` in a child process; where the machine sets PYTHONDONTWRITEBYTECODE (this
    image does) each child compiled every kvlint module again, about a second apiece. The prefix keeps the
    bytecode out of the checkout and out of any tree a test scans or fixes (a test compares those trees)."""
    try:
        prefix = Path.home() / ".cache" / "kvlint-tests" / "pycache"
        prefix.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (OSError, RuntimeError):
        return  # no home, or none writable: compiled again, as before
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(prefix)


_keep_bytecode()

import pytest  # noqa: E402  (after the bytecode settings: the imports below compile once)
from hypothesis import settings  # noqa: E402

from kvlint.scan.releases import release_sources  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import vllm_runtime  # noqa: E402  (tests/ helper, not a package)

OFFLOADING_CONFIG = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"

# Fixtures that reach for a real release or the runtime environment; a test using one, directly or through
# another fixture, must be marked slow.
SLOW_FIXTURES = frozenset({"vllm_release", "vllm_copy", "vllm_runtime_env"})


# Property tests (test_properties.py): the fast loop gives each property a few dozen generated examples, the
# full suite (any run that does not exclude the slow tests) 150.
settings.register_profile("fast-loop", max_examples=40)
settings.register_profile("full-suite", max_examples=150)


def pytest_configure(config: pytest.Config) -> None:
    fast_loop = "not slow" in (config.getoption("markexpr", "") or "")
    settings.load_profile("fast-loop" if fast_loop else "full-suite")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    needed = SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
    if needed and item.get_closest_marker("slow") is None:
        pytest.fail(
            f"{item.nodeid} uses {', '.join(sorted(needed))} (a real release download and scan, or the vLLM "
            "runtime build) but is not marked @pytest.mark.slow; the fast tests must stay offline",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def vllm_release():
    """vllm_release("0.29.0") -> folder holding that release's `vllm/` sources (read-only use)."""
    cache: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in cache:
            cache[version] = release_sources(version, quiet=True)
        return cache[version]

    return get


@pytest.fixture(scope="session")
def kvlint_in_release(vllm_release):
    """kvlint_in_release("0.29.0", "check", "--no-cache", "--format", "json", ".") -> that command's
    CompletedProcess, run in the release's folder once per session: a full scan of a release takes half a
    minute, and the golden files and the release tests ask for the same ones."""
    runs: dict[tuple[str, tuple[str, ...]], subprocess.CompletedProcess] = {}

    def run(version: str, *arguments: str) -> subprocess.CompletedProcess:
        if (version, arguments) not in runs:
            command = [sys.executable, "-m", "kvlint", *arguments]
            completed = subprocess.run(command, cwd=vllm_release(version), capture_output=True, text=True, timeout=600)
            runs[version, arguments] = completed
        return runs[version, arguments]

    return run


class FixedTree(NamedTuple):
    tree: Path  # a copy of the release, as `kvlint fix vllm` left it
    run: subprocess.CompletedProcess  # that fix's exit code, stdout and stderr
    cache: Path  # the result cache that fix wrote: a later run on the tree is warm


@pytest.fixture(scope="session")
def fixed_029(vllm_release, tmp_path_factory) -> FixedTree:
    """A copy of 0.29.0 after one `kvlint fix vllm` from its folder, made once per session: the fix's tests
    and the "findings left" test ask for the same run (a cold fix of a release is most of a minute).
    Read it; a test that must change files makes its own copy (vllm_copy)."""
    tree = tmp_path_factory.mktemp("fixed") / "vllm-0.29.0"
    shutil.copytree(vllm_release("0.29.0"), tree)
    cache = tree.parent / "cache"
    command = [sys.executable, "-m", "kvlint", "fix", "--cache-dir", str(cache), "vllm"]
    completed = subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=900)
    return FixedTree(tree, completed, cache)


@pytest.fixture
def vllm_copy(vllm_release, tmp_path):
    """vllm_copy("0.29.0") -> a writable copy of that release's sources."""

    def copy(version: str) -> Path:
        target = tmp_path / f"vllm-{version}"
        shutil.copytree(vllm_release(version), target)
        return target

    return copy


@pytest.fixture(scope="session")
def vllm_runtime_env() -> vllm_runtime.VllmRuntime:
    """The cached virtualenv with the real vLLM 0.29.0 for CPU (built on first use, in minutes)."""
    try:
        return vllm_runtime.vllm_runtime(progress=lambda message: print(message, file=sys.stderr))
    except vllm_runtime.RuntimeUnavailable as error:
        pytest.skip(f"vLLM {vllm_runtime.VLLM_VERSION} CPU environment unavailable: {error}")
