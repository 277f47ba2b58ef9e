"""Recognise hand-written DCP scaling of a block size: `spec.block_size * (dcp if <gate> else 1)` and kin.

Shared by the per-file rules: a container check may sit in such a gate; the product itself is reported
and rewritten to a resolver call.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kvlint.analysis.flow.provenance import Kind, SpecFlow, call_name, dotted
from kvlint.analysis.vocabulary import is_dcp_name


def identifier(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def is_dcp_size(node: cst.CSTNode, aliases: set[str] | frozenset[str]) -> bool:
    return is_dcp_name(identifier(node), aliases)


def _is_one(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


@dataclass(frozen=True)
class Scaling:
    """One hand-written scaling site."""

    node: cst.CSTNode  # the product (BinOp) or the augmented assignment
    spec: cst.BaseExpression | None  # whose block size is scaled, when it can be named
    dcp: cst.BaseExpression  # the DCP size expression (inside the gate if there is one)
    gate: cst.IfExp | None  # `dcp if <test> else 1`
    canonical: bool  # `S.block_size * (D if isinstance(S, C) else 1)`: the rewrite keeps S and D verbatim
    gate_classes: frozenset[str] = frozenset()
    # `S.block_size * (D if S.dcp_sharded else 1)`: the 0.31+ resolver's own rule, written out by hand.
    gate_reads_dcp_sharded: bool = False
    # Why a shape plugins write (a factor times another, an inverted gate, a name holding one) has no
    # automatic fix: the resolver call would drop or change part of the factor. Empty: the fix may apply.
    unfixable: str = ""


def spec_of_block_size(node: cst.CSTNode, flow: SpecFlow) -> cst.BaseExpression | None:
    """For `S.block_size` where S is a KV cache spec, return S."""
    if isinstance(node, cst.Attribute) and node.attr.value == "block_size":
        owner = node.value
        if flow.classify(owner).kind in (Kind.GROUP_SPEC, Kind.LAYER_SPEC) or "spec" in dotted(owner).lower():
            return owner
    return None


def _block_size_from_spec(node: cst.CSTNode, flow: SpecFlow) -> bool:
    """A name or attribute that was assigned `S.block_size` for some spec S in this module."""
    if spec_of_block_size(node, flow) is not None:
        return True
    return bool(_block_size_assignments(node, flow))


def _block_size_assignments(node: cst.CSTNode, flow: SpecFlow) -> list[cst.BaseExpression]:
    """The specs S of every `<node> = S.block_size` in its function; empty unless all assignments are such.
    Any name may hold a block size (`bs = spec.block_size`); an attribute must name one."""
    name = identifier(node)
    if name is None or ("block_size" not in name and not isinstance(node, cst.Name)):
        return []
    function = flow.enclosing_function(node)
    scope = function if function is not None else flow.module
    target = dotted(node)
    values = [a.value for a in flow.assignments(scope) if any(dotted(t.target) == target for t in a.targets)]
    specs = [spec_of_block_size(v, flow) for v in values]
    return [s for s in specs if s is not None] if specs and None not in specs else []


def dcp_factor_of(node: cst.CSTNode, flow: SpecFlow, aliases: frozenset[str], depth: int = 0):
    """(the DCP size a factor applies, why it has no automatic fix) for the forms plugins write, or None:
    `dcp * pcp` (the DCP size in a product), `1 if <test> else dcp` (a gate the other way round), a name
    every assignment of which in its function is one of these (`cp_scale = pcp * dcp`)."""
    if depth > 3:
        return None
    if is_dcp_size(node, aliases):
        return node, ""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if is_dcp_size(side, aliases):
                return (
                    side,
                    f"no automatic fix: the factor `{_code(node)}` multiplies the DCP size by `{_code(other)}` too",
                )
    if isinstance(node, cst.IfExp) and _is_one(node.body) and dcp_factor_of(node.orelse, flow, aliases, depth + 1):
        return node, f"no automatic fix: the gate `{_code(node)}` is not the resolver's shape"
    if isinstance(node, cst.Name):
        bindings = flow.bindings_of(node)
        values = [b.value for b in bindings if b.value is not None and not b.is_loop and not b.path and b.param is None]
        if values and len(values) == len(bindings):
            found = [dcp_factor_of(v, flow, aliases, depth + 1) for v in values]
            if all(found):
                return node, f"no automatic fix: `{node.value}` = `{_code(values[0])}`"
    return None


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _dcp_gate(node: cst.CSTNode, aliases: frozenset[str]) -> tuple[cst.BaseExpression, cst.IfExp] | None:
    if isinstance(node, cst.IfExp) and is_dcp_size(node.body, aliases) and _is_one(node.orelse):
        return node.body, node
    return None


def isinstance_classes(test: cst.CSTNode, subject: str) -> frozenset[str] | None:
    """Classes of `isinstance(<subject>, C | (C1, C2))`, or None when the test is anything else."""
    if call_name(test) != "isinstance" or not isinstance(test, cst.Call) or len(test.args) != 2:
        return None
    if dotted(test.args[0].value) != subject:
        return None
    return class_names(test.args[1].value)


def class_names(node: cst.CSTNode) -> frozenset[str] | None:
    if isinstance(node, (cst.Name, cst.Attribute)):
        return frozenset({node.value if isinstance(node, cst.Name) else node.attr.value})
    if isinstance(node, cst.Tuple):
        names: set[str] = set()
        for element in node.elements:
            inner = class_names(element.value)
            if inner is None:
                return None
            names |= inner
        return frozenset(names)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        left, right = class_names(node.left), class_names(node.right)
        return None if left is None or right is None else left | right
    return None


def match_scaling(node: cst.CSTNode, flow: SpecFlow, aliases: frozenset[str]) -> Scaling | None:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
        for size, factor in ((node.left, node.right), (node.right, node.left)):
            gated = _dcp_gate(factor, aliases)
            found = None if gated else dcp_factor_of(factor, flow, aliases)
            dcp = gated[0] if gated else (found[0] if found else None)
            if dcp is None or not _block_size_from_spec(size, flow):
                continue
            spec = spec_of_block_size(size, flow)
            gate = gated[1] if gated else None
            classes = isinstance_classes(gate.test, dotted(spec)) if gate is not None and spec is not None else None
            reads_flag = (
                gate is not None
                and spec is not None
                and isinstance(gate.test, cst.Attribute)
                and gate.test.attr.value == "dcp_sharded"
                and dotted(gate.test.value) == dotted(spec)
            )
            return Scaling(
                node=node,
                spec=spec,
                dcp=dcp,
                gate=gate,
                canonical=spec is not None and (classes is not None or reads_flag),
                gate_classes=classes or frozenset(),
                gate_reads_dcp_sharded=reads_flag,
                unfixable=found[1] if found else "",
            )
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.MultiplyAssign):
        found = dcp_factor_of(node.value, flow, aliases)
        if found and _block_size_from_spec(node.target, flow):
            # `block_size = spec.block_size` … `block_size *= dcp`: the spec, when every assignment names the same.
            specs = _block_size_assignments(node.target, flow)
            spec = specs[0] if specs and len({dotted(s) for s in specs}) == 1 else None
            return Scaling(node=node, spec=spec, dcp=found[0], gate=None, canonical=False, unfixable=found[1])
    return None
