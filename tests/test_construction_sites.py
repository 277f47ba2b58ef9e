"""A class whose every construction site is in scheduler-only code sees only the scheduler's config
(kvlint.analysis.construction_sites): vLLM 0.27.1's `RoutedExpertsManager`, built only by the scheduler."""

from __future__ import annotations

import json

import pytest

from kvlint.analysis.tree_index import build_tree_index
from tests.kvlint_runner import run_kvlint
from tests.test_compositions import files, write_tree

LAYER = "vllm/model_executor/layers/fused_moe/routed_experts_capturer.py"
CAPTURER = """
class RoutedExpertsManager:
    def __init__(self, vllm_config, kv_cache_config):
        self.attn_gid = next(
            gid for gid, g in enumerate(kv_cache_config.kv_cache_groups) if isinstance(g.kv_cache_spec, MLAAttentionSpec)
        )
"""
SCHEDULER = "def build(vllm_config, kv_cache_config):\n    return RoutedExpertsManager(vllm_config, kv_cache_config)\n"
WORKER = "def build(vllm_config, kv_cache_config):\n    return RoutedExpertsManager(vllm_config, kv_cache_config)\n"
PASSED_ON = "def build(vllm_config, kv_cache_config):\n    return make(RoutedExpertsManager, kv_cache_config)\n"


# The same check as a type comparison: a class is a candidate by either form of KV101's test.
BY_TYPE = CAPTURER.replace("isinstance(g.kv_cache_spec, MLAAttentionSpec)", "type(g.kv_cache_spec) is MLAAttentionSpec")


@pytest.mark.parametrize("capturer", [CAPTURER, BY_TYPE])
@pytest.mark.parametrize(("elsewhere", "reported"), [(None, False), (WORKER, True), (PASSED_ON, True)])
def test_a_class_only_the_scheduler_builds_sees_the_flattened_config(tmp_path, capturer, elsewhere, reported):
    assert "MLAAttentionSpec" in capturer
    tree = files(**{LAYER: capturer})
    tree["vllm/v1/core/sched/scheduler.py"] = SCHEDULER
    if elsewhere is not None:
        tree["vllm/v1/worker/runner.py"] = elsewhere
    root = write_tree(tmp_path / "tree", tree)
    assert ("RoutedExpertsManager" in build_tree_index(root).scheduler_built) is not reported
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", LAYER, cwd=root)
    assert bool(json.loads(completed.stdout)) is reported
