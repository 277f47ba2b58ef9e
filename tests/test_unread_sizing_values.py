"""A sizing site's value that the branch a kind takes never reads gives that kind no size (issue 26: the
lazy-offload estimate adds 2 blocks for Mamba and never reads the span it computed first). Miniature trees."""

from __future__ import annotations

from kvlint.analysis.sizing.divergences import PathDivergence
from tests.test_semantics import analyse, make_tree
from tests.test_witness_semantics import COORDINATOR_PER_KIND, _tree_027

OFFLOAD_PATH = "vllm/v1/simple_kv_offload/manager.py"

# vLLM 0.27.1 simple_kv_offload/manager.py:_estimate_lazy_target_blocks, abridged.
LAZY_ESTIMATE = """
class SimpleCPUOffloadScheduler:
    def __init__(self, kv_cache_config, vllm_config, dcp_world_size):
        self.target = self._estimate_lazy_target_blocks(kv_cache_config, 8192, cp_world_size=dcp_world_size)

    @staticmethod
    def _estimate_lazy_target_blocks(kv_cache_config, max_num_batched_tokens, cp_world_size=1):
        target = 0
        for g in kv_cache_config.kv_cache_groups:
            spec = g.kv_cache_spec
            block_size = spec.block_size * cp_world_size
            if isinstance(spec, MambaSpec):
                target += 2
            else:
                target += cdiv(max_num_batched_tokens, block_size)
        return target
"""


def _offload_divergences(tmp_path, source: str) -> dict[str, PathDivergence]:
    root = _tree_027(tmp_path, COORDINATOR_PER_KIND)
    make_tree(root, {OFFLOAD_PATH: source})
    return {d.qualname: d for d in analyse(root).divergences if isinstance(d, PathDivergence)}


def test_a_span_the_mamba_branch_never_reads_is_no_divergence(tmp_path):
    paths = _offload_divergences(tmp_path, LAZY_ESTIMATE)
    assert "SimpleCPUOffloadScheduler._estimate_lazy_target_blocks" not in paths


def test_a_span_the_mamba_branch_reads_still_diverges(tmp_path):
    reading = LAZY_ESTIMATE.replace("target += 2", "target += block_size")
    divergence = _offload_divergences(tmp_path, reading)["SimpleCPUOffloadScheduler._estimate_lazy_target_blocks"]
    assert divergence.kind == "MambaSpec" and divergence.tokens == "32"


def test_a_span_rebound_before_any_read_sized_nothing(tmp_path):
    rebound = LAZY_ESTIMATE.replace(
        "            if isinstance(spec, MambaSpec):\n                target += 2",
        "            if isinstance(spec, MambaSpec):\n                block_size = 2\n                target += block_size",
    )
    assert "SimpleCPUOffloadScheduler._estimate_lazy_target_blocks" not in _offload_divergences(tmp_path, rebound)
