"""The CPU runtime `kvlint verify` imports vLLM in, and the test suite's runtime tests: one environment,
built by one recipe (this module), shared by both.

A virtualenv holding the real vLLM 0.29.0 for CPU, built on first use (`kvlint verify --setup`, or the
first runtime test) under ~/.cache/kvlint-tests/ (override: KVLINT_TEST_CACHE; the folder keeps the name
the test suite gave it, so an environment built by either is the other's), keyed by vLLM, torch and
Python versions and by this recipe's version. About 2.1 GB. The build happens in a temporary folder beside
the final one and is renamed into place when it imports, so an interrupted build never looks finished; a
file lock keeps concurrent builds (two sessions, a test run and `verify --setup`) from building it twice.

What goes in: torch, from the one source `torch_source` names in one line before the build: `torch==<pin>`
from the index `--torch-index-url` names (PyTorch's CPU index: https://download.pytorch.org/whl/cpu), else the
wheel file KVLINT_TORCH_WHEEL names, else as pip resolves it with the user's own configuration (PIP_INDEX_URL,
pip.conf, find-links: PyPI's default build otherwise, CUDA's on Linux); no folder is searched. Then vLLM with
--no-deps, and only the requirements needed to import the modules `kvlint verify` touches, each
pinned as vLLM's own metadata pins it. xgrammar comes without its declared Triton (1 GB, never imported on
this path).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kvlint.scan.package_index import pip_settings, redact

VLLM_VERSION = "0.29.0"
TORCH_VERSION = "2.13.0"  # vLLM 0.29.0 pins torch==2.13.0
# Bump when the recipe below changes, so an old cached environment is not reused.
RECIPE_VERSION = 2  # 2: pytest and what vLLM's tests/conftest.py imports

# Imported (directly or on the import chain) by the modules the harness touches:
# vllm.config, vllm.v1.kv_cache_interface, vllm.v1.core.kv_cache_utils,
# vllm.v1.core.kv_cache_coordinator and the offloading connector's config.
IMPORT_REQUIREMENTS = (
    "numpy",
    "regex",
    "pydantic",
    "cbor2",
    "psutil",
    "pyzmq",
    "transformers",
    "aiohttp",
    "requests",
    "openai-harmony",
    "openai",
    "pillow",
    "pybase64",
    "cachetools",
    "msgspec",
    "cloudpickle",
    "py-cpuinfo",
    "prometheus_client",
    "llguidance",
    "apache-tvm-ffi",
    "uvloop",
    "packaging",
)
# Installed without their declared dependencies (xgrammar declares triton).
NO_DEPS_REQUIREMENTS = ("xgrammar",)
# For `kvlint verify --upstream-tests`: pytest, and what vLLM's root tests/conftest.py imports beyond the
# above (fastapi without its [standard] extra: only its import is needed).
TEST_REQUIREMENTS = ("pytest", "tblib", "einops", "fastapi")

SMOKE_IMPORTS = (
    "import vllm.config, vllm.v1.kv_cache_interface, vllm.v1.core.kv_cache_utils, "
    "vllm.v1.core.kv_cache_coordinator, "
    "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config"
)
INFO_FILE = "kvlint-runtime.json"


class RuntimeUnavailable(Exception):
    """The environment cannot be built here (a precondition is missing, not a bug)."""


@dataclass(frozen=True)
class VllmRuntime:
    root: Path
    python: Path
    site_packages: Path  # holds the installed vllm package: a valid `--vllm PATH`
    build_seconds: float
    built_now: bool


def cache_root() -> Path:
    configured = os.environ.get("KVLINT_TEST_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvlint-tests"


def environment_key() -> str:
    python = f"py{sys.version_info.major}{sys.version_info.minor}"
    return f"vllm-{VLLM_VERSION}-torch-{TORCH_VERSION}-cpu-{python}-r{RECIPE_VERSION}"


PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class TorchSource:
    """Where the build takes torch from: `requirement` (a wheel file, or `torch==<pin>`) and the index pip
    reads it from (None: pip's own configuration); `said` is the one line that tells the user."""

    requirement: str
    index_url: str | None
    said: str


def torch_source(index_url: str | None = None, work_dir: Path | None = None) -> TorchSource:
    """torch's source: `index_url` (the command line's), else KVLINT_TORCH_WHEEL's file, else pip's own
    configuration."""
    requirement = f"torch=={TORCH_VERSION}"
    if index_url:
        return TorchSource(requirement, index_url, f"{requirement} from {redact(index_url)} (--torch-index-url)")
    configured = os.environ.get("KVLINT_TORCH_WHEEL")
    if configured:
        if not Path(configured).is_file():
            raise RuntimeUnavailable(f"KVLINT_TORCH_WHEEL={configured} is not a file")
        return TorchSource(configured, None, f"torch from the wheel KVLINT_TORCH_WHEEL names: {configured}")
    return TorchSource(requirement, None, f"{requirement} as pip resolves it: {_pip_index(work_dir)}")


def _pip_index(work_dir: Path | None) -> str:
    """The index pip reads (its configuration and PIP_* environment), said with what to do for a CPU build."""
    with tempfile.TemporaryDirectory(prefix="kvlint-pip-") as scratch:
        index = redact(pip_settings(work_dir or Path(scratch)).index_url)
    said = f"from {index}, pip's index (its extra indexes and find-links too, where configured)"
    if index.rstrip("/") == "https://pypi.org/simple":
        said += (
            "; PyPI's default torch for Linux is a CUDA build (with its nvidia packages, several GB): "
            f"for the CPU build give --torch-index-url {PYTORCH_CPU_INDEX}"
        )
    return said


def _isolated(python: str | Path, *arguments: str) -> list[str]:
    """A command of `python` run isolated (`-I`): neither the working folder nor PYTHONPATH reaches its
    sys.path, so a `venv/` or `pip/` package where kvlint was started never runs in place of the real one."""
    return [str(python), "-I", *arguments]


def _run(command: list[str], what: str, log: list[str], cwd: Path, progress=None) -> str:
    """Run `command` from `cwd`, a folder kvlint made (never the user's working folder)."""
    if progress is not None:
        progress(f"{what}…")
    started = time.monotonic()
    completed = subprocess.run(
        command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace"
    )
    log.append(f"{time.monotonic() - started:7.1f}s  {what}")
    if completed.returncode != 0:
        output = (completed.stderr or completed.stdout).strip().splitlines()
        tail = " | ".join(output[-3:]) if output else f"exit status {completed.returncode}"
        raise RuntimeError(f"building the vLLM {VLLM_VERSION} test environment: {what} failed: {tail}")
    return completed.stdout


def _requirement_pins(python: Path, log: list[str], cwd: Path) -> dict[str, str]:
    """vLLM's own Requires-Dist entries (no extras), keyed by normalised name."""
    script = "import importlib.metadata as m, json; print(json.dumps(m.distribution('vllm').requires or []))"
    requires = json.loads(_run(_isolated(python, "-c", script), "read vLLM's requirements", log, cwd))
    pins: dict[str, str] = {}
    for entry in requires:
        requirement, _, marker = entry.partition(";")
        if "extra" in marker:
            continue
        name = re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0]
        pins[_normalise(name)] = requirement.strip()
    return pins


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned(names: tuple[str, ...], pins: dict[str, str]) -> list[str]:
    return [pins.get(_normalise(name), name) for name in names]


