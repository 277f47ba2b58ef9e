"""Which of a layer's own attributes choose the spec class its `get_kv_cache_spec` builds, and what it builds
when one of them is None.

MLAAttention builds `SlidingWindowMLASpec` when `self.sliding_window is not None`, else `MLAAttentionSpec`: the
choice reads one attribute, which its constructor copies from a parameter (kvlint.analysis.census.
spec_parameters). Two calls of the class configure their layers apart only through that parameter, and a call
that leaves it to its `None` default never builds the sliding-window spec. What the method's tests read other
than the layer's attributes (the config it is handed, module constants) is the same for every layer of a model.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class SpecBranching:
    # The `self.<attribute>` names the spec choice reads; None when it reads something else of the layer (a
    # method's answer), which no constructor parameter is known to decide.
    attributes: frozenset[str] | None
    # (attribute, the spec classes the method can build while that attribute is None), for each attribute.
    when_none: tuple[tuple[str, frozenset[str]], ...] = ()


UNKNOWN = SpecBranching(None)


def spec_branching(methods: list[str], spec_classes: frozenset[str]) -> SpecBranching:
    """From the texts of a layer's `get_kv_cache_spec` (its own, then its bases' reached through `super()`)."""
    functions = []
    for text in methods:
        try:
            tree = ast.parse(textwrap.dedent(text))
        except (SyntaxError, ValueError):
            return UNKNOWN
        functions += [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not functions:
        return UNKNOWN
    attributes: set[str] = set()
    for function in functions:
        read = _choice_reads(function, spec_classes)
        if read is None:
            return UNKNOWN
        attributes |= read
    when_none = tuple(
        (name, frozenset().union(*(_built(f.body, name, spec_classes) for f in functions)))
        for name in sorted(attributes)
    )
    return SpecBranching(frozenset(attributes), when_none)


def _choice_reads(function: ast.FunctionDef | ast.AsyncFunctionDef, spec_classes: frozenset[str]) -> set | None:
    """The layer attributes the function's choosing tests read, directly or through its locals; None when
    one reads a call of the layer's own (`self.is_sliding()`). A test chooses when its two ways build different
    spec classes or one leaves the method (`return None`: no KV cache); `656 if self.kv_cache_dtype == … else
    None` in a spec's arguments chooses nothing."""
    assigned, tests = _locals_and_tests(function, spec_classes)
    attributes: set[str] = set()
    seen: set[str] = set()
    while tests:
        for node in ast.walk(tests.pop()):
            if isinstance(node, ast.Call) and _self_attribute(node.func) is not None:
                return None
            name = _self_attribute(node)
            if name is not None:
                attributes.add(name)
            elif isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
                seen.add(node.id)
                tests += assigned[node.id]
    return attributes


def _locals_and_tests(function, spec_classes: frozenset[str]) -> tuple[dict[str, list[ast.expr]], list[ast.expr]]:
    """(each local → the values assigned to it, the tests that choose a spec)."""
    assigned: dict[str, list[ast.expr]] = {}
    tests: list[ast.expr] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            if node.value is not None:
                assigned.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.If) and _chooses(node, spec_classes):
            tests.append(node.test)
        elif isinstance(node, ast.IfExp) and _called(node.body, "", spec_classes) != _called(
            node.orelse, "", spec_classes
        ):
            tests.append(node.test)
        elif isinstance(node, ast.While):
            tests.append(node.test)
        elif isinstance(node, ast.Match):
            tests.append(node.subject)
    return assigned, tests


def _chooses(statement: ast.If, spec_classes: frozenset[str]) -> bool:
    ways = (statement.body, statement.orelse)
    leaves = any(isinstance(node, (ast.Return, ast.Raise)) for way in ways for s in way for node in ast.walk(s))
    return leaves or _built(statement.body, "", spec_classes) != _built(statement.orelse, "", spec_classes)


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _built(statements: list[ast.stmt], none: str, spec_classes: frozenset[str]) -> frozenset[str]:
    """The spec classes the statements can call while `self.<none>` is None: a test that attribute decides
    takes one way; every other test both."""
    found: set[str] = set()
    for statement in statements:
        if isinstance(statement, ast.If):
            decided = _decide(statement.test, none)
            if decided is not True:
                found |= _built(statement.orelse, none, spec_classes)
            if decided is not False:
                found |= _built(statement.body, none, spec_classes)
            found |= _called(statement.test, none, spec_classes)
            continue
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                found |= _built([child], none, spec_classes)
            elif isinstance(child, ast.expr):
                found |= _called(child, none, spec_classes)
            elif isinstance(child, (ast.excepthandler, ast.match_case)):
                found |= _built(child.body, none, spec_classes)
    return frozenset(found)


def _called(node: ast.expr, none: str, spec_classes: frozenset[str]) -> set[str]:
    if isinstance(node, ast.IfExp):
        decided = _decide(node.test, none)
        found = _called(node.test, none, spec_classes)
        if decided is not False:
            found |= _called(node.body, none, spec_classes)
        if decided is not True:
            found |= _called(node.orelse, none, spec_classes)
        return found
    found = set()
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name in spec_classes:
            found.add(name)
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.expr):
            found |= _called(child, none, spec_classes)
        elif isinstance(child, ast.keyword):
            found |= _called(child.value, none, spec_classes)
        elif isinstance(child, ast.comprehension):
            found |= _called(child.iter, none, spec_classes)
    return found


def _decide(test: ast.expr, none: str) -> bool | None:
    """The test's truth while `self.<none>` is None, where that alone settles it; None otherwise."""
    if _self_attribute(test) == none:
        return False
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _self_attribute(test.left) == none:
        right = test.comparators[0]
        if isinstance(right, ast.Constant) and right.value is None:
            if isinstance(test.ops[0], ast.Is):
                return True
            if isinstance(test.ops[0], ast.IsNot):
                return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _decide(test.operand, none)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_decide(value, none) for value in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else True if all(v is True for v in values) else None
        return True if True in values else False if all(v is False for v in values) else None
    return None
