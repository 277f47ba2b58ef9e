"""Shared fixtures: real vLLM releases fetched from PyPI once and cached (~/.cache/kvlint/releases)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvlint.scan.releases import release_sources

OFFLOADING_CONFIG = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"


@pytest.fixture(scope="session")
def vllm_release():
    """vllm_release("0.29.0") -> folder holding that release's `vllm/` sources (read-only use)."""
    cache: dict[str, Path] = {}

    def get(version: str) -> Path:
        if version not in cache:
            cache[version] = release_sources(version, quiet=True)
        return cache[version]

    return get


@pytest.fixture
def vllm_copy(vllm_release, tmp_path):
    """vllm_copy("0.29.0") -> a writable copy of that release's sources."""

    def copy(version: str) -> Path:
        target = tmp_path / f"vllm-{version}"
        shutil.copytree(vllm_release(version), target)
        return target

    return copy
