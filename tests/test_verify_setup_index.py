"""`kvlint verify --setup` sets itself up from a package index alone (issue 29, item 3): no CPU wheel on disk,
no folder searched, the machine's pip configuration (find-links, extra indexes, constraints) switched off.

A fake PEP 691 index on 127.0.0.1 serves stand-in wheels, each a few hundred bytes: torch=={pin}, vLLM {pin}
holding the modules the setup's smoke test imports, and every requirement the recipe installs. The build is
kvlint's own, run as a user runs it (`python -m kvlint verify --setup`); only the wheels are stand-ins.
Marked slow: it creates a real virtualenv and runs pip a handful of times (~20-60 s on two shared cores).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvlint.verify import runtime_env
from test_releases import FakeIndex

SMOKE_MODULES = re.findall(r"vllm(?:\.\w+)+", runtime_env.SMOKE_IMPORTS)


def stand_in_wheel(name: str, version: str, modules: dict[str, str] | None = None) -> tuple[str, bytes]:
    """A pure-Python wheel of `name` `version` holding `modules` (path -> text): its file name and bytes."""
    stem = re.sub(r"[-_.]+", "_", name)
    dist_info = f"{stem}-{version}.dist-info"
    files = {
        **(modules or {}),
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: kvlint-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist_info}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in {**files, f"{dist_info}/RECORD": record}.items():
            archive.writestr(path, text)
    return f"{stem}-{version}-py3-none-any.whl", buffer.getvalue()


def stand_in_vllm() -> tuple[str, bytes]:
    modules = {"vllm/__init__.py": ""}
    for dotted in SMOKE_MODULES:
        parts = dotted.split(".")
        for depth in range(2, len(parts)):
            modules.setdefault("/".join(parts[:depth]) + "/__init__.py", "")
        modules["/".join(parts) + ".py"] = ""
    return stand_in_wheel("vllm", runtime_env.VLLM_VERSION, modules)


def publish(index: FakeIndex, prefix: str, project: str, wheel: tuple[str, bytes]) -> None:
    """List `wheel` on `prefix`/simple/`project`/ and serve it from `prefix`/files/."""
    filename, data = wheel
    entry = {
        "filename": filename,
        "url": f"../../files/{filename}",
        "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
    }
    page = {"meta": {"api-version": "1.0"}, "name": project, "files": [entry]}
    index.routes[f"{prefix}/simple/{project}/"] = ("application/vnd.pypi.simple.v1+json", json.dumps(page).encode())
    index.routes[f"{prefix}/files/{filename}"] = ("application/octet-stream", data)


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture
def package_index():
    index = FakeIndex()
    publish(index, "", "vllm", stand_in_vllm())
    names = (*runtime_env.IMPORT_REQUIREMENTS, *runtime_env.NO_DEPS_REQUIREMENTS, *runtime_env.TEST_REQUIREMENTS)
    for name in names:
        publish(index, "", normalised(name), stand_in_wheel(name, "1.0"))
    yield index
    index.close()


def setup_environment(index: FakeIndex, tmp_path: Path) -> dict[str, str]:
    """This machine's pip configuration switched off: only the fake index is read."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PIP_") and name not in ("KVLINT_TORCH_WHEEL", "PYTHONPATH")
    }
    environment.update(
        PIP_CONFIG_FILE=os.devnull,  # pip reads no configuration file (its find-links, extra indexes, constraints)
        PIP_INDEX_URL=index.url,
        PIP_DEFAULT_TIMEOUT="20",
        PIP_RETRIES="0",
        KVLINT_TEST_CACHE=str(tmp_path / "cache"),
        NO_PROXY="127.0.0.1",
        no_proxy="127.0.0.1",
    )
    return environment


def run_setup(environment: dict[str, str], cwd: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kvlint", "verify", "--setup", *options]
    return subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=600)


