"""Which expressions of a module may hold a KV cache group, their list or a group's spec, read from Python's
own syntax tree before libcst parses the file.

KV101 reports a type test only where `kvlint.analysis.flow.provenance` classifies its subject as a group's spec,
and every such answer starts at an attribute named after the group lists (`kv_cache_groups`) or at a
parameter annotated `KVCacheGroupSpec`, and travels through the module's own bindings (assignments, loops,
`:=`, callers' arguments). This is the same flow with every condition dropped: a name read in a scope may
hold a group when any binding of that name in that scope or one around it may give one (provenance takes
the innermost scope that binds it; a parameter, whatever any call of a function so named passes it, by its
keyword or at its position). It says yes
wherever provenance could (tests/test_preparse.py holds it to that), and no for most type tests vLLM writes
(of a layer, a backend's spec, a parameter nothing in the module passes a group to): such a file is left
unparsed by libcst.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from kvlint.analysis.vocabulary import GROUP_LIST_ATTRIBUTES

# A parameter so annotated holds a group (provenance's `_classify_param`).
GROUP_ANNOTATION = "KVCacheGroupSpec"
# Calls whose items are their argument's items (provenance's `element_of`).
_ITEMS_PASSED_ON = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "enumerate", "zip"})
_VALUE, _ITEMS = range(2)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# The scopes a name is read in, innermost first: the ids of the comprehensions, functions and module around
# it (provenance's `bindings_of` looks in them in that order; classes and lambdas bind nothing there).
Chain = tuple[int, ...]


class GroupFlow:
    """The names of one module that may hold a group, its list or its spec, per scope (a fixed point over its
    bindings). A name read in a scope may hold one when a binding of it in that scope or any around it may."""

    def __init__(self, tree: ast.Module):
        self.names: set[tuple[int, str]] = set()  # (scope, name)
        self.chains: dict[int, Chain] = {}  # id(call or comparison) → the scopes it is read in
        # (how the bound names get their value, where from, the scopes it is read in, the (scope, name)s bound)
        self._sites: list[tuple[int, ast.AST, Chain, list[tuple[int, str]]]] = []
        self._functions: list[tuple[str, int, list[tuple[int | None, str]]]] = []  # (name, scope, parameters)
        self._calls: dict[str, list[tuple[ast.Call, Chain]]] = {}
        self._walk(tree)
        for name, scope, parameters in self._functions:
            # A parameter holds what a call of a function of that name passes it: by its keyword, or at its
            # position (one less through an attribute, where `self` takes the first), as provenance reads it.
            for call, chain in self._calls.get(name, ()):
                for position, parameter in parameters:
                    passed = _passed_to(call, parameter, position)
                    self._sites.extend((_VALUE, argument, chain, [(scope, parameter)]) for argument in passed)
        changed = True
        while changed:
            changed = False
            for how, source, chain, bound in self._sites:
                if not bound or self.names.issuperset(bound):
                    continue
                if how == _VALUE:
                    found = self.may_hold_group(source, chain)
                else:
                    found = self._items_may_hold_group(source, chain)
                if found:
                    self.names.update(bound)
                    changed = True

    def _walk(self, tree: ast.Module) -> None:
        """Each binding, call and comparison with the scopes around it (`home`: the innermost function or the
        module, where `=` binds)."""
        pending: list[tuple[ast.AST, Chain, int]] = [(tree, (id(tree),), id(tree))]
        sites = self._sites
        while pending:
            node, chain, home = pending.pop()
            kind = type(node)
            if kind in _FUNCTIONS:
                chain, home = (id(node), *chain), id(node)
                parameters = _parameters(node.args)
                self.names.update((home, p.arg) for p in parameters if p.annotation and _mentions_group(p.annotation))
                positional = len(node.args.posonlyargs) + len(node.args.args)
                self._functions.append(
                    (node.name, home, [(i if i < positional else None, p.arg) for i, p in enumerate(parameters)])
                )
            elif kind in _COMPREHENSIONS:
                chain = (id(node), *chain)
                for clause in node.generators:
                    sites.append((_ITEMS, clause.iter, chain, [(chain[0], name) for name in _bound(clause.target)]))
            elif kind is ast.Assign:
                bound = [(home, name) for target in node.targets for name in _bound(target)]
                sites.append((_VALUE, node.value, chain, bound))
            elif kind is ast.AnnAssign or kind is ast.NamedExpr:
                if node.value is not None:
                    sites.append((_VALUE, node.value, chain, [(home, name) for name in _bound(node.target)]))
            elif kind is ast.For or kind is ast.AsyncFor:
                sites.append((_ITEMS, node.iter, chain, [(home, name) for name in _bound(node.target)]))
            elif kind is ast.Call:
                self.chains[id(node)] = chain
                name = _call_name(node)
                if name is not None:
                    self._calls.setdefault(name, []).append((node, chain))
            elif kind is ast.Compare:
                self.chains[id(node)] = chain
            # ast.iter_child_nodes, inline (the same children in the same order): a generator per node was most
            # of this walk's time
            for field in node._fields:
                value = getattr(node, field, None)
                if type(value) is list:
                    pending.extend((item, chain, home) for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    pending.append((value, chain, home))

    def may_hold_group(self, node: ast.AST, chain: Chain) -> bool:
        """Whether provenance could classify `node`, read in the scopes `chain`, as a group list, a group or a
        group's spec."""
        while True:
            if isinstance(node, ast.Attribute):
                if node.attr in GROUP_LIST_ATTRIBUTES:
                    return True
                if node.attr != "kv_cache_spec":
                    return False
                node = node.value
            elif isinstance(node, (ast.Subscript, ast.NamedExpr, ast.Starred)):
                node = node.value
            elif isinstance(node, ast.Name):
                return any((scope, node.id) in self.names for scope in chain)
            elif isinstance(node, ast.IfExp):
                # As provenance reads a conditional: a group's spec only when each way but a `None` is one
                # (`spec.first_spec if isinstance(spec, UniformTypeKVCacheSpecs) else spec` is a layer's spec).
                ways = [w for w in (node.body, node.orelse) if not (isinstance(w, ast.Constant) and w.value is None)]
                return bool(ways) and all(self.may_hold_group(way, chain) for way in ways)
            elif isinstance(node, ast.Call):
                arguments = _arguments(node)
                return _call_name(node) == "next" and any(self._items_may_hold_group(a, chain) for a in arguments)
            else:
                return False

    def _items_may_hold_group(self, node: ast.AST, chain: Chain) -> bool:
        """Whether an item of the iterable `node` (or part of one, destructured) may hold a group."""
        if isinstance(node, ast.Call):
            passed_on = _call_name(node) in _ITEMS_PASSED_ON
            return passed_on and any(self._items_may_hold_group(a, chain) for a in _arguments(node))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.may_hold_group(node.elt, (id(node), *chain))  # its element reads its own loop's names
        if isinstance(node, (ast.List, ast.Tuple)):
            return any(self.may_hold_group(element, chain) for element in node.elts)
        return self.may_hold_group(node, chain)


