"""A real out-of-tree package from PyPI judged against the vLLM releases it requires (issue 28): the beam-search
plugin `vllm-beam-search-plugin` 0.1.5 (`vllm>=0.24.0,<0.32.0`), whose scheduler subclass reads the KV cache
groups. Its sdist is fetched once into the test cache through kvlint's own verified download (the index's
sha256; nothing of it is built or run), like the vLLM releases."""

from __future__ import annotations

import json
import tarfile
import time
from pathlib import Path

import pytest

from kvlint.scan.package_index import download, pip_settings, project_files
from tests.kvlint_runner import run_kvlint

PACKAGE, VERSION = "vllm-beam-search-plugin", "0.1.5"
CACHE = Path.home() / ".cache" / "kvlint-tests" / "plugins"


def plugin_sources() -> Path:
    folder = CACHE / f"{PACKAGE}-{VERSION}"
    if (folder / "pyproject.toml").is_file():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 300
    settings = pip_settings(CACHE)
    wanted = f"{PACKAGE.replace('-', '_')}-{VERSION}.tar.gz"
    sdist = next(f for f in project_files(settings, PACKAGE, deadline) if f.filename == wanted)
    archive = CACHE / wanted
    with open(archive, "w+b") as sink:
        download(settings, sdist, sink, 10_000_000, deadline)
    staging = CACHE / f"{PACKAGE}-{VERSION}.partial"
    with tarfile.open(archive) as opened:
        opened.extractall(staging, filter="data")
    (staging / wanted.removesuffix(".tar.gz")).rename(folder)
    archive.unlink()
    return folder


@pytest.mark.slow
def test_a_real_plugin_is_judged_against_the_oldest_and_newest_release_it_requires():
    package = plugin_sources()
    started = time.monotonic()
    completed = run_kvlint("check", "--no-cache", "--output-format", "json", ".", cwd=package)
    elapsed = time.monotonic() - started
    first = completed.stderr.splitlines()[0]
    assert first.startswith("kvlint: judging against vLLM 0.24.0 and 0.31."), first
    assert "from the requirement `vllm>=0.24.0,<0.32.0`" in first
    found = json.loads(completed.stdout)
    assert all(not f["path"].startswith(("vllm/", "/")) for f in found)  # the plugin's files only
    # What the report lists: one check, in the function the plugin patches onto GPUModelRunner (a worker class,
    # handed the worker's config): its CrossAttentionSpec test of a group spec. Its BeamSearchScheduler (an
    # AsyncScheduler) and its KV cache manager wrapper see the scheduler's flattened config: nothing there.
    assert [(f["path"], f["line"], f["code"], f["severity"]) for f in found] == [
        ("vllm_beam_search/scheduler.py", 280, "KV101", "warning")  # a container only under an opt-in layout
    ]
    for finding in found:
        assert "iter_layer_specs" not in finding["message"].split("; ")[-1]  # 0.24.0 has none
        assert finding["fix"] is None and "0.24.0" in finding["fix_unavailable"]
    print(f"{len(found)} finding(s) in {elapsed:.1f} s:", *(f["message"][:160] for f in found), sep="\n")
