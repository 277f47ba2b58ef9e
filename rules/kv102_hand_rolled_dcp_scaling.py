"""## What it does
Finds a KV cache block size multiplied by the decode-context-parallel (DCP) size outside the shared
resolver `resolve_dcp_kv_block_size(spec, dcp)`: `spec.block_size * (dcp if isinstance(spec, AttentionSpec)
else 1)`, `spec.block_size * dcp`, `block_size *= dcp_world_size`.

## Why is this bad?
Every component that sizes blocks (the scheduler, the KV cache managers, every KV connector) must agree on
a group's token span. The scheduler goes through the resolver, which unwraps `UniformTypeKVCacheSpecs`
containers and leaves Mamba state unscaled. A hand-written copy drifts: its `isinstance` gate is False for
a DSA container, or it scales Mamba too. In vLLM 0.29.0 this kills startup with
`AssertionError: tokens_per_block=16 not divisible by tokens_per_hash=32` (CPU offload, DCP=2, DSA model).

## Example
```python
tokens_per_block = group.kv_cache_spec.block_size * (
    parallel_config.decode_context_parallel_size
    if isinstance(group.kv_cache_spec, AttentionSpec)
    else 1
)
```

## Use instead
```python
tokens_per_block = resolve_dcp_kv_block_size(
    group.kv_cache_spec, parallel_config.decode_context_parallel_size
)
```

## Fix safety
Safe when the expression has the canonical shape `S.block_size * (D if isinstance(S, C) else 1)` and the
classes `C` scale exactly the spec classes the tree's resolver scales: the result then changes only for
containers, which is the intended fix. Unsafe otherwise (an unconditional product also scales Mamba; a
different class set changes other kinds too). No fix where the tree has no shared resolver (vLLM < 0.29),
and none for an augmented assignment, whose rewrite needs a human.
"""

from __future__ import annotations

import libcst as cst

from kvlint import Example, Rule
from kvlint.analysis.scaling import match_scaling
from kvlint.analysis.vocabulary import RESOLVER_NAME, dcp_aliases
from kvlint.rules._resolver_call import FIX_TITLE as _FIX_TITLE
from kvlint.rules._resolver_call import NO_RESOLVER, resolver_call_fix

_IMPORTS = """\
from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
from vllm.v1.kv_cache_interface import AttentionSpec
"""


