"""One miniature vLLM for the tests: the interface, the shared resolver and an offloading config that scales
a block size by hand (KV102, with its container check KV101 and its function's divergent path KV103), as
vLLM 0.29.0 had it. It really runs (the upstream-tests mode imports it) and reads to kvlint like the real tree
(`kvlint paths` builds its matrix from it)."""

from __future__ import annotations

import textwrap
from pathlib import Path

CONFIG_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config"
CONFIG_PATH = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"

MINI_VLLM = {
    "vllm/__init__.py": '__version__ = "0.0.mini"\n',
    "vllm/v1/kv_cache_interface.py": """
        class KVCacheSpec:
            def __init__(self, block_size):
                self.block_size = block_size

        class AttentionSpec(KVCacheSpec):
            pass

        class FullAttentionSpec(AttentionSpec):
            pass

        class MLAAttentionSpec(FullAttentionSpec):
            pass

        class MambaSpec(KVCacheSpec):
            pass

        class UniformTypeKVCacheSpecs(KVCacheSpec):
            def __init__(self, block_size, kv_cache_specs):
                super().__init__(block_size)
                self.kv_cache_specs = kv_cache_specs

        def iter_layer_specs(kv_cache_spec):
            if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):  # as vLLM writes it
                return kv_cache_spec.kv_cache_specs.values()
            return (kv_cache_spec,)
        """,
    "vllm/v1/core/kv_cache_utils.py": """
        from vllm.v1.kv_cache_interface import AttentionSpec, iter_layer_specs

        def resolve_dcp_kv_block_size(spec, dcp_world_size):
            layer_specs = iter_layer_specs(spec)
            if len(layer_specs) > 0 and all(isinstance(s, AttentionSpec) for s in layer_specs):
                return spec.block_size * dcp_world_size
            return spec.block_size

        def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
            dcp = vllm_config.parallel_config.decode_context_parallel_size
            return [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in kv_cache_config.kv_cache_groups]
        """,
    CONFIG_PATH: """
        from vllm.v1.kv_cache_interface import AttentionSpec

        def build_offloading_config(vllm_config, kv_cache_config):
            dcp = vllm_config.parallel_config.decode_context_parallel_size
            return [
                group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)
                for group in kv_cache_config.kv_cache_groups
            ]
        """,
}
for _package in ("vllm/v1", "vllm/v1/core", *(CONFIG_PATH.rsplit("/", n)[0] for n in range(1, 6))):
    MINI_VLLM.setdefault(f"{_package}/__init__.py", "")


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root
