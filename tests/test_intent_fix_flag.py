"""KV102's resolver-call fix is safe only where it keeps every plain spec's span: in a tree whose resolver reads
`dcp_sharded` (vLLM 0.31+), an instance's flag, not its class, decides what the resolver gives, and a tree that
clears the flag on some spec (0.32.0's V2 runner, for a draft model's layers) makes a kind's class no proof.
Miniature trees, one per behaviour."""

from __future__ import annotations

from kvlint.scan.config import Config
from kvlint.scan.runner import scan
from tests.test_semantics import INTERFACE_033, KV_CACHE_UTILS, RESOLVER_033, make_tree

MANAGER = "vllm/v1/core/single_type_kv_cache_manager.py"

# A span for full-attention specs only, scaled by what the callers pass, for every such spec.
UNGATED = """
from vllm.v1.kv_cache_interface import FullAttentionSpec


def span(kv_cache_spec, dcp_world_size):
    assert isinstance(kv_cache_spec, FullAttentionSpec)
    return kv_cache_spec.block_size * dcp_world_size
"""

# The same size, kept only for a spec whose flag is set (vLLM 0.32.0's manager constructor).
FOLLOWS_FLAG = """
from vllm.v1.kv_cache_interface import FullAttentionSpec


class Manager:
    def __init__(self, kv_cache_spec, dcp_world_size):
        assert isinstance(kv_cache_spec, FullAttentionSpec)
        self.dcp_world_size = dcp_world_size if kv_cache_spec.dcp_sharded else 1
        self.block_size = kv_cache_spec.block_size * self.dcp_world_size
"""

CLEARS = """
from dataclasses import replace


def draft_specs(specs):
    return {name: replace(spec, dcp_sharded=False) for name, spec in specs.items()}
"""


def _applicability(tmp_path, manager: str, clears: bool) -> str:
    files = {"vllm/v1/kv_cache_interface.py": INTERFACE_033, KV_CACHE_UTILS: RESOLVER_033, MANAGER: manager}
    if clears:
        files["vllm/v1/worker/gpu/model_runner.py"] = CLEARS
    root = make_tree(tmp_path, files)
    result = scan([root / MANAGER], Config(), None, [], jobs=1)
    [finding] = [f for r in result.files for f in r.findings if f.code == "KV102"]
    return finding.fix.applicability.value


def test_a_class_proves_the_resolvers_span_only_where_no_spec_has_its_flag_cleared(tmp_path):
    assert _applicability(tmp_path / "kept", UNGATED, clears=False) == "safe"
    # A full-attention spec with its flag cleared: the resolver leaves it unscaled, the product scaled it.
    assert _applicability(tmp_path / "cleared", UNGATED, clears=True) == "unsafe"


def test_code_that_follows_the_flag_keeps_every_plain_span_whatever_the_instance(tmp_path):
    assert _applicability(tmp_path / "kept", FOLLOWS_FLAG, clears=False) == "safe"
    assert _applicability(tmp_path / "cleared", FOLLOWS_FLAG, clears=True) == "safe"
