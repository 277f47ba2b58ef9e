"""## What it does
Finds a predicate that decides whether a KV cache group is DCP-sharded — a helper such as
`dcp_world_size_for_kv_cache_spec(spec, dcp)`, or an inline gate such as
`dcp if isinstance(spec, AttentionSpec) else 1` — whose truth table over the spec kinds differs from the
shared resolver `resolve_dcp_kv_block_size`'s. The message lists the kinds where they differ.

The truth tables are computed statically from the scanned tree: each concrete spec class of its
`kv_cache_interface.py`, and containers (`UniformTypeKVCacheSpecs{MLA, indexer}` as a DSA model builds it,
one of full-attention layers, a mixed one). The resolver's own body is evaluated, so a tree where it checks
`isinstance(…, AttentionSpec)` on every layer (0.29) and one where it reads `spec.dcp_sharded` (0.31+) are
both judged by what they say.

## Why is this bad?
Two components that answer "is this group sharded?" differently size the same group's blocks differently:
for example a helper that accepts `FullAttentionSpec` only leaves sliding-window and chunked-local groups
unscaled while the resolver scales them, and an `isinstance` gate is False for every container. An error
when a differing kind is accepted under DCP; a warning when the tree rejects every differing kind under DCP.

## Example
```python
def dcp_world_size_for_kv_cache_spec(spec, dcp_world_size):
    return dcp_world_size if isinstance(spec, FullAttentionSpec) else 1
```

## Use instead
```python
def dcp_world_size_for_kv_cache_spec(spec, dcp_world_size):
    return resolve_dcp_kv_block_size(spec, dcp_world_size) // spec.block_size
```
or decide with the same test the resolver uses.

## Fix safety
No automatic fix: making the predicate agree changes behaviour for the listed kinds, which is the intended
change but needs a human to confirm each of them.
"""

from __future__ import annotations

import libcst as cst

from kvlint import Example, Message, Rule
from kvlint.analysis.sizing.divergences import PredicateDivergence
from kvlint.analysis.sizing.program import helper_signature
from kvlint.rules._scaling_verdict import remedy as scaling_remedy
from kvlint.rules._sizing_report import ONLY_REJECTED, SizingReport, listing, outside_vllm, short_name
from kvlint.rules.kv103_divergent_sizing_paths import DivergentSizingPaths
from kvlint.types import Severity


class DivergentDcpPredicate(SizingReport, Rule):
    __doc__ = __doc__
    CODE = "KV105"
    NAME = "divergent-dcp-predicate"
    # kvlint.engine.grouping: decides a DCP factor; folds with a whole-function finding on its function.
    ROOT_CAUSE_ROLE = "decision"
    MESSAGE = "{predicate} decides DCP sharding differently from {resolver} for: {kinds}"
    HEADLINE = "`{predicate}` decides DCP sharding unlike the resolver: {kind} gets {mine}, the resolver {theirs}{more}"
    REPORTS = PredicateDivergence
    COMPARED_WITH = ("resolver",)

    TRIGGERS = (("dcp", "decode_context_parallel"),)

    @classmethod
    def could_match(cls, text: str) -> bool:
        # Predicates live next to block sizes: the resolver's module, connectors' sizing code.
        return super().could_match(text) and ("block_size" in text or helper_signature(text))

    VALID = [
        Example(
            """
            def dcp_factor(spec, dcp_world_size):
                layers = iter_layer_specs(spec)
                return dcp_world_size if all(isinstance(layer, AttentionSpec) for layer in layers) else 1
            """
        ),
        Example(
            """
            def tokens_per_block(spec, dcp_world_size):
                return resolve_dcp_kv_block_size(spec, dcp_world_size)
            """
        ),
    ]
    INVALID = [
        Example(
            """
            def dcp_world_size_for_spec(spec, dcp_world_size):
                return dcp_world_size if isinstance(spec, FullAttentionSpec) else 1
            """
        ),
        Example(
            """
            def spans(kv_cache_config, dcp):
                return [
                    g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
                    for g in kv_cache_config.kv_cache_groups
                ]
            """
        ),
    ]

    @classmethod
    def describe(cls, divergence: PredicateDivergence, view=None) -> Message:
        predicate = f"`{divergence.predicate}`"
        if divergence.gate is not None:
            predicate = f"`{divergence.gate}` in {predicate}"
        rows = [f"{kind} ({mine}, resolver {theirs})" for kind, mine, theirs in divergence.kinds]
        resolver = f"the resolver `{divergence.resolver}`"
        if outside_vllm(view):  # said as KV102 says it: this code has no resolver, vLLM has
            resolver = f"vLLM's resolver `{divergence.resolver}` (this code defines none of its own)"
        message = cls.MESSAGE.format(predicate=predicate, resolver=resolver, kinds=listing(rows, 8))
        if divergence.rejected_under_dcp:
            message += ONLY_REJECTED.format(reasons="; ".join(divergence.rejected_under_dcp))
        name = divergence.resolver.rsplit(":", 1)[-1]
        kind, mine, theirs = divergence.kinds[0]
        others = len(divergence.kinds) - 1
        headline = cls.HEADLINE.format(
            predicate=short_name(divergence.predicate),
            kind=kind,
            mine=mine,
            theirs=theirs,
            more=f" (and {others} more kind{'s' if others > 1 else ''})" if others else "",
        )
        kinds = tuple(kind for kind, _, _ in divergence.kinds)
        fix = f"call `{name}(spec, dcp)` instead of deciding here"
        if view is not None and view.lacking:  # a release this code targets has no resolver to call
            fix = scaling_remedy(view, "", None, "dcp")
        return Message(headline, message, fix, kinds=kinds)

    @classmethod
    def describe_related(cls, divergence, view=None) -> tuple[str, str, str, tuple[str, ...]]:
        """A path of another module that diverges through this helper: KV103's words for it."""
        message = DivergentSizingPaths.describe(divergence, view)
        return DivergentSizingPaths.CODE, message.text, message.headline, message.kinds

    @classmethod
    def severity_of(cls, divergence: PredicateDivergence) -> Severity:
        return Severity.WARNING if divergence.rejected_under_dcp else Severity.ERROR

    # An inline gate is reported on its test: whatever expression that is.
    def visit_Call(self, node: cst.Call) -> None:
        self._report_expression(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._report_expression(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._report_expression(node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        self._report_expression(node)

    def visit_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        self._report_expression(node)

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self._report_expression(node)