def installed_torch(environment: dict[str, str]) -> str:
    python = Path(environment["KVLINT_TEST_CACHE"]) / runtime_env.environment_key() / "bin" / "python"
    script = "import importlib.metadata as m; print(m.version('torch'))"
    return subprocess.run([str(python), "-I", "-c", script], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow
def test_setup_takes_torch_from_pips_index_alone(package_index, tmp_path):
    """PyPI's case: torch as pip resolves it from its index (PIP_INDEX_URL here), said in one line."""
    torch = stand_in_wheel("torch", runtime_env.TORCH_VERSION)
    publish(package_index, "", "torch", torch)
    environment = setup_environment(package_index, tmp_path)
    done = run_setup(environment, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    said = [line for line in lines if line.startswith("kvlint: torch: ")]
    assert said == [
        f"kvlint: torch: torch=={runtime_env.TORCH_VERSION} as pip resolves it: from {package_index.url}, pip's index "
        "(its extra indexes and find-links too, where configured)"
    ]
    assert lines.index(said[0]) < next(i for i, line in enumerate(lines) if "create the virtualenv" in line)
    assert lines[-1].startswith("kvlint: the verify runtime is ready (built now in ")
    assert f"/files/{torch[0]}" in package_index.downloads()
    # the stand-in, not this machine's CPU wheel (2.13.0+cpu, a higher version pip would have preferred)
    assert installed_torch(environment) == runtime_env.TORCH_VERSION
    info = json.loads(
        (Path(environment["KVLINT_TEST_CACHE"]) / runtime_env.environment_key() / "kvlint-runtime.json").read_text()
    )
    assert info["torch"] == runtime_env.TORCH_VERSION


@pytest.mark.slow
def test_setup_takes_torch_from_the_index_torch_index_url_names(package_index, tmp_path):
    """A CPU index (PyTorch's, for the CPU build) for torch alone; everything else from pip's own index."""
    torch = stand_in_wheel("torch", runtime_env.TORCH_VERSION)
    publish(package_index, "/cpu", "torch", torch)  # not on pip's index: only the option's finds it
    environment = setup_environment(package_index, tmp_path)
    cpu_index = package_index.url.replace("/simple", "/cpu/simple")
    done = run_setup(environment, tmp_path, "--torch-index-url", cpu_index)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("kvlint: torch: ")]
    assert said == [f"kvlint: torch: torch=={runtime_env.TORCH_VERSION} from {cpu_index} (--torch-index-url)"]
    assert f"/cpu/files/{torch[0]}" in [path for path, _ in package_index.requests]
    assert installed_torch(environment) == runtime_env.TORCH_VERSION


def test_torch_source_says_where_torch_comes_from(tmp_path, monkeypatch):
    wheel = tmp_path / f"torch-{runtime_env.TORCH_VERSION}+cpu-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"")
    monkeypatch.setenv("KVLINT_TORCH_WHEEL", str(wheel))
    assert runtime_env.torch_source().said == f"torch from the wheel KVLINT_TORCH_WHEEL names: {wheel}"
    # the command line's index wins over the environment's wheel
    chosen = runtime_env.torch_source(runtime_env.PYTORCH_CPU_INDEX)
    assert (chosen.requirement, chosen.index_url) == (
        f"torch=={runtime_env.TORCH_VERSION}",
        runtime_env.PYTORCH_CPU_INDEX,
    )
    monkeypatch.delenv("KVLINT_TORCH_WHEEL")
    # no folder is searched: this machine's find-links folder holds a CPU wheel, and it is not named
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"):
        monkeypatch.delenv(name, raising=False)
    source = runtime_env.torch_source(work_dir=tmp_path)
    assert (source.requirement, source.index_url) == (f"torch=={runtime_env.TORCH_VERSION}", None)
    assert source.said.startswith("torch==2.13.0 as pip resolves it: from https://pypi.org/simple, pip's index")
    assert source.said.endswith(f"for the CPU build give --torch-index-url {runtime_env.PYTORCH_CPU_INDEX}")


def test_torch_index_url_goes_with_setup(tmp_path):
    from kvlint_runner import run_kvlint

    done = run_kvlint("verify", "--torch-index-url", "https://download.pytorch.org/whl/cpu", cwd=tmp_path)
    assert done.returncode == 2 and "--torch-index-url goes with --setup" in done.stderr
