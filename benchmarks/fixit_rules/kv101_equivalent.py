"""A Fixit 2 rule doing KV101's job (for the speed benchmark only; not part of kvlint).

Flags `isinstance(spec, <AttentionSpec family>)` / `type(spec) is …` where `spec` is a KV cache group's
spec: `<x>.kv_cache_spec`, or a name bound from one or from a loop over `<x>.kv_cache_groups`. Like
kvlint it walks every module with libcst; unlike kvlint it has no text prefilter, no cache and no
cross-file analysis, which is the comparison the benchmark makes.
"""

from __future__ import annotations

import libcst as cst
from fixit import Invalid, LintRule, Valid

# vLLM 0.29.0's AttentionSpec family.
ATTENTION_FAMILY = frozenset(
    {
        "AttentionSpec",
        "FullAttentionSpec",
        "MLAAttentionSpec",
        "HiddenStateCacheSpec",
        "RSWASpec",
        "ChunkedLocalAttentionSpec",
        "SlidingWindowSpec",
        "CircularBufferSpec",
        "SlidingWindowMLASpec",
        "EncoderOnlyAttentionSpec",
        "CrossAttentionSpec",
        "SinkFullAttentionSpec",
    }
)


def _name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def _classes(node: cst.BaseExpression) -> set[str]:
    if isinstance(node, cst.Tuple):
        return {n for element in node.elements for n in _classes(element.value)}
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return _classes(node.left) | _classes(node.right)
    name = _name(node)
    return {name} if name else set()


class ContainerIsinstance(LintRule):
    MESSAGE = (
        "isinstance check against an AttentionSpec class on a group spec "
        "that may be a UniformTypeKVCacheSpecs container"
    )
    VALID = [
        Valid(
            """
            for spec in iter_layer_specs(group.kv_cache_spec):
                if isinstance(spec, AttentionSpec):
                    pass
            """
        ),
    ]
    INVALID = [
        Invalid(
            """
            for group in kv_cache_config.kv_cache_groups:
                if isinstance(group.kv_cache_spec, FullAttentionSpec):
                    pass
            """
        ),
        Invalid(
            """
            spec = group.kv_cache_spec
            x = spec.block_size * (dcp if isinstance(spec, AttentionSpec) else 1)
            """
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.group_names: set[str] = set()  # names bound to a KV cache group
        self.spec_names: set[str] = set()  # names bound to a group's spec

    def _is_group_spec(self, node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value == "kv_cache_spec":
            return True
        return isinstance(node, cst.Name) and node.value in self.spec_names

    def visit_For(self, node: cst.For) -> None:
        if (
            isinstance(node.iter, cst.Attribute)
            and node.iter.attr.value == "kv_cache_groups"
            and isinstance(node.target, cst.Name)
        ):
            self.group_names.add(node.target.value)
        if self._is_group_spec(node.iter) is False and isinstance(node.target, cst.Name):
            self.spec_names.discard(node.target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                if self._is_group_spec(node.value):
                    self.spec_names.add(target.target.value)
                else:
                    self.spec_names.discard(target.target.value)

    def visit_Call(self, node: cst.Call) -> None:
        if _name(node.func) != "isinstance" or len(node.args) != 2:
            return
        if self._is_group_spec(node.args[0].value) and _classes(node.args[1].value) & ATTENTION_FAMILY:
            self.report(node)

    def visit_Comparison(self, node: cst.Comparison) -> None:
        left = node.left
        if not (isinstance(left, cst.Call) and _name(left.func) == "type" and len(left.args) == 1):
            return
        if not self._is_group_spec(left.args[0].value):
            return
        for target in node.comparisons:
            if isinstance(target.operator, (cst.Is, cst.Equal)) and _classes(target.comparator) & ATTENTION_FAMILY:
                self.report(node)
                return
