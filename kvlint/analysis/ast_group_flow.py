"""Which expressions of a module may hold a KV cache group, their list or a group's spec, read from Python's
own syntax tree before libcst parses the file.

KV101 reports a type test only where `kvlint.analysis.provenance` classifies its subject as a group's spec,
and every such answer starts at an attribute named after the group lists (`kv_cache_groups`) or at a
parameter annotated `KVCacheGroupSpec`, and travels through the module's own bindings (assignments, loops,
`:=`, callers' arguments). This is the same flow with every scope merged and every condition dropped: a
name may hold a group when any binding of that name anywhere in the module may give one. It says yes
wherever provenance could (tests/test_preparse.py holds it to that), and no for most type tests vLLM writes
(of a layer, a backend's spec, a parameter nothing in the module passes a group to): such a file is left
unparsed by libcst.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from kvlint.analysis.vocabulary import GROUP_LIST_ATTRIBUTES

# A parameter so annotated holds a group (provenance's `_classify_param`).
GROUP_ANNOTATION = "KVCacheGroupSpec"
# Calls whose items are their argument's items (provenance's `element_of`).
_ITEMS_PASSED_ON = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "enumerate", "zip"})
_VALUE, _ITEMS, _ARGUMENTS = range(3)


class GroupFlow:
    """The names of one module that may hold a group, its list or its spec (a fixed point over its bindings)."""

    def __init__(self, nodes: Mapping[type, list[ast.AST]]):
        self.names: set[str] = set()
        sites = self._sites(nodes)
        changed = True
        while changed:
            changed = False
            for how, source, names in sites:
                if not names or self.names.issuperset(names):
                    continue
                if how == _VALUE:
                    found = self.may_hold_group(source)
                elif how == _ITEMS:
                    found = self._items_may_hold_group(source)
                else:
                    found = any(map(self.may_hold_group, _arguments(source)))
                if found:
                    self.names.update(names)
                    changed = True

    def _sites(self, nodes: Mapping[type, list[ast.AST]]) -> list[tuple[int, ast.AST, list[str]]]:
        """(how the bound names get their value, where from, the names) for each binding of the module; the
        parameters annotated as groups go straight into `names`."""
        sites: list[tuple[int, ast.AST, list[str]]] = []
        for node in nodes.get(ast.Assign, ()):
            sites.append((_VALUE, node.value, [name for target in node.targets for name in _bound(target)]))
        for node in nodes.get(ast.AnnAssign, ()):
            if node.value is not None:
                sites.append((_VALUE, node.value, _bound(node.target)))
        for node in nodes.get(ast.NamedExpr, ()):
            sites.append((_VALUE, node.value, _bound(node.target)))
        for kind in (ast.For, ast.AsyncFor, ast.comprehension):
            sites.extend((_ITEMS, node.iter, _bound(node.target)) for node in nodes.get(kind, ()))
        calls: dict[str, list[ast.Call]] = {}
        for call in nodes.get(ast.Call, ()):
            name = _call_name(call)
            if name is not None:
                calls.setdefault(name, []).append(call)
        for kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            for function in nodes.get(kind, ()):
                parameters = _parameters(function.args)
                self.names.update(p.arg for p in parameters if p.annotation and _mentions_group(p.annotation))
                # A parameter holds what a call of a function of that name passes: any argument, to any parameter.
                names = [p.arg for p in parameters]
                sites.extend((_ARGUMENTS, call, names) for call in calls.get(function.name, ()))
        return sites

    def may_hold_group(self, node: ast.AST) -> bool:
        """Whether provenance could classify `node` as a group list, a group or a group's spec."""
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
                return node.id in self.names
            elif isinstance(node, ast.IfExp):
                return self.may_hold_group(node.body) or self.may_hold_group(node.orelse)
            elif isinstance(node, ast.Call):
                return _call_name(node) == "next" and any(map(self._items_may_hold_group, _arguments(node)))
            else:
                return False

    def _items_may_hold_group(self, node: ast.AST) -> bool:
        """Whether an item of the iterable `node` (or part of one, destructured) may hold a group."""
        if isinstance(node, ast.Call):
            return _call_name(node) in _ITEMS_PASSED_ON and any(map(self._items_may_hold_group, _arguments(node)))
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.may_hold_group(node.elt)
        if isinstance(node, (ast.List, ast.Tuple)):
            return any(map(self.may_hold_group, node.elts))
        return self.may_hold_group(node)


def _bound(target: ast.AST) -> list[str]:
    return [node.id for node in ast.walk(target) if isinstance(node, ast.Name)]


def _call_name(call: ast.Call) -> str | None:
    """`kvlint.analysis.provenance.call_name` for `ast`: a call's function's last name."""
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
