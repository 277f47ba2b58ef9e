"""Miniature out-of-tree packages (a KV connector package that supports a range of vLLM releases, one that
pins a release) and the small fake vLLM "releases" they are judged against, offline.

The fake releases are the census miniature of tests/test_compositions.py (a DSA model whose MLA and indexer
layers make one container by default) in two generations: a "modern" one (0.29+: `iter_layer_specs`,
`is_full_attention_spec`, the shared resolver) and an "old" one (0.17: neither). `fake_releases` puts them
where `kvlint.scan.releases.release_sources` would fetch real ones from, and stands in for the package
index's list of vLLM versions.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.errors import ReleaseError
from tests.mini_vllm import write_tree
from tests.test_compositions import INTERFACE, files

MODERN_INTERFACE = (
    INTERFACE
    + """
    def is_full_attention_spec(kv_cache_spec):
        layer_specs = iter_layer_specs(kv_cache_spec)
        return len(layer_specs) > 0 and all(isinstance(s, FullAttentionSpec) for s in layer_specs)
    """
)
OLD_INTERFACE = INTERFACE.split("    def iter_layer_specs")[0]
OLD_UTILS = """
    def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
        return [g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups]
    """

# The classes a plugin's roles are resolved through (kvlint.analysis.plugin_roles): the scheduler and the KV cache
# manager in their scheduler-only modules, the connector base with its two halves, and a connector of the tree.
ROLE_MODULES = {
    "vllm/v1/core/sched/interface.py": "class SchedulerInterface(ABC):\n    pass\n",
    "vllm/v1/core/sched/scheduler.py": "class Scheduler(SchedulerInterface):\n    pass\n",
    "vllm/v1/core/kv_cache_manager.py": "class KVCacheManager:\n    pass\n",
    "vllm/v1/worker/gpu_model_runner.py": "class GPUModelRunner:\n    pass\n",
    "vllm/distributed/kv_transfer/kv_connector/v1/base.py": """
        class KVConnectorBase_V1(ABC):
            def __init__(self, vllm_config, role, kv_cache_config=None):
                pass

            # ==============================
            # Worker-side methods
            # ==============================

            def register_kv_caches(self, kv_caches):
                pass

            # ==============================
            # Scheduler-side methods
            # ==============================

            def get_num_new_matched_tokens(self, request, num_computed_tokens):
                pass

            def update_state_after_alloc(self, request, blocks, num_external_tokens):
                pass
        """,
    "vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py": """
        class OffloadingConnector(KVConnectorBase_V1):
            pass
        """,
}

# The index's list of vLLM releases, as the fake releases see it: a range picks its oldest and newest.
LISTED = ("0.16.0", "0.17.0", "0.29.0", "0.30.0", "0.31.0")


def fake_release(root: Path, version: str) -> Path:
    """A fake release folder (`root/vllm/...`): old before 0.29, modern from 0.29 on."""
    modern = tuple(int(part) for part in version.split(".")[:2]) >= (0, 29)
    tree = files(**{"vllm__v1__kv_cache_interface.py": MODERN_INTERFACE if modern else OLD_INTERFACE})
    tree.update(ROLE_MODULES)
    if not modern:
        tree["vllm/v1/core/kv_cache_utils.py"] = OLD_UTILS
    return write_tree(root / f"vllm-{version}", tree)


def install_fake_releases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fake vLLM releases fetched on demand into tmp_path, and the index's list of versions; returns the
    versions fetched so far."""
    fetched: list[str] = []

    def release_sources(version, quiet=False, cache_dir=None):
        if version not in LISTED:
            raise ReleaseError(f"the index lists no vllm {version}")
        fetched.append(version)
        return fake_release(tmp_path / "releases", version)

    monkeypatch.setattr("kvlint.scan.releases.release_sources", release_sources)
    monkeypatch.setattr("kvlint.scan.release_listing.listed_versions", lambda cache_dir, quiet=False: LISTED)
    return fetched


CONNECTOR = """
    from vllm.v1.kv_cache_interface import AttentionSpec


    class RangeConnectorWorker:
        def register_kv_caches(self, kv_cache_config, vllm_config):
            dcp = vllm_config.parallel_config.decode_context_parallel_size
            sizes = []
            for group in kv_cache_config.kv_cache_groups:
                sizes.append(group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1))
            return sizes

        def attention_groups(self, kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, AttentionSpec)]
    """


def connector_package(root: Path, requirement: str = "vllm>=0.17,<0.31", kvlint_table: str = "") -> Path:
    """A connector package (`root/pyproject.toml`, `root/range_connector/worker.py`) requiring `requirement`."""
    pyproject = f"""
        [project]
        name = "range-connector"
        version = "1.0"
        dependencies = ["torch", "{requirement}"]
        {kvlint_table}
        """
    return write_tree(
        root, {"pyproject.toml": pyproject, "range_connector/__init__.py": "", "range_connector/worker.py": CONNECTOR}
    )
