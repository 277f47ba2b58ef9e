"""KV101's fix examples (rules/_unwrap_fix.py): the tree's helper, every layer tested, the call-site unwrap, an
unsafe composition, a guarded use (no fix), and a tree with no unwrapping idiom. Part of KV101's INVALID examples,
so they are its tests and its `explain` text. Also the census's VALID examples: a hidden-state group (never a
container), a value only the scheduler consumes, a validation the scheduler half repeats."""

from __future__ import annotations

from kvlint import Example, Severity

UNWRAP_EXAMPLES = [
    Example(
        """
            from vllm.v1.kv_cache_interface import FullAttentionSpec

            def zero_blocks(self):
                for group in self.kv_cache_config.kv_cache_groups:
                    if not isinstance(group.kv_cache_spec, FullAttentionSpec):
                        continue
                    yield group
            """,
        # the tree's own helper for the class: every layer full attention, as vLLM's callers read it
        fixed="""
            from vllm.v1.kv_cache_interface import is_full_attention_spec

            def zero_blocks(self):
                for group in self.kv_cache_config.kv_cache_groups:
                    if not is_full_attention_spec(group.kv_cache_spec):
                        continue
                    yield group
            """,
        path="vllm/v1/worker/cpu_model_runner.py",
        severity=Severity.ERROR,
    ),
    Example(
        """
            def build(kv_cache_config):
                def certifiable(spec):
                    if not isinstance(spec, AttentionSpec):
                        return False
                    return type(spec) is MLAAttentionSpec

                return all(certifiable(group.kv_cache_spec) for group in kv_cache_config.kv_cache_groups)
            """,
        # unwrapped where the group spec is passed, as vLLM 0.30.0 did; unsafe: a container of full-attention
        # and MLA layers answers `type(spec) is MLAAttentionSpec` both ways, the author picks `all` or `any`
        fixed="""
            from vllm.v1.kv_cache_interface import iter_layer_specs

            def build(kv_cache_config):
                def certifiable(spec):
                    if not isinstance(spec, AttentionSpec):
                        return False
                    return type(spec) is MLAAttentionSpec

                return all(certifiable(spec) for group in kv_cache_config.kv_cache_groups for spec in iter_layer_specs(group.kv_cache_spec))
            """,
        unsafe=True,
        severity=Severity.ERROR,
    ),
    Example(
        """
            from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheSpec

            def certifiable(spec: KVCacheSpec) -> bool:
                return isinstance(spec, AttentionSpec) and spec.block_size % 16 == 0

            def build(kv_cache_config):
                return all(
                    certifiable(group.kv_cache_spec)
                    for group in kv_cache_config.kv_cache_groups
                )
            """,
        # every composition the tree builds is all attention or none: safe, the layers' answer
        fixed="""
            from vllm.v1.kv_cache_interface import (
                AttentionSpec,
                KVCacheSpec,
                iter_layer_specs,
            )

            def certifiable(spec: KVCacheSpec) -> bool:
                return isinstance(spec, AttentionSpec) and spec.block_size % 16 == 0

            def build(kv_cache_config):
                return all(
                    certifiable(spec)
                    for group in kv_cache_config.kv_cache_groups
                    for spec in iter_layer_specs(group.kv_cache_spec)
                )
            """,
        severity=Severity.ERROR,
    ),
    Example(
        """
            from vllm.v1.kv_cache_interface import MambaSpec

            def mamba_groups(kv_cache_config):
                # the packed layout merges Mamba layers into one group spec
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]
            """,
        # no helper for the class: every layer tested; safe, no container mixes Mamba with other layers
        fixed="""
            from vllm.v1.kv_cache_interface import MambaSpec, iter_layer_specs

            def mamba_groups(kv_cache_config):
                # the packed layout merges Mamba layers into one group spec
                return [g for g in kv_cache_config.kv_cache_groups if all(
                    isinstance(spec, MambaSpec) for spec in iter_layer_specs(g.kv_cache_spec)
                )]
            """,
        severity=Severity.ERROR,
    ),
    Example(
        """
            def mla_groups(kv_cache_config):
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MLAAttentionSpec)]
            """,
        # a DSA container mixes MLA and full-attention layers: `any` and `all` differ, the author chooses
        fixed="""
            from vllm.v1.kv_cache_interface import iter_layer_specs

            def mla_groups(kv_cache_config):
                return [g for g in kv_cache_config.kv_cache_groups if all(
                    isinstance(spec, MLAAttentionSpec) for spec in iter_layer_specs(g.kv_cache_spec)
                )]
            """,
        unsafe=True,
        severity=Severity.ERROR,
    ),
    Example(
        """
            def mamba_sizes(kv_cache_config):
                for g in kv_cache_config.kv_cache_groups:
                    if isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.mamba_type == "mamba2":
                        yield g
            """,
        # `g.kv_cache_spec.mamba_type` is read under the check: a container passing it has no such field, so
        # no fix (rewriting the check alone would crash there); the message says to unwrap that use too
        severity=Severity.ERROR,
    ),
    Example(
        """
            def mamba_groups(kv_cache_config):
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]
            """,
        tree_functions=(),  # a tree with neither `iter_layer_specs` nor a helper (vLLM 0.28): no fix
        severity=Severity.ERROR,
    ),
]

# Checks the census clears (kvlint.analysis.census.compositions, consumers): part of KV101's VALID examples.
CENSUS_VALID_EXAMPLES = [
    Example(
        """
            def hidden_state_groups(kv_cache_config):
                # hidden-state layers always get a plain group of their own
                return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, HiddenStateCacheSpec)]
            """
    ),
    Example(
        """
            class FooConnector:
                def __init__(self, vllm_config, role, kv_cache_config):
                    self._pulls_state = any(
                        isinstance(g.kv_cache_spec, MambaSpec) for g in kv_cache_config.transfer_groups
                    )

                @property
                def supports_divergent_local_hybrid_hits(self):
                    return self._pulls_state  # only the scheduler reads it, on its flattened config
            """
    ),
    Example(
        """
            class FooConnector:
                @staticmethod
                def _validate(kv_cache_config):
                    unsupported = []
                    for group in kv_cache_config.kv_cache_groups:
                        if isinstance(group.kv_cache_spec, MambaSpec) and group.kv_cache_spec.mode != "align":
                            unsupported.append("mamba")
                    if unsupported:
                        raise ValueError(unsupported)

                def __init__(self, vllm_config, role, kv_cache_config):
                    self._validate(kv_cache_config)  # the scheduler half raises on its flattened config too
            """
    ),
]

# Two of KV101's INVALID examples that are warnings: a check guarding a use through a walrus, and a single
# group's check in a file read without its tree.
WARNING_EXAMPLES = [
    Example(
        """
            def warm_replayssm(runner, forward_context):
                for group in runner.kv_cache_config.kv_cache_groups:
                    spec = group.kv_cache_spec
                    if not isinstance(spec, MambaSpec):
                        continue
                    yield [
                        layer
                        for name in group.layer_names
                        if isinstance(layer := forward_context[name], MambaBase) and layer.use_flashinfer_replayssm
                    ]
            """,
        severity=Severity.WARNING,
    ),
    Example(
        """
            def single_group(kv_cache_config):
                spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
                return isinstance(spec, FullAttentionSpec)
            """,
        has_resolver=False,  # no tree read: whether a container of full-attention layers is built is open
        severity=Severity.WARNING,
    ),
]
