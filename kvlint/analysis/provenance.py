"""Where a spec expression comes from: a KV cache group's spec (may be a container) or a layer's.

The question every KV rule asks. Answered inside one module from what flows into the expression:
loops over `kv_cache_groups`, `.kv_cache_spec` of a group, names assigned from those, and parameters
whose callers in the same module pass group specs. Anything else is UNKNOWN, and rules stay quiet on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import libcst as cst

from kvlint.analysis.vocabulary import CONTAINER_CLASS, GROUP_LIST_ATTRIBUTES, LAYER_ITERATORS

_PASS_THROUGH = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set"})
_MAX_DEPTH = 6


class Kind(Enum):
    GROUP_LIST = "group list"
    GROUP = "group"
    GROUP_SPEC = "group spec"
    LAYER_SPEC = "layer spec"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Provenance:
    kind: Kind
    # Why, in words a maintainer reads in the finding: "from `kv_cache_config.kv_cache_groups`".
    reason: str = ""


UNKNOWN = Provenance(Kind.UNKNOWN)

_FunctionLike = (cst.FunctionDef, cst.Lambda)
_Comprehensions = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def dotted(node: cst.CSTNode) -> str:
    """Source-like text for names and attribute chains (`self.kv_cache_config.kv_cache_groups`)."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{dotted(node.value)}.{node.attr.value}"
    if isinstance(node, cst.Call):
        return f"{dotted(node.func)}(…)"
    if isinstance(node, cst.Subscript):
        return f"{dotted(node.value)}[…]"
    return "…"


def call_name(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Call):
        if isinstance(node.func, cst.Name):
            return node.func.value
        if isinstance(node.func, cst.Attribute):
            return node.func.attr.value
    return None


@dataclass
class _Binding:
    value: cst.BaseExpression | None  # the assigned value, or the loop's iterable
    path: tuple[int, ...]  # position inside a destructured target
    is_loop: bool
    param: cst.Param | None = None
    function: cst.FunctionDef | None = None


