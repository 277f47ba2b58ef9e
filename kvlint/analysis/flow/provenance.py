"""Where a spec expression comes from: a KV cache group's spec (may be a container) or a layer's.

The question every KV rule asks. Answered inside one module from what flows into the expression where it
is read: loops over `kv_cache_groups`, `.kv_cache_spec` of a group, names assigned from those, and
parameters whose callers in the same module pass group specs. A name holds what reaches the statement
that reads it (kvlint.analysis.flow.reaching): `spec = _unwrap_spec(spec)` makes it a layer spec from that
line on, and an `isinstance(spec, UniformTypeKVCacheSpecs)` test narrows it on the branch where it is not
a container. A call of a function of the module that returns a layer spec (it unwraps) gives a layer
spec. Anything else is UNKNOWN, and rules stay quiet on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import libcst as cst

from kvlint.analysis.cst_walk import preorder, walk
from kvlint.analysis.flow.cst_bindings import (
    COMPREHENSIONS,
    Binding,
    BindingCollector,
    all_params,
    annotation_name,
    argument_for,
    call_name,
    comprehension_bindings,
    container_subjects,
    dotted,
    is_static,
    positional_index,
    returned_values,
)
from kvlint.analysis.flow.reaching import ReachingDefinitions
from kvlint.analysis.vocabulary import GROUP_LIST_ATTRIBUTES, LAYER_ITERATORS

__all__ = ["UNKNOWN", "Kind", "Provenance", "SpecFlow", "call_name", "dotted"]  # rules read dotted names here too

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
NARROWED_REASON = "checked not to be a UniformTypeKVCacheSpecs container on an earlier line"
# What holds one statement's worth of code: the granularity of `checks_for_container`.
STATEMENTS = (cst.SimpleStatementLine, cst.SimpleStatementSuite, cst.If, cst.While, cst.For, cst.With)


class SpecFlow:
    """Per-module provenance queries. Cheap to build; work happens lazily and is memoised."""

    def __init__(
        self,
        module: cst.Module,
        parents: dict[cst.CSTNode, cst.CSTNode] | Callable[[], dict],
        nodes: list[cst.CSTNode] | None = None,
    ):
        self.module = module
        # The module's nodes in preorder when the caller has walked it already (kvlint.analysis.cst_walk.ModuleShape).
        self._nodes = nodes
        # The parent map costs a full traversal: built on the first question, not for files that ask none.
        self._parents = parents
        self._bindings: dict[cst.CSTNode, dict[str, list[Binding]]] = {}
        self._reaching: dict[cst.CSTNode, ReachingDefinitions] = {}
        self._calls: dict[str, list[cst.Call]] | None = None
        self._functions: dict[str, list[cst.FunctionDef]] | None = None
        self._unwrappers: dict[str, bool] = {}
        self._parameters: dict[tuple[int, int, int], Provenance] = {}
        self._holders: set[cst.CSTNode] | None = None
        self._assignments: dict[cst.CSTNode, list[cst.Assign]] = {}
        self._remembered: dict[tuple[str, cst.CSTNode], object] = {}

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
            return self._classify_attribute(node, depth)
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
            if name is not None and node.args and self.returns_layer_spec(name, depth + 1):
                return Provenance(Kind.LAYER_SPEC, f"unwrapped by `{name}()`")
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

    def _classify_attribute(self, node: cst.Attribute, depth: int) -> Provenance:
        if node.attr.value in GROUP_LIST_ATTRIBUTES:
            return Provenance(Kind.GROUP_LIST, f"`{dotted(node)}`")
        if node.attr.value == "kv_cache_spec":
            owner = self.classify(node.value, depth + 1)
            if owner.kind is Kind.GROUP:
                if self._narrowed(node):
                    return Provenance(Kind.LAYER_SPEC, NARROWED_REASON)
                return Provenance(Kind.GROUP_SPEC, f"the spec of a KV cache group from {owner.reason}")
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
        if isinstance(iterable, COMPREHENSIONS) and not isinstance(iterable, cst.DictComp):
            return self.classify(iterable.elt, depth + 1) if not path else UNKNOWN
        if isinstance(iterable, (cst.List, cst.Tuple)) and not path:
            kinds = {self.classify(e.value, depth + 1) for e in iterable.elements}
            return kinds.pop() if len(kinds) == 1 else UNKNOWN
        kind = self.classify(iterable, depth + 1)
        if kind.kind is Kind.GROUP_LIST and not path:
            return Provenance(Kind.GROUP, kind.reason)
        return UNKNOWN

    def _classify_name(self, name: cst.Name, depth: int) -> Provenance:
        bindings = self.bindings_of(name)
        if not bindings:
            return UNKNOWN
        results: list[Provenance] = []
        for binding in bindings:
            if binding.narrowed:
                results.append(Provenance(Kind.LAYER_SPEC, NARROWED_REASON))
            elif binding.param is not None:
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

    def _classify_param(self, binding: Binding, depth: int) -> Provenance:
        # Memoised per parameter and depth: every read of a parameter asks the same of the same callers, and
        # callers' arguments are parameters again (a call graph fans out exponentially without it).
        key = (id(binding.param), id(binding.function), depth)
        if key not in self._parameters:
            self._parameters[key] = self._classify_param_uncached(binding, depth)
        return self._parameters[key]

    def _classify_param_uncached(self, binding: Binding, depth: int) -> Provenance:
        param, function = binding.param, binding.function
        annotation = annotation_name(param)
        if annotation == "KVCacheGroupSpec":
            return Provenance(Kind.GROUP, f"parameter `{param.name.value}: KVCacheGroupSpec`")
        if function is None:
            return UNKNOWN
        position = positional_index(function, param)
        for call in self.callers(function.name.value):
            argument = argument_for(
                call,
                param.name.value,
                position,
                via_attribute=isinstance(call.func, cst.Attribute) and not is_static(function),
            )
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
    def bindings_of(self, name: cst.Name) -> list[Binding]:
        """The bindings of `name` that reach where it is read (every binding of its scope where no walk answers)."""
        current = self.parent(name)
        while current is not None:
            if isinstance(current, COMPREHENSIONS):
                found = comprehension_bindings(current, name.value)
                if found:
                    return found
            if isinstance(current, cst.FunctionDef):
                found = self._function_bindings(current).get(name.value)
                if found:
                    reaching = self.reaching_state(current, name)
                    # No map for this read (a closure, unreachable code): every binding of the function.
                    return found if reaching is False else list((reaching or {}).get(name.value, ()))
            if isinstance(current, cst.Module):
                return self._function_bindings(current).get(name.value, [])
            current = self.parent(current)
        return []

    def remembered(self, question: str, node: cst.CSTNode, answer: Callable[[cst.CSTNode], object]):
        """`answer(node)`, computed once per question and node of this module: what a rule reads of a whole
        function for each of its checks (a walk per check is quadratic in a function of many checks)."""
        key = (question, node)
        if key not in self._remembered:
            self._remembered[key] = answer(node)
        return self._remembered[key]

    def scope_bindings(self, scope: cst.CSTNode) -> dict[str, list[Binding]]:
        """The names a function (its parameters included) or the module binds, each scope read once."""
        return self._function_bindings(scope)

    def _function_bindings(self, scope: cst.CSTNode) -> dict[str, list[Binding]]:
        cached = self._bindings.get(scope)
        if cached is not None:
            return cached
        collector = BindingCollector(scope if isinstance(scope, cst.FunctionDef) else None)
        if isinstance(scope, cst.FunctionDef):
            for param in all_params(scope.params):
                collector.bindings.setdefault(param.name.value, []).append(
                    Binding(None, (), False, param=param, function=scope)
                )
            walk(scope.body, collector)
        else:
            walk(scope, collector)
        self._bindings[scope] = collector.bindings
        return collector.bindings

    @property
    def nodes(self) -> list[cst.CSTNode]:
        """The module's nodes in preorder, walked once (a rule's question asked of the whole module reads these)."""
        if self._nodes is None:
            self._nodes = list(preorder(self.module))
        return self._nodes

    def callers(self, function_name: str) -> list[cst.Call]:
        """The calls in this module of a function or method named so."""
        if self._calls is None:
            self._index_module()
        return self._calls.get(function_name, [])

    def functions_named(self, name: str) -> list[cst.FunctionDef]:
        """The module's functions and methods named so, nested ones included, in source order."""
        if self._functions is None:
            self._index_module()
        return self._functions.get(name, [])

    def _index_module(self) -> None:
        """The module's calls and functions by name, in source order, in one pass (a full walk each cost as much)."""
        self._calls, self._functions = {}, {}
        for node in self.nodes:
            kind = type(node)  # libcst's own classes, never subclassed: isinstance of its ABCs costs 2 calls a node
            if kind is cst.Call:
                name = call_name(node)
                if name is not None:
                    self._calls.setdefault(name, []).append(node)
            elif kind is cst.FunctionDef:
                self._functions.setdefault(node.name.value, []).append(node)

    def reaching_state(self, function: cst.FunctionDef, node: cst.CSTNode):
        """What reaches the statement holding `node` in `function` (kvlint.analysis.flow.reaching.State); None
        when unreachable, False when the walk has no answer."""
        reaching = self._reaching.get(function)
        if reaching is None:
            parameters = {
                name: [b for b in found if b.param is not None]
                for name, found in self._function_bindings(function).items()
                if any(b.param is not None for b in found)
            }
            reaching = self._reaching[function] = ReachingDefinitions(function, parameters, self._walrus_holders())
        return reaching.state_at(node, self.parent)

    def assignments(self, scope: cst.CSTNode) -> list[cst.Assign]:
        """Every `=` statement under `scope` (nested scopes included), in source order; memoised per scope."""
        found = self._assignments.get(scope)
        if found is None:
            found = self._assignments[scope] = [n for n in preorder(scope) if isinstance(n, cst.Assign)]
        return found

    def _walrus_holders(self) -> set[cst.CSTNode]:
        """The module's nodes with a `:=` at or under them, from one pass over its nodes."""
        if self._holders is None:
            self._holders = set()
            for node in self.nodes:
                if type(node) is cst.NamedExpr:  # libcst's own class, never subclassed: isinstance of an ABC is slow
                    # Up to the first node already marked: its ancestors were marked with it.
                    current: cst.CSTNode | None = node
                    while current is not None and current not in self._holders:
                        self._holders.add(current)
                        current = self.parent(current)
        return self._holders

    def _narrowed(self, node: cst.Attribute) -> bool:
        """Whether an isinstance test on an earlier line showed this attribute chain is not a container."""
        function = self.enclosing_function(node)
        if function is None:
            return False
        state = self.reaching_state(function, node)
        return bool(state) and dotted(node) in state

    def returns_layer_spec(self, function_name: str, depth: int = 0) -> bool:
        """Whether a function of this module named so hands back a layer spec: some `return` gives one and
        none gives a group or its spec (`_unwrap_spec`: the first layer of a container, else the spec)."""
        if function_name in self._unwrappers:
            return self._unwrappers[function_name]
        self._unwrappers[function_name] = False  # while deciding: a recursive call decides nothing
        kinds = set()
        for function in self.functions_named(function_name):
            for value in returned_values(function):
                kinds.add(self.classify(value, depth + 1).kind)
        found = Kind.LAYER_SPEC in kinds and not kinds & {Kind.GROUP, Kind.GROUP_SPEC, Kind.GROUP_LIST}
        self._unwrappers[function_name] = found
        return found

    def checks_for_container(self, node: cst.CSTNode, variable: str) -> bool:
        """Whether the statement holding `node` also tests `variable` against the container class
        (`not isinstance(spec, UniformTypeKVCacheSpecs) and isinstance(spec, AttentionSpec)`). Tests on
        earlier lines count only where they narrow (see reaching), a one-off `iter_layer_specs(spec)` not at all."""
        # Read once per statement for all the checks in it, and once per `elif` of a chain (kvlint.analysis.flow
        # .cst_bindings.container_subjects): a statement of many checks was walked again for each.
        return variable in container_subjects(self.enclosing(node, STATEMENTS) or node, self._remembered)
