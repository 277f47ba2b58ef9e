"""Where the DCP size a hand-written scaling multiplies by comes from, and whether it is already per kind.

`spec.block_size * self.dcp_world_size` reads nothing about the spec on its own line, yet the factor may
be decided earlier: `self.dcp_world_size = dcp_world_size if kv_cache_spec.dcp_sharded else 1` in the
constructor, `factor = dcp if spec.dcp_sharded else 1` two lines up, or a caller that passes such a size.
Followed through the names that reach the read (kvlint.analysis.flow.reaching), the `self.` attributes its class
assigns, and the calls of the function in the same module, at most a few steps deep:

- PLAIN: the DCP size itself, whatever the kind (a config field, a name holding one);
- GATED: the DCP size where every test of `tests` holds, else 1;
- ONE: 1;
- CALLERS: a parameter no call in this module passes (the callers decide, elsewhere);
- HANDED: a manager constructor's DCP size, which the coordinator hands each manager per kind (what it hands
  is in the tree index: kvlint.analysis.agreement turns a CALLERS origin into this one);
- UNKNOWN: anything else (a helper's result, a mix).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from kvlint.analysis.cst_walk import walk
from kvlint.analysis.flow.cst_bindings import argument_for, is_static, positional_index
from kvlint.analysis.flow.provenance import SpecFlow, dotted
from kvlint.analysis.scaling import is_dcp_size

PLAIN, GATED, ONE, CALLERS, UNKNOWN, HANDED = "plain", "gated", "one", "callers", "unknown", "handed"
_MAX_DEPTH = 5


@dataclass(frozen=True)
class Origin:
    kind: str
    # GATED: the DCP size applies when all of these hold (their text is kept for messages).
    tests: tuple[cst.BaseExpression, ...] = ()
    # In words, for a message: "`self.dcp_world_size` = `dcp_world_size if kv_cache_spec.dcp_sharded else 1`".
    where: str = ""
    # CALLERS: (the function, its parameter) whose callers decide.
    callers_of: tuple[str, str] = ()


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())


def _is_one(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Integer) and node.value == "1"


class FactorOrigins:
    """Origins of DCP-size expressions in one module (memoised per expression)."""

    def __init__(self, flow: SpecFlow, aliases: frozenset[str]):
        self.flow = flow
        self.aliases = aliases
        self._attributes: dict[tuple[int, str], list[cst.BaseExpression]] = {}
        self._asking: set[tuple[int, str]] = set()  # the parameters being followed through their calls

    def origin(self, node: cst.BaseExpression, depth: int = 0) -> Origin:
        if depth > _MAX_DEPTH:
            return Origin(UNKNOWN)
        if _is_one(node):
            return Origin(ONE)
        if isinstance(node, cst.IfExp):
            return self._conditional(node, depth)
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
            # `pcp * dcp`: the DCP side decides per kind; the other factor (another parallel size) does not.
            sides = [s for s in (node.left, node.right) if is_dcp_size(s, self.aliases)]
            return self.origin(sides[0], depth + 1) if len(sides) == 1 else Origin(UNKNOWN)
        if isinstance(node, cst.Name):
            return self._name(node, depth)
        if isinstance(node, cst.Attribute):
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                values = self._self_assignments(node)
                if values:
                    found = _combine([self.origin(v, depth + 1) for v in values])
                    return _described(found, f"`{dotted(node)}` = `{_code(values[0])}`")
            return Origin(PLAIN) if is_dcp_size(node, self.aliases) else Origin(UNKNOWN)
        return Origin(UNKNOWN)

    def _conditional(self, node: cst.IfExp, depth: int) -> Origin:
        for size, other, test in ((node.body, node.orelse, node.test), (node.orelse, node.body, None)):
            if not _is_one(other):
                continue
            inner = self.origin(size, depth + 1)
            # A size named for the DCP size that the gate makes per kind is that size, whoever passes it.
            if inner.kind not in (PLAIN, GATED) and not is_dcp_size(size, self.aliases):
                return Origin(UNKNOWN)
            condition = test if test is not None else cst.UnaryOperation(cst.Not(), node.test)
            tests = inner.tests if inner.kind == GATED else ()
            return Origin(GATED, (condition, *tests))  # the name it is read through says where
        return Origin(UNKNOWN)

    def _name(self, node: cst.Name, depth: int) -> Origin:
        bindings = self.flow.bindings_of(node)
        if not bindings:
            return Origin(PLAIN) if is_dcp_size(node, self.aliases) else Origin(UNKNOWN)
        found = []
        for binding in bindings:
            if binding.param is not None and binding.function is not None:
                found.append(self._parameter(binding.param, binding.function, depth))
            elif binding.value is None or binding.is_loop or binding.path:
                found.append(Origin(UNKNOWN))
            else:
                inner = self.origin(binding.value, depth + 1)
                found.append(_described(inner, f"`{node.value}` = `{_code(binding.value)}`"))
        return _combine(found)

    def _parameter(self, param: cst.Param, function: cst.FunctionDef, depth: int) -> Origin:
        name, position = param.name.value, positional_index(function, param)
        calls = self.flow.callers(function.name.value)
        key = (id(function), name)
        if not calls or key in self._asking:
            # No call here, or a call that hands the parameter on to a function of the same name (a subclass's
            # `super().__init__(dcp_world_size=dcp_world_size)`): what it is, the callers elsewhere decide.
            return _from_callers(function, name)
        self._asking.add(key)
        try:
            return self._passed(param, function, calls, name, position, depth)
        finally:
            self._asking.discard(key)

    def _passed(self, param, function, calls, name: str, position: int | None, depth: int) -> Origin:
        found = []
        for call in calls:
            via_attribute = isinstance(call.func, cst.Attribute) and not is_static(function)
            argument = argument_for(call, name, position, via_attribute)
            if argument is None and _packed(call, keyword_only=position is None):
                # `super().__init__(spec, **kwargs)`: the size arrives packed, from that function's own callers.
                found.append(_from_callers(function, name))
                continue
            if argument is None:
                argument = param.default
            found.append(Origin(UNKNOWN) if argument is None else self.origin(argument, depth + 1))
        combined = _combine(found)
        if combined.kind == CALLERS and function.name.value != "__init__":
            # What its calls here hand on comes from their own callers; this function may have callers in other
            # modules too (a manager's classmethod the connectors call): its callers decide, not only these.
            return _from_callers(function, name)
        if combined.kind == UNKNOWN:  # said of this function's calls, the nearest place a reader can look
            what = "different sizes" if len({o.kind for o in found}) > 1 else "a size of unknown origin"
            return Origin(UNKNOWN, where=f"the calls of `{function.name.value}()` here pass `{name}` {what}")
        return _described(combined, combined.where or f"`{name}` is what `{function.name.value}()`'s callers pass")

    def _self_assignments(self, node: cst.Attribute) -> list[cst.BaseExpression]:
        """`self.x = value` anywhere in the class holding `node` (any method)."""
        owner = self.flow.enclosing(node, (cst.ClassDef,))
        if owner is None:
            return []
        key = (id(owner), node.attr.value)
        if key not in self._attributes:
            finder = _SelfAssignments(node.attr.value)
            walk(owner, finder)
            self._attributes[key] = finder.values
        return self._attributes[key]


def _from_callers(function: cst.FunctionDef, name: str) -> Origin:
    return Origin(
        CALLERS,
        where=f"`{name}` comes from the callers of `{function.name.value}()`",
        callers_of=(function.name.value, name),
    )


def _packed(call: cst.Call, keyword_only: bool) -> bool:
    """Whether the call passes arguments packed (`**kwargs`; `*args` too where the parameter is positional),
    so that a parameter it does not name may still be passed."""
    return any(a.star == "**" or (a.star == "*" and not keyword_only) for a in call.args)


def _combine(origins: list[Origin]) -> Origin:
    if not origins:
        return Origin(UNKNOWN)
    kinds = {o.kind for o in origins}
    if len(kinds) > 1:
        return Origin(UNKNOWN, where=origins[0].where)
    if kinds == {CALLERS} and len({o.callers_of for o in origins}) > 1:
        return Origin(CALLERS, where=origins[0].where)  # the callers of several functions: none named
    if kinds == {GATED} and len({tuple(_code(t) for t in o.tests) for o in origins}) > 1:
        return Origin(UNKNOWN, where=origins[0].where)
    return origins[0]


def _described(origin: Origin, where: str) -> Origin:
    """Keep the innermost words: they name the line that decides."""
    return origin if origin.where else Origin(origin.kind, origin.tests, where)


class _SelfAssignments(cst.CSTVisitor):
    def __init__(self, attribute: str):
        self.attribute = attribute
        self.values: list[cst.BaseExpression] = []

    def _add(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if (
            value is not None
            and isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
            and target.attr.value == self.attribute
        ):
            self.values.append(value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._add(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add(node.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target, cst.Name("__changed__"))  # `self.x *= …`: no longer one known value
