"""Which constructor parameters set the layer attributes that choose a layer's spec class
(kvlint.analysis.census.spec_branches), and which of those attributes stay None when a call passes none of them.

MLAAttention's `self.sliding_window = sliding_window` (a parameter, None by default): a call passing no
`sliding_window` builds an MLA layer without a window, and calls configure MLA layers apart only by passing that
parameter per layer — not by a per-layer `use_sparse`, which no spec choice reads. Attention's window is a local
set from `per_layer_sliding_window` or `cache_config.sliding_window`: both parameters count, and a call passing
neither may still read the config's window (not None by default).

Followed through the constructor's locals and its `super().__init__(…)` call into the base's constructor (what the
base's parameter is given there: the subclass's parameter of that name, `**kwargs`, or nothing, its default). An
attribute no constructor of the class assigns, or one set from another of the layer's attributes, is untraced:
the whole answer is then None, and every per-layer argument counts (as before this reading existed).
"""

from __future__ import annotations

import ast

from kvlint.analysis.census.constructor_shapes import (
    PER_LAYER,
    constructor_bases,
    given_per_layer,
    method,
    super_init_call,
)
from kvlint.analysis.census.spec_branches import SpecBranching

# An attribute's source: (the constructor's parameters it is set from, whether it is None when none is passed).
Source = tuple[frozenset[str], bool]

_MAX_BASES = 12
ANY = frozenset({"*"})


def call_choice(
    branching: SpecBranching | None, sources: dict[str, Source] | None, passed: frozenset[str] | None
) -> tuple[bool, frozenset[str]]:
    """(whether a call configures its layer apart from the model's other layers of its class, the spec classes
    it can build — ANY for all) from what it passes (constructor_shapes.passed_parameters; None: a class object
    only named, its arguments read where it is called). Apart: a parameter that sets what chooses the spec is
    given a value read from the layer's position; when that is untraced, any per-layer argument but `prefix`."""
    if branching is None:  # one spec class: nothing to choose, nothing to record (Built.specs stays small)
        return passed is not None and given_per_layer(passed), frozenset()
    if passed is None:
        return False, ANY
    if branching.attributes is None or sources is None:
        return given_per_layer(passed), ANY
    deciding = frozenset().union(*(parameters for parameters, _ in sources.values()))
    apart = any(name + PER_LAYER in passed for name in deciding)
    when_none = dict(branching.when_none)
    specs: frozenset[str] | None = None
    for attribute, (parameters, none) in sorted(sources.items()):
        if none and not parameters & passed and attribute in when_none:
            specs = when_none[attribute] if specs is None else specs & when_none[attribute]
    return apart, specs or ANY


class SpecCalls:
    """call_choice for each call of a layer class, its sources read once per class. It is handed the tree's
    `resolve_expr` per call, not holding it: the census's Program holds this, and a bound method of the Program
    here would make a reference cycle that keeps every syntax tree the census parsed alive past the index build
    (frozen into each worker of a scan)."""

    def __init__(self, layers: dict[str, SpecBranching | None]):
        self.layers = layers
        self._sources: dict[tuple[str, str], dict[str, Source] | None] = {}

    def choice(
        self, resolve_expr, module: str, cls: ast.ClassDef, passed: frozenset[str] | None
    ) -> tuple[bool, frozenset[str]]:
        branching = self.layers.get(cls.name)
        key = (module, cls.name)
        if branching is not None and branching.attributes is not None and key not in self._sources:
            self._sources[key] = spec_parameters(resolve_expr, module, cls, branching.attributes)
        return call_choice(branching, self._sources.get(key), passed)


def spec_parameters(
    resolve_expr, module: str, cls: ast.ClassDef, attributes: frozenset[str], depth: int = 0
) -> dict[str, Source] | None:
    """attribute → its Source, in the terms of `cls`'s constructor; None when one of them is untraced."""
    if depth > _MAX_BASES:
        return None
    init = method(cls, "__init__")
    if init is None:
        base = _base(resolve_expr, module, cls, None)
        return spec_parameters(resolve_expr, base[0], base[1], attributes, depth + 1) if base else None
    parameters = _parameters(init)
    assigned = _assignments(init)
    found: dict[str, Source] = {}
    for attribute in attributes:
        values = assigned.get("self." + attribute)
        if values:
            source = _source(values, assigned, parameters)
            if source is None:
                return None
            found[attribute] = source
    rest = attributes - found.keys()
    if not rest:
        return found
    upward = super_init_call(init)
    base = _base(resolve_expr, module, cls, upward) if upward is not None else None
    inherited = spec_parameters(resolve_expr, base[0], base[1], rest, depth + 1) if base else None
    if inherited is None or upward is None or base is None:
        return None
    given = _given(upward, method(base[1], "__init__"))
    for attribute, (base_parameters, none) in inherited.items():
        names: set[str] = set()
        for name in base_parameters:
            if name in given:
                source = _source([given[name]], assigned, parameters)
                if source is None:
                    return None
                names |= source[0]
                none = none and source[1]
            elif "**" in given and "**" in parameters:
                names.add(name)  # handed on through the subclass's `**kwargs` under the same name
        found[attribute] = (frozenset(names), none)
    return found


def _base(resolve_expr, module: str, cls: ast.ClassDef, upward) -> tuple[str, ast.ClassDef] | None:
    for where, base in constructor_bases(resolve_expr, module, cls, upward):
        resolved = resolve_expr(where, base)
        if resolved is not None and resolved[1] == "class":
            return resolved[0], resolved[2]
    return None


def _parameters(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, bool]:
    """Parameter name → whether its default is None (or it has none: a required one is never None); `**` for a
    `**kwargs`."""
    arguments = init.args
    positional = [*arguments.posonlyargs, *arguments.args][1:]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    found = {a.arg: _is_none(d) for a, d in zip(positional, defaults)}
    found |= {a.arg: _is_none(d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)}
    if arguments.kwarg is not None:
        found["**"] = False
    return found


def _assignments(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[ast.expr]]:
    """Each name (`self.x` for an attribute) → the values the constructor assigns it."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(init):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if value is None:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(value)
            elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found.setdefault("self." + target.attr, []).append(value)
    return found


def _source(values: list[ast.expr], assigned: dict[str, list[ast.expr]], parameters: dict[str, bool]) -> Source | None:
    """The parameters the values read (through the constructor's locals), and whether they are None whenever
    those parameters are: each value None, such a parameter or such a local."""
    names: set[str] = set()
    none = True
    pending, seen = list(values), set()
    while pending:
        value = pending.pop()
        if _is_none(value):
            continue
        if not (isinstance(value, ast.Name) and parameters.get(value.id, value.id in assigned)):
            none = False
        for node in ast.walk(value):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                return None  # another attribute of the layer: untraced
            if not isinstance(node, ast.Name) or node.id in seen:
                continue
            seen.add(node.id)
            if node.id in parameters:
                names.add(node.id)
            elif node.id in assigned:
                pending += assigned[node.id]
    return frozenset(names), none


def _given(call: ast.Call, init: ast.FunctionDef | ast.AsyncFunctionDef | None) -> dict[str, ast.expr]:
    """The base constructor's parameter → the value `super().__init__(…)` gives it; `**` when it hands on a
    `**kwargs`."""
    given: dict[str, ast.expr] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            given["**"] = keyword.value
        else:
            given[keyword.arg] = keyword.value
    names = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:] if init is not None else []
    for index, argument in enumerate(call.args):
        if isinstance(argument, ast.Starred) or index >= len(names):
            break
        given[names[index]] = argument
    return given


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
