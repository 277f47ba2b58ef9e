"""Whether the boolean expression that holds a group-spec check answers a container as each of its layers does.

A check is often one operand of an `and`/`or`/`not` expression (`isinstance(s, FullAttentionSpec) and not
isinstance(s, MLAAttentionSpec)`). What the code consumes is the whole expression, so a container diverges
only when the whole expression's answer for it differs from some layer's. Each operand that tests the same
value's class (`isinstance`, `type(…) is`, `is None`) is answered through the spec hierarchy; any other
operand is unknown, and an unknown answer is never called alike (three-valued logic: `False and ?` is False).
"""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.flow.cst_bindings import asked
from kvlint.analysis.flow.provenance import dotted
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.scaling import class_names
from kvlint.analysis.vocabulary import CONTAINER_CLASS


def holding_expression(check: cst.CSTNode, parent) -> cst.CSTNode:
    """The outermost `and`/`or`/`not` expression that holds `check` (the check itself when none does)."""
    holder = check
    while True:
        above = parent(holder)
        if isinstance(above, cst.BooleanOperation) or (
            isinstance(above, cst.UnaryOperation) and isinstance(above.operator, cst.Not)
        ):
            holder = above
        else:
            return holder


def answers_alike(
    check: cst.CSTNode, subject: str, parent, hierarchy: SpecHierarchy, spec_classes: frozenset[str], remembered=None
) -> bool:
    """Whether the expression holding `check` is proven to answer a container of `spec_classes` layers as
    every one of those layers answers it (`remembered`: SpecFlow.remembered, which keeps the answer per holding
    expression, subject and layers: each check of an `and` of many, for each container, read the whole again)."""
    whole = holding_expression(check, parent)
    if whole is check or not spec_classes:
        return False
    question = f"answers alike: {subject}: {sorted(spec_classes)}"
    return asked(question, whole, lambda whole: _alike(whole, subject, hierarchy, spec_classes), remembered)


def _alike(whole: cst.CSTNode, subject: str, hierarchy: SpecHierarchy, spec_classes: frozenset[str]) -> bool:
    container_kinds = hierarchy.ancestors(CONTAINER_CLASS) | {CONTAINER_CLASS}
    container = _answer(whole, subject, lambda c, exact: c == CONTAINER_CLASS if exact else c in container_kinds)
    if container is None:
        return False
    return all(
        _answer(whole, subject, lambda c, exact, spec=spec: spec == c if exact else hierarchy.is_subclass(spec, c))
        is container
        for spec in spec_classes
    )


def refused_with_a_layer(
    check: cst.CSTNode, subject: str, parent, hierarchy: SpecHierarchy, spec_classes: frozenset[str], remembered=None
) -> bool:
    """Whether the `and` gate holding `check` is proven False for a container of `spec_classes` layers and
    for one of those layers too: a gate that must hold for every layer of a group refuses the group with
    that layer, so the container's False is the right answer, whatever the check alone says of it."""
    whole = holding_expression(check, parent)
    if not (isinstance(whole, cst.BooleanOperation) and isinstance(whole.operator, cst.And)) or not spec_classes:
        return False
    question = f"refused with a layer: {subject}: {sorted(spec_classes)}"
    return asked(question, whole, lambda whole: _refused(whole, subject, hierarchy, spec_classes), remembered)


def _refused(whole: cst.CSTNode, subject: str, hierarchy: SpecHierarchy, spec_classes: frozenset[str]) -> bool:
    container_kinds = hierarchy.ancestors(CONTAINER_CLASS) | {CONTAINER_CLASS}
    if _answer(whole, subject, lambda c, exact: c == CONTAINER_CLASS if exact else c in container_kinds) is not False:
        return False
    return any(
        _answer(whole, subject, lambda c, exact, spec=spec: spec == c if exact else hierarchy.is_subclass(spec, c))
        is False
        for spec in spec_classes
    )


def _answer(node: cst.CSTNode, subject: str, is_a) -> bool | None:
    """The expression's value for a spec whose class tests `is_a(class, exact)` answers; None when unknown."""
    if isinstance(node, cst.BooleanOperation):
        left, right = _answer(node.left, subject, is_a), _answer(node.right, subject, is_a)
        decisive = isinstance(node.operator, cst.Or)  # `True or ?` is True, `False and ?` is False
        if decisive in (left, right):
            return decisive
        return None if None in (left, right) else not decisive
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        inner = _answer(node.expression, subject, is_a)
        return None if inner is None else not inner
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "isinstance":
        if len(node.args) == 2 and dotted(node.args[0].value) == subject:
            classes = class_names(node.args[1].value)
            return any(is_a(c, False) for c in classes) if classes else None
        return None
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        return _comparison(node, subject, is_a)
    return None


def _comparison(node: cst.Comparison, subject: str, is_a) -> bool | None:
    target = node.comparisons[0]
    operator, left = target.operator, node.left
    if dotted(left) == subject and isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
        # a spec, container or layer, is never None
        return isinstance(operator, cst.IsNot) if isinstance(operator, (cst.Is, cst.IsNot)) else None
    is_type = isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "type"
    if not is_type or len(left.args) != 1 or dotted(left.args[0].value) != subject:
        return None
    classes = class_names(target.comparator)
    if not classes:
        return None
    found = any(is_a(c, True) for c in classes)
    if isinstance(operator, (cst.Is, cst.Equal, cst.In)):
        return found
    if isinstance(operator, (cst.IsNot, cst.NotEqual, cst.NotIn)):
        return not found
    return None
