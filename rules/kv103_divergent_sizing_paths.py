"""## What it does
Finds a connector or KV cache manager path that derives a KV cache group's token span (block size times
the DCP factor) by its own code, and answers differently from the scheduler's
`resolve_kv_cache_block_sizes` for some kind of group. The finding names both paths (`module:function`) and
a counterexample: the group kind and DCP size where they disagree.

Each kind is evaluated statically from the scanned tree's own code (its spec class hierarchy, its resolver,
its helpers) as the path sees it: scheduler-side code gets containers flattened to their first layer's
spec, worker-side code gets the `UniformTypeKVCacheSpecs` container itself, and code built for both roles
(e.g. `build_offloading_config`) sees both.

## Why is this bad?
Every component that sizes blocks must agree on a group's token span. When a connector computes
`block_size * (dcp if isinstance(spec, AttentionSpec) else 1)` on a worker's config, a DSA group (MLA and
indexer layers merged into one `UniformTypeKVCacheSpecs`) loses its DCP factor while the scheduler keeps it.
vLLM 0.29.0, CPU offload, DCP=2, DSA model: `AssertionError: tokens_per_block=16 not divisible by
tokens_per_hash=32`.

A tree without the shared resolver (vLLM < 0.29) sizes what it allocates in the KV cache managers: the
coordinator hands each manager a DCP size and the manager scales its block size by it. Every other path is
compared with that allocation, and a manager that disagrees with `resolve_kv_cache_block_sizes` for a
config of several groups is itself the finding (the message names what the coordinator hands it, and where).

An error when the counterexample is a kind vLLM accepts under DCP; a warning when every disagreeing kind
is one the tree itself rejects when DCP > 1 (the message says which assertion).

## Example
```python
def build_offloading_config(vllm_config, kv_cache_config):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    return [
        group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)
        for group in kv_cache_config.kv_cache_groups
    ]
```

## Use instead
```python
def build_offloading_config(vllm_config, kv_cache_config):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    return [resolve_dcp_kv_block_size(group.kv_cache_spec, dcp) for group in kv_cache_config.kv_cache_groups]
```

## Fix safety
No automatic fix: the divergent path may be any shape. When it is the canonical hand-written product,
KV102 rewrites it to `resolve_dcp_kv_block_size(spec, dcp)`, after which both paths agree by construction.
"""

from __future__ import annotations

from kvlint import Example, Message, Rule
from kvlint.analysis.sizing.divergences import PathDivergence
from kvlint.rules._scaling_verdict import remedy as scaling_remedy
from kvlint.rules._sizing_report import ONLY_REJECTED, SizingReport, listing, outside_vllm, short_name
from kvlint.types import Severity

_VIEWS = {
    "group": " (worker view: the container as given)",
    "scheduler": " (scheduler view: flattened to its first layer)",
}


class DivergentSizingPaths(SizingReport, Rule):
    __doc__ = __doc__
    CODE = "KV103"
    NAME = "divergent-sizing-paths"
    # kvlint.engine.grouping: the whole function's outcome; the decisions in it fold into this finding.
    ROOT_CAUSE_ROLE = "outcome"
    MESSAGE = "`{path}` gives {tokens} tokens per block for {kind} at DCP={dcp}{view} where {scheduler} gives {expected}{also}"
    HEADLINE = "`{function}` gives {tokens} tokens per block for {kind} at DCP={dcp}, the scheduler {expected}"
    REPORTS = PathDivergence
    COMPARED_WITH = ("reference", "resolver")
    # A finding covers the divergent path's whole def: a review points at the changed line it sits on.
    REPORTS_WHOLE_FUNCTION = True

    TRIGGERS = (("block_size",), ("dcp", "decode_context_parallel", "cp_world_size"))

    VALID = [
        Example(
            """
            def build_groups(vllm_config, kv_cache_config):
                dcp = vllm_config.parallel_config.decode_context_parallel_size
                return [
                    resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)
                    for group in kv_cache_config.kv_cache_groups
                ]
            """
        ),
        Example(
            """
            class FooConnectorScheduler:
                def spans(self, kv_cache_config, dcp):
                    # the scheduler's config is flattened: a DSA group arrives as its MLA layer
                    return [
                        g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                        for g in kv_cache_config.kv_cache_groups
                    ]
            """
        ),
    ]
    INVALID = [
        Example(
            """
            def build_groups(vllm_config, kv_cache_config):
                parallel_config = vllm_config.parallel_config
                return [
                    group.kv_cache_spec.block_size
                    * (
                        parallel_config.decode_context_parallel_size
                        if isinstance(group.kv_cache_spec, AttentionSpec)
                        else 1
                    )
                    for group in kv_cache_config.kv_cache_groups
                ]
            """
        ),
        Example(
            """
            class FooManager:
                def __init__(self, kv_cache_config, dcp_world_size):
                    # scales Mamba state too: the scheduler does not
                    self.spans = [g.kv_cache_spec.block_size * dcp_world_size for g in kv_cache_config.kv_cache_groups]
            """,
            path="vllm/v1/core/foo_manager.py",
        ),
    ]

    @classmethod
    def describe(cls, divergence: PathDivergence, view=None) -> Message:
        message = cls.MESSAGE.format(
            path=divergence.path,
            tokens=divergence.tokens,
            kind=divergence.kind,
            dcp=divergence.dcp,
            view=_VIEWS.get(divergence.view or "", ""),
            scheduler=(
                f"vLLM's scheduler `{divergence.scheduler}` (this code has none of its own)"
                if outside_vllm(view)
                else f"the scheduler's `{divergence.scheduler}`"
            ),
            expected=divergence.expected_tokens,
            also=f"; also differs for {listing(divergence.also)}" if divergence.also else "",
        )
        if divergence.handed_by is not None:
            handed, where = divergence.handed_by
            message += (
                f" for a config of several groups: the coordinator hands each manager `{handed}` ({where}) and "
                f"the manager scales its blocks by it, so vLLM allocates other blocks than its scheduler sizes"
            )
        if divergence.rejected_under_dcp is not None:
            message += ONLY_REJECTED.format(reasons=divergence.rejected_under_dcp)
        headline = cls.HEADLINE.format(
            function=short_name(divergence.path),
            tokens=divergence.tokens,
            kind=divergence.kind,
            dcp=divergence.dcp,
            expected=divergence.expected_tokens,
        )
        remedy = f"size each group with `{divergence.remedy}(spec, dcp)`, as the scheduler does"
        if view is not None and view.lacking:  # a release this code targets has no resolver to call
            remedy = scaling_remedy(view, "", None, "dcp")
        kinds = (divergence.kind, *divergence.also)
        return Message(headline, message, remedy if divergence.remedy else None, kinds=kinds)

    @classmethod
    def severity_of(cls, divergence: PathDivergence) -> Severity:
        return Severity.ERROR if divergence.rejected_under_dcp is None else Severity.WARNING
