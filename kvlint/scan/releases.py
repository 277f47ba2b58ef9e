"""Fetch a vLLM release's Python sources from PyPI without installing it (a wheel is a zip of them)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from kvlint.scan.result_cache import cache_root  # noqa: F401 (where releases are kept; also used by the benchmark)
from kvlint.errors import KvlintError

_VERSION = re.compile(r"^[0-9]+(\.[0-9]+)*([a-z0-9.+-]*)$")


class ReleaseError(KvlintError):
    pass


def release_sources(version: str, quiet: bool = False) -> Path:
    """The folder holding `vllm/…/*.py` of release `version`, fetched and cached on first use."""
    if not _VERSION.match(version):
        raise ReleaseError(f"not a version number: {version!r}")
    target = cache_root() / "releases" / f"vllm-{version}"
    if (target / "vllm" / "__init__.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvlint-fetch-", dir=target.parent) as scratch:
        wheel = _download(version, Path(scratch), quiet)
        staging = Path(scratch) / "sources"
        _extract_python(wheel, staging)
        if not (staging / "vllm" / "__init__.py").is_file():
            raise ReleaseError(f"{wheel.name}: no vllm package inside")
        try:
            os.replace(staging, target)  # atomic: a concurrent fetch either wins or finds it done
        except OSError:
            if not (target / "vllm" / "__init__.py").is_file():
                raise
    return target


def _download(version: str, folder: Path, quiet: bool) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(folder), f"vllm=={version}"]
    if not quiet:
        print(f"kvlint: fetching vllm=={version} from PyPI (sources only are kept)…", file=sys.stderr)
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()
        raise ReleaseError(f"pip could not download vllm=={version}: {tail[-1] if tail else 'unknown error'}")
    wheels = sorted(folder.glob("vllm-*.whl"))
    if not wheels:
        raise ReleaseError(f"pip downloaded no wheel for vllm=={version}")
    return wheels[0]


def _extract_python(wheel: Path, destination: Path) -> None:
    destination.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if not name.startswith("vllm/") or not name.endswith(".py") or ".." in Path(name).parts:
                continue
            path = destination / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(path, "wb") as sink:
                shutil.copyfileobj(source, sink)
