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

Each copy is compared kind by kind with the tree's rule (the resolver; without one the scheduler's
`resolve_kv_cache_block_sizes`), counting what decides its factor — an inline gate, an enclosing `if`, a
factor set on an earlier line or passed per kind by callers in the same module — and the kinds the function
already excluded (`assert isinstance(spec, …)`, an earlier `if …: return`). An error when a kind that
reaches it and that vLLM accepts under DCP gets another token span (named, with both spans); a warning when
it agrees for every kind today (it drifts when the resolver changes), when only kinds the tree rejects under
DCP differ, or when what decides it is not in the file. Nothing without the resolver or a scheduler path.

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
Safe when the call gives every plain (non-container) kind reaching it the span it has now: only containers
change (the intended fix). Unsafe otherwise (an unconditional product also scales Mamba; a different class
set changes other kinds too; a resolver reading `dcp_sharded` in a tree that clears the flag on some spec,
for code that does not follow the flag), and for an ungated product of a size a public function's callers
pass (another module's callers may pass the raw size). No fix without a shared resolver (vLLM < 0.29), nor
for an augmented assignment, whose rewrite needs a human.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from kvlint import Example, Rule, Severity
from kvlint.analysis.ast_candidates import could_hold_scaling
from kvlint.analysis.hybrid_witness import hybrid_witness
from kvlint.analysis.runner_reach import selected_by
from kvlint.analysis.scaling import match_scaling
from kvlint.analysis.vocabulary import RESOLVER_NAME, SCHEDULER_REFERENCE, dcp_aliases
from kvlint.rules._resolver_call import FIX_TITLE as _FIX_TITLE
from kvlint.rules._resolver_call import resolver_call_fix, verdict_for, why_no_fix
from kvlint.rules._scaling_verdict import describe, one_line, remedy, severity_of

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
    # Worded per verdict (rules/_scaling_verdict.py): the kind and both spans, "agrees today", or what is unsettled.
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
            severity=Severity.ERROR,
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
            severity=Severity.ERROR,
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
            severity=Severity.WARNING,
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
            severity=Severity.ERROR,
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
            severity=Severity.WARNING,
        ),
        Example(
            """
            def __init__(self, kv_cache_spec, dcp_world_size):
                self.block_size = kv_cache_spec.block_size
                if dcp_world_size > 1:
                    self.block_size *= dcp_world_size
            """,
            path="vllm/v1/core/single_type_kv_cache_manager.py",
            severity=Severity.WARNING,
        ),
        Example(
            """
            def span(spec, dcp):
                return spec.block_size * (dcp if isinstance(spec, AttentionSpec) else 1)
            """,
            has_resolver=False,
            severity=Severity.WARNING,
        ),
        Example(
            """
            def page_spans(kv_cache_config, dcp):
                for group in kv_cache_config.kv_cache_groups:
                    for layer in iter_layer_specs(group.kv_cache_spec):
                        # a layer's spec, the resolver's own test: it agrees today, and drifts with it
                        yield layer.block_size * (dcp if isinstance(layer, AttentionSpec) else 1)
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def page_spans(kv_cache_config, dcp):
                for group in kv_cache_config.kv_cache_groups:
                    for layer in iter_layer_specs(group.kv_cache_spec):
                        # a layer's spec, the resolver's own test: it agrees today, and drifts with it
                        yield resolve_dcp_kv_block_size(layer, dcp)
            """,
            severity=Severity.WARNING,
        ),
        Example(
            """
            class FooManager:
                def __init__(self, kv_cache_spec, dcp_world_size):
                    # the factor is decided per kind on an earlier line, the resolver's way
                    self.dcp_world_size = dcp_world_size if isinstance(kv_cache_spec, AttentionSpec) else 1
                    self.block_size = kv_cache_spec.block_size * self.dcp_world_size
            """,
            path="vllm/v1/core/foo_manager.py",
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            class FooManager:
                def __init__(self, kv_cache_spec, dcp_world_size):
                    # the factor is decided per kind on an earlier line, the resolver's way
                    self.dcp_world_size = dcp_world_size if isinstance(kv_cache_spec, AttentionSpec) else 1
                    self.block_size = resolve_dcp_kv_block_size(kv_cache_spec, self.dcp_world_size)
            """,
            severity=Severity.WARNING,
        ),
        Example(
            """
            def warmup_blocks(kv_cache_config, vllm_config):
                dcp_world_size = vllm_config.parallel_config.decode_context_parallel_size
                for group in kv_cache_config.kv_cache_groups:
                    for layer in iter_layer_specs(group.kv_cache_spec):
                        block_size = layer.block_size
                        if isinstance(layer, AttentionSpec):  # the gate is the enclosing `if`
                            block_size *= dcp_world_size
                        yield block_size
            """,
            severity=Severity.WARNING,
        ),
        Example(
            """
            class FooConnectorScheduler:
                def tokens(self, spec, dcp_size):
                    return spec.block_size * dcp_size  # the caller below passes a per-kind size

                def spans(self, kv_cache_config, dcp):
                    return [
                        self.tokens(g.kv_cache_spec, dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                        for g in kv_cache_config.kv_cache_groups
                    ]
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            class FooConnectorScheduler:
                def tokens(self, spec, dcp_size):
                    return resolve_dcp_kv_block_size(spec, dcp_size)  # the caller below passes a per-kind size

                def spans(self, kv_cache_config, dcp):
                    return [
                        self.tokens(g.kv_cache_spec, dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                        for g in kv_cache_config.kv_cache_groups
                    ]
            """,
            unsafe=True,  # `tokens` is public: a caller in another module may pass the raw DCP size
            severity=Severity.WARNING,
        ),
        Example(
            """
            def lazy_target_blocks(kv_cache_config, vllm_config):
                dcp = vllm_config.parallel_config.decode_context_parallel_size
                spans = []
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    spans.append(spec.block_size * dcp)  # a Mamba group is scaled too
                return spans
            """,
            path="vllm/v1/simple_kv_offload/manager.py",
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def lazy_target_blocks(kv_cache_config, vllm_config):
                dcp = vllm_config.parallel_config.decode_context_parallel_size
                spans = []
                for g in kv_cache_config.kv_cache_groups:
                    spec = g.kv_cache_spec
                    spans.append(resolve_dcp_kv_block_size(spec, dcp))  # a Mamba group is scaled too
                return spans
            """,
            unsafe=True,
            severity=Severity.ERROR,
        ),
        Example(
            """
            def swa_span(kv_cache_spec, vllm_config):
                assert isinstance(kv_cache_spec, SlidingWindowSpec)  # only attention reaches the product
                dcp = vllm_config.parallel_config.decode_context_parallel_size
                return kv_cache_spec.block_size * dcp
            """,
            fixed="""
            from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

            def swa_span(kv_cache_spec, vllm_config):
                assert isinstance(kv_cache_spec, SlidingWindowSpec)  # only attention reaches the product
                dcp = vllm_config.parallel_config.decode_context_parallel_size
                return resolve_dcp_kv_block_size(kv_cache_spec, dcp)
            """,
            severity=Severity.WARNING,
        ),
    ]

    could_report = classmethod(lambda cls, pre: could_hold_scaling(pre.text, lambda: pre.nodes))  # before libcst

    @cached_property
    def aliases(self) -> frozenset[str]:
        return dcp_aliases(self.context.source)

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
        project = self.context.project
        verdict = verdict_for(self, scaling)
        table = project.kind_table()
        function = self.flow.enclosing_function(node)
        # The resolver itself, or (without one) the scheduler's own path: the rule everything is compared with.
        own = {RESOLVER_NAME} | ({table.reference, SCHEDULER_REFERENCE} if table and not table.has_resolver else set())
        name = function.name.value if function is not None else None
        if name and ({name} | {f"{c}.{name}" for c in self.flow.enclosing_class_names(node)}) & own:
            return  # the yardstick itself; where it disagrees with the scheduler, KV103 reports it
        if verdict is None and project.resolver_view.source == "none" and not (table and table.reference):
            return  # no yardstick (the docstring's last line)
        unavailable = why_no_fix(project, scaling, node)
        spec = one_line(self.code_of(scaling.spec), None) if scaling.spec is not None else None
        dcp, allocator = one_line(self.code_of(scaling.dcp), None), table is not None and table.is_allocator
        by_name = remedy(project.resolver_view, table.reference if table else "", spec, dcp, allocator=allocator)
        witness = hybrid_witness(project.census, project.hierarchy, verdict)  # None: the kind needs no model
        unproven = selected_by(project.runner_selection, self.context.module_path)  # a runner a setting picks
        message = describe(one_line(self.code_of(node, own_parentheses=False)), verdict, by_name, witness, unproven)
        fix = None if unavailable else (lambda: resolver_call_fix(self, scaling))
        severity = severity_of(verdict, witness, unproven)
        self.report(node, message, fix=fix, severity=severity, fix_unavailable=unavailable)