class SpecFlow:
    """Per-module provenance queries. Cheap to build; work happens lazily and is memoised."""

    def __init__(self, module: cst.Module, parents: "dict[cst.CSTNode, cst.CSTNode] | Callable[[], dict]"):
        self.module = module
        # The parent map costs a full traversal: built on the first question, not for files that ask none.
        self._parents = parents
        self._bindings: dict[cst.CSTNode, dict[str, list[_Binding]]] = {}
        self._calls: dict[str, list[cst.Call]] | None = None

    # -- structure -------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    @property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        if callable(self._parents):
            self._parents = self._parents()
        return self._parents

    def enclosing(self, node: cst.CSTNode, kinds: tuple[type, ...]) -> cst.CSTNode | None:
        current = self.parent(node)
        while current is not None and not isinstance(current, kinds):
            current = self.parent(current)
        return current

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        current = self.enclosing(node, (cst.FunctionDef,))
        return current if isinstance(current, cst.FunctionDef) else None

    def enclosing_class_names(self, node: cst.CSTNode) -> list[str]:
        names = []
        current = self.parent(node)
        while current is not None:
            if isinstance(current, cst.ClassDef):
                names.append(current.name.value)
            current = self.parent(current)
        return names

    # -- provenance ------------------------------------------------------------------------
    def classify(self, node: cst.CSTNode, depth: int = 0) -> Provenance:
        if depth > _MAX_DEPTH:
            return UNKNOWN
        if isinstance(node, cst.Attribute):
            if node.attr.value in GROUP_LIST_ATTRIBUTES:
                return Provenance(Kind.GROUP_LIST, f"`{dotted(node)}`")
            if node.attr.value == "kv_cache_spec":
                owner = self.classify(node.value, depth + 1)
                if owner.kind is Kind.GROUP:
                    return Provenance(Kind.GROUP_SPEC, f"the spec of a KV cache group from {owner.reason}")
            if node.attr.value == "kv_cache_specs":
                return UNKNOWN
            return UNKNOWN
        if isinstance(node, cst.Subscript):
            container = self.classify(node.value, depth + 1)
            if container.kind is Kind.GROUP_LIST:
                return Provenance(Kind.GROUP, container.reason)
            if isinstance(node.value, cst.Attribute) and node.value.attr.value == "kv_cache_specs":
                return Provenance(Kind.LAYER_SPEC, "a layer of a container")
            return UNKNOWN
        if isinstance(node, cst.Name):
            return self._classify_name(node, depth)
        if isinstance(node, cst.Call):
            name = call_name(node)
            if name == "next" and node.args:
                return self.element_of(node.args[0].value, (), depth + 1)
            return UNKNOWN
        if isinstance(node, cst.IfExp):
            # `group.kv_cache_spec if … else None`: the None branch cannot be a container.
            branches = [b for b in (node.body, node.orelse) if not (isinstance(b, cst.Name) and b.value == "None")]
            kinds = {self.classify(b, depth + 1) for b in branches}
            group = [p for p in kinds if p.kind is Kind.GROUP_SPEC]
            return group[0] if group and len(kinds) == 1 else UNKNOWN
        if isinstance(node, cst.NamedExpr):
            return self.classify(node.value, depth + 1)
        return UNKNOWN

    def element_of(self, iterable: cst.CSTNode, path: tuple[int, ...], depth: int) -> Provenance:
        """What one item of `iterable` is, after taking `path` into a destructured target."""
        if depth > _MAX_DEPTH:
            return UNKNOWN
        if isinstance(iterable, cst.Call):
            name = call_name(iterable)
            args = [a.value for a in iterable.args if a.keyword is None and not a.star]
            if name == "enumerate" and args and path:
                return self.element_of(args[0], path[1:], depth + 1) if path[0] == 1 else UNKNOWN
            if name == "zip" and path and path[0] < len(args):
                return self.element_of(args[path[0]], path[1:], depth + 1)
            if name in _PASS_THROUGH and args and isinstance(iterable.func, cst.Name):
                return self.element_of(args[0], path, depth + 1)
            if name in LAYER_ITERATORS and not path:
                return Provenance(Kind.LAYER_SPEC, f"`{name}()`")
            if name in ("values", "items") and isinstance(iterable.func, cst.Attribute):
                owner = iterable.func.value
                if isinstance(owner, cst.Attribute) and owner.attr.value == "kv_cache_specs":
                    return Provenance(Kind.LAYER_SPEC, "a container's layer specs")
            return UNKNOWN
        if isinstance(iterable, _Comprehensions) and not isinstance(iterable, cst.DictComp):
            return self.classify(iterable.elt, depth + 1) if not path else UNKNOWN
        if isinstance(iterable, (cst.List, cst.Tuple)) and not path:
            kinds = {self.classify(e.value, depth + 1) for e in iterable.elements}
            return kinds.pop() if len(kinds) == 1 else UNKNOWN
        kind = self.classify(iterable, depth + 1)
        if kind.kind is Kind.GROUP_LIST and not path:
            return Provenance(Kind.GROUP, kind.reason)
        return UNKNOWN

    def _classify_name(self, name: cst.Name, depth: int) -> Provenance:
        bindings = self._lookup(name)
        if not bindings:
            return UNKNOWN
        results: list[Provenance] = []
        for binding in bindings:
            if binding.param is not None:
                results.append(self._classify_param(binding, depth))
            elif binding.value is None:
                results.append(UNKNOWN)
            elif binding.is_loop:
                results.append(self.element_of(binding.value, binding.path, depth + 1))
            elif binding.path:
                results.append(UNKNOWN)
            else:
                results.append(self.classify(binding.value, depth + 1))
        kinds = {r.kind for r in results}
        if Kind.LAYER_SPEC in kinds:
            # Unwrapped on some path: the author knows about containers here.
            return next(r for r in results if r.kind is Kind.LAYER_SPEC)
        for wanted in (Kind.GROUP_SPEC, Kind.GROUP, Kind.GROUP_LIST):
            if wanted in kinds:
                return next(r for r in results if r.kind is wanted)
        return UNKNOWN

    def _classify_param(self, binding: _Binding, depth: int) -> Provenance:
        param, function = binding.param, binding.function
        annotation = _annotation_name(param)
        if annotation == "KVCacheGroupSpec":
            return Provenance(Kind.GROUP, f"parameter `{param.name.value}: KVCacheGroupSpec`")
        if function is None:
            return UNKNOWN
        position = _positional_index(function, param)
        for call in self._callers(function.name.value):
            argument = _argument_for(call, param.name.value, position, via_attribute=isinstance(call.func, cst.Attribute))
            if argument is None:
                continue
            passed = self.classify(argument, depth + 1)
            if passed.kind in (Kind.GROUP_SPEC, Kind.GROUP):
                return Provenance(
                    passed.kind,
                    f"parameter `{param.name.value}`, which a call to `{function.name.value}()` passes {passed.reason}",
                )
        return UNKNOWN

    # -- bindings ----------------------------------------------------------------------------
    def _lookup(self, name: cst.Name) -> list[_Binding]:
        current = self.parent(name)
        while current is not None:
            if isinstance(current, _Comprehensions):
                found = _comprehension_bindings(current, name.value)
                if found:
                    return found
            if isinstance(current, cst.FunctionDef):
                found = self._function_bindings(current).get(name.value)
                if found:
                    return found
            if isinstance(current, cst.Module):
                return self._function_bindings(current).get(name.value, [])
            current = self.parent(current)
        return []

    def _function_bindings(self, scope: cst.CSTNode) -> dict[str, list[_Binding]]:
        cached = self._bindings.get(scope)
        if cached is not None:
            return cached
        collector = _BindingCollector(scope if isinstance(scope, cst.FunctionDef) else None)
        if isinstance(scope, cst.FunctionDef):
            for param in _all_params(scope.params):
                collector.bindings.setdefault(param.name.value, []).append(
                    _Binding(None, (), False, param=param, function=scope)
                )
            scope.body.visit(collector)
        else:
            scope.visit(collector)
        self._bindings[scope] = collector.bindings
        return collector.bindings

    def _callers(self, function_name: str) -> list[cst.Call]:
        if self._calls is None:
            finder = _CallFinder()
            self.module.visit(finder)
            self._calls = finder.calls
        return self._calls.get(function_name, [])

    def checks_for_container(self, function: cst.CSTNode | None, variable: str) -> bool:
        """Whether `function` already tests `variable` against the container class (it unwraps)."""
        if function is None:
            return False
        finder = _ContainerCheckFinder(variable)
        function.visit(finder)
        return finder.found