class HandRolledDcpScaling(Rule):
    __doc__ = __doc__
    CODE = "KV102"
    NAME = "hand-rolled-dcp-scaling"
    # kvlint.engine.grouping: decides a DCP factor; folds with a whole-function finding on its function.
    ROOT_CAUSE_ROLE = "decision"
    MESSAGE = "`{expression}` scales a block size by the DCP size by hand; {why}"
    FIX_TITLE = _FIX_TITLE
    # Every DCP size (or alias of one) is named after dcp / decode_context_parallel somewhere in the file.
    TRIGGERS = (("block_size",), ("dcp", "decode_context_parallel"))

    VALID = [
        Example(
            """
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def tokens_per_block(group, parallel_config):
                return resolve_dcp_kv_block_size(
                    group.kv_cache_spec, parallel_config.decode_context_parallel_size
                )
            """
        ),
        Example(
            """
            def resolve_dcp_kv_block_size(spec, dcp_world_size):
                return spec.block_size * dcp_world_size  # the resolver itself
            """,
            path="vllm/v1/core/kv_cache_utils.py",
        ),
        Example(
            """
            def scheduler_block_size(cache_config, dcp):
                return cache_config.block_size * dcp  # the engine's block size, not a spec's
            """
        ),
        Example(
            """
            def scaled(spec, tensor_parallel_size):
                return spec.block_size * tensor_parallel_size  # not a DCP size
            """
        ),
    ]
    INVALID = [
        Example(
            _IMPORTS
            + """
def build(kv_cache_config, parallel_config):
    return [
        group.kv_cache_spec.block_size
        * (
            parallel_config.decode_context_parallel_size
            if isinstance(group.kv_cache_spec, AttentionSpec)
            else 1
        )
        for group in kv_cache_config.kv_cache_groups
    ]
""",
            fixed="""\
from vllm.v1.core.kv_cache_utils import (
    resolve_dcp_kv_block_size,
    resolve_kv_cache_block_sizes,
)

def build(kv_cache_config, parallel_config):
    return [
        resolve_dcp_kv_block_size(
            group.kv_cache_spec,
            parallel_config.decode_context_parallel_size,
        )
        for group in kv_cache_config.kv_cache_groups
    ]
""",
        ),
        Example(
            """
            from vllm.v1.kv_cache_interface import FullAttentionSpec

            def span(spec, dcp):
                return spec.block_size * (dcp if isinstance(spec, FullAttentionSpec) else 1)
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def span(spec, dcp):
                return resolve_dcp_kv_block_size(spec, dcp)
            """,
            unsafe=True,
        ),
        Example(
            """
            def target_blocks(kv_cache_config, cp_world_size):
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    block_size = spec.block_size * cp_world_size
                    yield block_size

            def caller(kv_cache_config, dcp_world_size):
                return target_blocks(kv_cache_config, cp_world_size=dcp_world_size)
            """,
            path="vllm/v1/simple_kv_offload/manager.py",
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def target_blocks(kv_cache_config, cp_world_size):
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    block_size = resolve_dcp_kv_block_size(spec, cp_world_size)
                    yield block_size

            def caller(kv_cache_config, dcp_world_size):
                return target_blocks(kv_cache_config, cp_world_size=dcp_world_size)
            """,
            unsafe=True,
        ),
        Example(
            """
            class OffloadScheduler:
                def bind(self, kv_cache_groups, g, dcp_world_size):
                    self.cp_world_size = dcp_world_size
                    self.g_block_size: int = (
                        kv_cache_groups[
                            g
                        ].kv_cache_spec.block_size
                        * self.cp_world_size
                    )
            """,
            path="vllm/v1/simple_kv_offload/manager.py",
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            class OffloadScheduler:
                def bind(self, kv_cache_groups, g, dcp_world_size):
                    self.cp_world_size = dcp_world_size
                    self.g_block_size: int = resolve_dcp_kv_block_size(
                        kv_cache_groups[g].kv_cache_spec,
                        self.cp_world_size,
                    )
            """,
            unsafe=True,
        ),
        Example(
            """
            def resolve_kv_cache_block_sizes(kv_cache_config, dcp):
                return [
                    g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                    for g in kv_cache_config.kv_cache_groups
                ]
            """,
            path="vllm/v1/core/kv_cache_utils.py",  # the resolver's own module: no self-import
            fixed="""
            def resolve_kv_cache_block_sizes(kv_cache_config, dcp):
                return [
                    resolve_dcp_kv_block_size(g.kv_cache_spec, dcp)
                    for g in kv_cache_config.kv_cache_groups
                ]
            """,
        ),
        Example(
            """
            def kv_block_size(spec, dcp_size):
                # vLLM 0.31+: the resolver's own `dcp_sharded` rule, copied by hand
                return spec.block_size * (dcp_size if spec.dcp_sharded else 1)
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def kv_block_size(spec, dcp_size):
                # vLLM 0.31+: the resolver's own `dcp_sharded` rule, copied by hand
                return resolve_dcp_kv_block_size(spec, dcp_size)
            """,
            unsafe=True,  # safe in a tree whose resolver reads `dcp_sharded`; this example's tree checks classes
        ),
        Example(
            """
            def __init__(self, kv_cache_spec, dcp_world_size):
                self.block_size = kv_cache_spec.block_size
                if dcp_world_size > 1:
                    self.block_size *= dcp_world_size
            """,
            path="vllm/v1/core/single_type_kv_cache_manager.py",
        ),
        Example(
            """
            def span(spec, dcp):
                return spec.block_size * (dcp if isinstance(spec, AttentionSpec) else 1)
            """,
            has_resolver=False,
        ),
    ]

    def __init__(self, context):
        super().__init__(context)
        self._aliases: frozenset[str] | None = None

    @property
    def aliases(self) -> frozenset[str]:
        if self._aliases is None:
            self._aliases = dcp_aliases(self.context.source)
        return self._aliases

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Multiply):
            self._check(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.MultiplyAssign):
            self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        scaling = match_scaling(node, self.flow, self.aliases)
        if scaling is None:
            return
        function = self.flow.enclosing_function(node)
        if function is not None and function.name.value == RESOLVER_NAME:
            return
        unavailable = None
        if not self.context.project.has_resolver:
            unavailable = NO_RESOLVER
        elif scaling.spec is None or not isinstance(node, cst.BaseExpression):
            unavailable = f"no automatic fix for this shape: call `{RESOLVER_NAME}(spec, dcp)` by hand"
        self.report(
            node,
            self.MESSAGE.format(expression=_short(self.code_of(node)), why=self._why(scaling, function)),
            fix=None if unavailable else (lambda: resolver_call_fix(self, scaling)),
            fix_unavailable=unavailable,
        )

    def _why(self, scaling, function: cst.FunctionDef | None) -> str:
        if scaling.gate is None and _is_parameter(scaling.dcp, function):
            # The caller may already pass a per-kind size (vLLM's coordinator does): say what is known.
            return (
                f"`{scaling.dcp.value}` comes from its caller, so whether this agrees with `{RESOLVER_NAME}` "
                "(which leaves non-attention state unscaled) rests on every caller's choice of that size"
            )
        if scaling.gate is None:
            return (
                "it applies the DCP size whatever the spec kind, while "
                f"`{RESOLVER_NAME}` leaves non-attention (Mamba) state unscaled"
            )
        if scaling.gate_reads_dcp_sharded:
            return (
                f"it repeats the `dcp_sharded` rule of `{RESOLVER_NAME}`, which a call would keep in "
                "agreement with the scheduler by construction"
            )
        if scaling.canonical:
            classes = ", ".join(sorted(scaling.gate_classes))
            return (
                f"its `isinstance(…, {classes})` gate is False for a UniformTypeKVCacheSpecs container, "
                f"which `{RESOLVER_NAME}` unwraps and scales"
            )
        return f"its gate may answer differently from `{RESOLVER_NAME}`"


def _is_parameter(expression: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
    if function is None or not isinstance(expression, cst.Name):
        return False
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    return any(p.name.value == expression.value for p in every)


def _short(code: str) -> str:
    flat = " ".join(code.split())
    return flat if len(flat) <= 60 else flat[:57] + "…"
