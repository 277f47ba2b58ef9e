"""What a test in vLLM's sizing code answers for one kind of group spec, read from its text (libcst).

`isinstance(spec, AttentionSpec)`, `type(spec) is …`, `spec.dcp_sharded`, `dcp_world_size > 1`, and `not`,
`and`, `or` of those: True, False, or None when the test is anything else. The DCP size is the one the
analysis evaluates with (2), so a test on it alone is settled too.
"""

from __future__ import annotations

import operator

import libcst as cst

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.kind_table import KindRow
from kvlint.analysis.scaling import class_names, is_dcp_size
from kvlint.analysis.sizing.values import DCP
from kvlint.analysis.vocabulary import CONTAINER_CLASS

_COMPARE = {
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
}


def tested_spec(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """The spec expression a kind test looks at (`spec` in `isinstance(spec, C)` or `spec.dcp_sharded`)."""
    if isinstance(test, cst.UnaryOperation):
        return tested_spec(test.expression)
    if isinstance(test, cst.Attribute) and test.attr.value == "dcp_sharded":
        return test.value
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.args:
        if test.func.value in ("isinstance", "type"):
            return test.args[0].value
    if isinstance(test, cst.Comparison):
        return tested_spec(test.left)
    return None


def answer(test: cst.BaseExpression, kind: KindRow, hierarchy: SpecHierarchy, aliases: frozenset[str]) -> bool | None:
    """What `test` gives for a spec of `kind` (None: not known)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = answer(test.expression, kind, hierarchy, aliases)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left = answer(test.left, kind, hierarchy, aliases)
        right = answer(test.right, kind, hierarchy, aliases)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left and right else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    if isinstance(test, cst.Attribute) and test.attr.value == "dcp_sharded":
        return kind.dcp_sharded
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "isinstance":
        if len(test.args) != 2:
            return None
        classes = class_names(test.args[1].value)
        return None if classes is None else is_instance(kind, classes, hierarchy)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _comparison(test, kind, hierarchy, aliases)
    return None


def is_instance(kind: KindRow, classes: frozenset[str], hierarchy: SpecHierarchy, exact: bool = False) -> bool:
    if kind.is_container:
        own = hierarchy.ancestors(CONTAINER_CLASS) | {CONTAINER_CLASS}
        return bool(classes & ({CONTAINER_CLASS} if exact else own))
    cls = kind.layers[0]
    return cls in classes if exact else any(hierarchy.is_subclass(cls, c) for c in classes)


def _comparison(test: cst.Comparison, kind: KindRow, hierarchy: SpecHierarchy, aliases) -> bool | None:
    target = test.comparisons[0]
    left = test.left
    if isinstance(left, cst.Call) and isinstance(left.func, cst.Name) and left.func.value == "type":
        classes = class_names(target.comparator)
        if classes is None:
            return None
        found = is_instance(kind, classes, hierarchy, exact=True)
        if isinstance(target.operator, (cst.Is, cst.Equal, cst.In)):
            return found
        if isinstance(target.operator, (cst.IsNot, cst.NotEqual, cst.NotIn)):
            return not found
        return None
    compare = _COMPARE.get(type(target.operator))
    numbers = [_number(side, aliases) for side in (left, target.comparator)]
    if compare is None or None in numbers:
        return None
    return compare(*numbers)


def _number(node: cst.BaseExpression, aliases: frozenset[str]) -> int | None:
    if isinstance(node, cst.Integer):
        return int(node.value)
    return DCP if is_dcp_size(node, aliases) else None