def _annotation_name(param: cst.Param) -> str | None:
    if param.annotation is None:
        return None
    annotation = param.annotation.annotation
    if isinstance(annotation, cst.SimpleString):
        return annotation.evaluated_value.split(".")[-1].strip() if isinstance(annotation.evaluated_value, str) else None
    if isinstance(annotation, (cst.Name, cst.Attribute)):
        return dotted(annotation).split(".")[-1]
    return None


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            found.append(extra)
    return found


def _positional_index(function: cst.FunctionDef, param: cst.Param) -> int | None:
    positional = [*function.params.posonly_params, *function.params.params]
    for index, candidate in enumerate(positional):
        if candidate is param:
            return index
    return None


def _argument_for(call: cst.Call, name: str, position: int | None, via_attribute: bool) -> cst.BaseExpression | None:
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == name:
            return argument.value
    if position is None:
        return None
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    # `self.method(x)`: the bound `self` takes position 0 of the definition.
    index = position - 1 if via_attribute else position
    return positional[index] if 0 <= index < len(positional) else None


def _target_names(target: cst.BaseExpression, path: tuple[int, ...] = ()) -> list[tuple[str, tuple[int, ...]]]:
    if isinstance(target, cst.Name):
        return [(target.value, path)]
    if isinstance(target, (cst.Tuple, cst.List)):
        found = []
        for index, element in enumerate(target.elements):
            found.extend(_target_names(element.value, (*path, index)))
        return found
    return []


def _comprehension_bindings(comprehension: cst.CSTNode, name: str) -> list[_Binding]:
    found = []
    clause = comprehension.for_in
    while clause is not None:
        for bound, path in _target_names(clause.target):
            if bound == name:
                found.append(_Binding(clause.iter, path, True))
        clause = clause.inner_for_in
    return found


class _BindingCollector(cst.CSTVisitor):
    """Names bound in one function body (not in nested functions, classes or comprehensions)."""

    def __init__(self, function: cst.FunctionDef | None):
        self.function = function
        self.bindings: dict[str, list[_Binding]] = {}

    def _add(self, target: cst.BaseExpression, value: cst.BaseExpression | None, is_loop: bool) -> None:
        for name, path in _target_names(target):
            self.bindings.setdefault(name, []).append(_Binding(value, path, is_loop))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.bindings.setdefault(node.name.value, []).append(_Binding(None, (), False))
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ListComp(self, node: cst.ListComp) -> bool:
        return False

    def visit_SetComp(self, node: cst.SetComp) -> bool:
        return False

    def visit_DictComp(self, node: cst.DictComp) -> bool:
        return False

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._add(target.target, node.value, False)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add(node.target, node.value, False)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._add(node.target, None, False)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add(node.target, node.value, False)

    def visit_For(self, node: cst.For) -> None:
        self._add(node.target, node.iter, True)

    def visit_WithItem(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            self._add(node.asname.name, None, False)

    def visit_ExceptHandler(self, node: cst.ExceptHandler) -> None:
        if node.name is not None:
            self._add(node.name.name, None, False)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            bound = alias.asname.name if alias.asname else alias.name
            if isinstance(bound, cst.Name):
                self._add(bound, None, False)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            bound = alias.asname.name if alias.asname else alias.name
            if isinstance(bound, cst.Name):
                self._add(bound, None, False)


class _CallFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.calls: dict[str, list[cst.Call]] = {}

    def visit_Call(self, node: cst.Call) -> None:
        name = call_name(node)
        if name is not None:
            self.calls.setdefault(name, []).append(node)


class _ContainerCheckFinder(cst.CSTVisitor):
    def __init__(self, variable: str):
        self.variable = variable
        self.found = False

    def visit_Call(self, node: cst.Call) -> None:
        if call_name(node) == "isinstance" and len(node.args) == 2:
            if dotted(node.args[0].value) == self.variable and CONTAINER_CLASS in cst.Module([]).code_for_node(node.args[1].value):
                self.found = True
        elif call_name(node) in LAYER_ITERATORS and node.args and dotted(node.args[0].value) == self.variable:
            self.found = True