def _bound(target: ast.AST) -> list[str]:
    return [node.id for node in ast.walk(target) if isinstance(node, ast.Name)]


def _call_name(call: ast.Call) -> str | None:
    """`kvlint.analysis.flow.provenance.call_name` for `ast`: a call's function's last name."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _arguments(call: ast.Call) -> Iterator[ast.AST]:
    """Every argument's value: positional, starred and keyword alike."""
    yield from call.args
    for keyword in call.keywords:
        yield keyword.value


def _passed_to(call: ast.Call, parameter: str, position: int | None) -> list[ast.AST]:
    """What a call may pass the parameter: its keyword's value, else the positional argument at its position
    or one before (a method called through an attribute; starred arguments are not counted, as provenance's
    `argument_for` does not count them)."""
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return [keyword.value]
    if position is None:
        return []
    positional = [argument for argument in call.args if not isinstance(argument, ast.Starred)]
    return [positional[i] for i in (position, position - 1) if 0 <= i < len(positional)]


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    extra = [p for p in (arguments.vararg, arguments.kwarg) if p is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _mentions_group(annotation: ast.AST) -> bool:
    """Any mention of the group class in an annotation, also inside a string or a subscript."""
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == GROUP_ANNOTATION:
            return True
        if isinstance(node, ast.Attribute) and node.attr == GROUP_ANNOTATION:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and GROUP_ANNOTATION in node.value:
            return True
    return False