def _without_extras(requirement: str) -> str:
    return re.sub(r"\[[^\]]*\]", "", requirement, count=1)


def _build(target: Path, log: list[str], progress=None, torch: TorchSource | None = None) -> str:
    """Build the environment in `target` (a folder kvlint made, the working folder of every step); returns
    the version of torch installed."""
    torch = torch or torch_source(work_dir=target)
    _run(_isolated(sys.executable, "-m", "venv", str(target)), "create the virtualenv", log, target, progress)
    python = target / "bin" / "python"
    pip = _isolated(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    from_index = ["--index-url", torch.index_url] if torch.index_url else []
    _run([*pip, *from_index, torch.requirement], f"install {Path(torch.requirement).name}", log, target, progress)
    script = "import importlib.metadata as m; print(m.version('torch'))"
    installed = _run(_isolated(python, "-c", script), "read the torch installed", log, target).strip()
    # Whatever asks for torch later gets the build installed or fails: pip must never swap in another.
    constraints = target / "kvlint-constraints.txt"
    constraints.write_text(f"torch=={installed}\n", encoding="utf-8")
    _run([*pip, "--no-deps", f"vllm=={VLLM_VERSION}"], f"install vllm=={VLLM_VERSION} --no-deps", log, target, progress)
    pins = _requirement_pins(python, log, target)
    steps = [
        (
            [*pip, "-c", str(constraints), *_pinned(IMPORT_REQUIREMENTS, pins)],
            "install the requirements the harness imports",
        ),
        ([*pip, "--no-deps", *_pinned(NO_DEPS_REQUIREMENTS, pins)], "install xgrammar without triton"),
        (
            [*pip, "-c", str(constraints), *map(_without_extras, _pinned(TEST_REQUIREMENTS, pins))],
            "install pytest and what vLLM's tests/conftest.py imports",
        ),
        (_isolated(python, "-c", SMOKE_IMPORTS), "import the modules the harness touches"),
    ]
    for command, what in steps:
        _run(command, what, log, target, progress)
    return installed


def _site_packages(python: Path) -> Path:
    script = "import os, vllm; print(os.path.dirname(os.path.dirname(vllm.__file__)))"
    completed = subprocess.run(
        _isolated(python, "-c", script),
        cwd=python.parent,  # the environment's own folder, not the user's working folder
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"},
    )
    return Path(completed.stdout.strip().splitlines()[-1])


def vllm_runtime(progress=None, torch_index_url: str | None = None) -> VllmRuntime:
    """The cached environment, built first if needed (minutes, once per machine; torch from `torch_source`)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / environment_key()
    with open(root / f"{environment_key()}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built_now = False
        if not (target / "bin" / "python").exists():  # half-deleted or from another machine
            (target / INFO_FILE).unlink(missing_ok=True)
        if not (target / INFO_FILE).is_file():
            if target.exists():  # a folder without its info file is not ours to trust
                shutil.rmtree(target)
            torch = torch_source(torch_index_url, work_dir=root)
            if progress is not None:
                progress(
                    f"building the vLLM {VLLM_VERSION} environment in {target} (once: about 2.1 GB with torch's "
                    "CPU build, most of it downloaded; minutes, each step said as it starts)"
                )
                progress(f"torch: {torch.said}")
            staging = Path(tempfile.mkdtemp(prefix=f"{environment_key()}.building-", dir=root))
            log: list[str] = []
            started = time.monotonic()
            try:
                # A virtualenv records its own path in places; build it where it will live,
                # only in a staging name, and rename: `bin/python -m …` works after the move.
                installed = _build(staging, log, progress, torch)
                seconds = time.monotonic() - started
                info = {"vllm": VLLM_VERSION, "torch": installed, "build_seconds": seconds, "steps": log}
                (staging / INFO_FILE).write_text(json.dumps(info, indent=1), encoding="utf-8")
                os.rename(staging, target)
                built_now = True
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
        info = json.loads((target / INFO_FILE).read_text(encoding="utf-8"))
    python = target / "bin" / "python"
    return VllmRuntime(
        root=target,
        python=python,
        site_packages=_site_packages(python),
        build_seconds=float(info["build_seconds"]),
        built_now=built_now,
    )


def built_runtime() -> Path | None:
    """The interpreter of the environment when it is built (its info file written), else None; builds nothing."""
    target = cache_root() / environment_key()
    python = target / "bin" / "python"
    return python if (target / INFO_FILE).is_file() and python.exists() else None


def size_on_disk(folder: Path) -> int:
    """Bytes the files under `folder` take (links not followed)."""
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_blocks * 512
            except OSError:
                pass
    return total
