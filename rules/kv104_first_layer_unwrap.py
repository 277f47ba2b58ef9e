"""## What it does
Finds a sizing helper or path that unwraps a `UniformTypeKVCacheSpecs` container by looking at one
arbitrary layer only — `next(iter(spec.kv_cache_specs.values()))` — and then decides something for the
whole group (its DCP factor, its token span) from that layer, where the answer changes with the order of
the layers.

The analysis evaluates the function over two-layer containers of every pair of spec classes of the
scanned tree, in both orders; it reports the pick when some pair gives different answers.

## Why is this bad?
A container's layers need not agree: the decision then depends on dict order, and the scheduler's resolver
(`resolve_dcp_kv_block_size`), which checks *every* layer through `iter_layer_specs`, can answer
differently. An error when the disagreeing layers are of one spec family that vLLM may group together; a
warning when only layers of different families (which vLLM's uniform-type grouping keeps apart) disagree.

## Example
```python
def dcp_world_size_for_kv_cache_spec(spec, dcp_world_size):
    inner = spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        inner = next(iter(spec.kv_cache_specs.values()))
    return dcp_world_size if isinstance(inner, FullAttentionSpec) else 1
```

## Use instead
```python
def dcp_world_size_for_kv_cache_spec(spec, dcp_world_size):
    layers = iter_layer_specs(spec)
    return dcp_world_size if all(isinstance(layer, AttentionSpec) for layer in layers) else 1
```
or call `resolve_dcp_kv_block_size(spec, dcp_world_size)` directly.

## Fix safety
No automatic fix: whether every layer must qualify (`all`) or any may (`any`) is the author's decision.
"""

from __future__ import annotations

import libcst as cst

from kvlint import Example, Message, Rule
from kvlint.analysis.sizing.divergences import FirstLayerPick
from kvlint.analysis.vocabulary import CONTAINER_CLASS
from kvlint.rules._sizing_report import SizingReport, short_name
from kvlint.types import Severity


class FirstLayerUnwrap(SizingReport, Rule):
    __doc__ = __doc__
    CODE = "KV104"
    NAME = "first-layer-unwrap"
    # kvlint.engine.grouping: decides a DCP factor; folds with a whole-function finding on its function.
    ROOT_CAUSE_ROLE = "decision"
    MESSAGE = (
        "`{function}` decides for the whole group from its first layer only: {first} gives {a} but {second} gives {b}"
    )
    HEADLINE = "`{function}` decides DCP sizing for a whole group from its first layer only"
    ONLY_APART = " — only when a container mixes spec families that vLLM groups apart"
    REPORTS = FirstLayerPick

    TRIGGERS = (("kv_cache_specs",), ("next(",))

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
            def representative_type(spec):
                # picks a layer, but decides nothing about DCP sizing
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    return type(next(iter(spec.kv_cache_specs.values())))
                return type(spec)
            """
        ),
    ]
    INVALID = [
        Example(
            """
            def dcp_factor(spec, dcp_world_size):
                inner = spec
                if isinstance(spec, UniformTypeKVCacheSpecs):
                    inner = next(iter(spec.kv_cache_specs.values()))
                return dcp_world_size if isinstance(inner, FullAttentionSpec) else 1
            """
        ),
    ]

    @classmethod
    def describe(cls, divergence: FirstLayerPick, view=None) -> Message:
        message = cls.MESSAGE.format(
            function=divergence.function,
            first=f"{CONTAINER_CLASS}{{{divergence.first}, {divergence.second}}}",
            a=divergence.answer,
            second=f"{{{divergence.second}, {divergence.first}}}",
            b=divergence.reversed_answer,
        )
        if not divergence.plausible:
            message += cls.ONLY_APART
        remedy = f"decide from every layer, `{divergence.remedy}(spec)`, not the first"
        headline = cls.HEADLINE.format(function=short_name(divergence.function))
        return Message(headline, message, remedy if divergence.remedy else None)

    @classmethod
    def severity_of(cls, divergence: FirstLayerPick) -> Severity:
        return Severity.ERROR if divergence.plausible else Severity.WARNING

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "next":
            self._report_expression(node)
