"""Which expressions of a module may hold a KV cache group's spec, read from Python's own syntax tree before
libcst parses the file.

KV101 reports a type test only where `kvlint.analysis.flow.provenance` classifies its subject as a group's spec,
and every such answer starts at an attribute named after the group lists (`kv_cache_groups`) or at a
parameter annotated `KVCacheGroupSpec`, and travels through the module's own bindings (assignments, loops,
`:=`, callers' arguments). This is the same flow with its kinds kept (a group list, a group, a group's spec:
provenance makes a group's spec only of a group, a group only of a list) and every other condition dropped: a
name read in a scope may hold what any binding of that name in that scope or one around it may give
(provenance takes the innermost scope that binds it and the bindings that reach the read); a parameter, a
group or a group's spec that any call of a function so named passes it, by its keyword or at its position
(provenance passes no list through a parameter). It says yes wherever provenance could (tests/test_preparse.py
holds it to that), and no for most type tests vLLM writes (of a layer, a backend's spec, a parameter nothing in
the module passes a group to, a list of groups handed to a helper): such a file is left unparsed by libcst.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterator

from kvlint.analysis.ast_helpers import nodes_under
from kvlint.analysis.vocabulary import GROUP_LIST_ATTRIBUTES

# A parameter so annotated holds a group (provenance's `_classify_param`, by `annotation_name`).
GROUP_ANNOTATION = "KVCacheGroupSpec"
# Calls whose items are their argument's items (provenance's `element_of`).
_ITEMS_PASSED_ON = frozenset({"list", "tuple", "sorted", "reversed", "iter", "set", "enumerate", "zip"})
# What an expression may hold, as bits: provenance's GROUP_LIST, GROUP and GROUP_SPEC.
LIST, GROUP, SPEC = 1, 2, 4
_EVERY = LIST | GROUP | SPEC
# How a site's names get their value: the value itself, an item of it, or a caller's argument (through which
# provenance passes a group or a group's spec, never a list).
_VALUE, _ITEMS, _PASSED = range(3)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# The scopes a name is read in, innermost first: the ids of the comprehensions, functions and module around
# it (provenance's `bindings_of` looks in them in that order; classes and lambdas bind nothing there).
Chain = tuple[int, ...]


# Per module tree: its flow, read once for KV101's sieve and KV102's (weak keys: the trees go with their file).
_FLOWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def group_flow(tree: ast.Module) -> GroupFlow:
    """The module's GroupFlow, built on the first question."""
    flow = _FLOWS.get(tree)
    if flow is None:
        flow = _FLOWS[tree] = GroupFlow(tree)
    return flow


class GroupFlow:
    """What the names of one module may hold — a group list, a group, a group's spec — per scope (a fixed
    point over its bindings). A name read in a scope may hold what a binding of it in that scope or any around
    it may."""

    def __init__(self, tree: ast.Module):
        self.kinds: dict[tuple[int, str], int] = {}  # (scope, name) → the bits it may hold
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
                given = _given(call)  # once per call, not per parameter: a crafted call of many keywords
                for position, parameter in parameters:
                    passed = _passed_to(given, parameter, position)
                    self._sites.extend((_PASSED, argument, chain, [(scope, parameter)]) for argument in passed)
        self._settle()

    def _settle(self) -> None:
        """The fixed point, by a worklist: a site is read again only when a name its value reads gains a kind
        (each (scope, name) gains one at most three times). Passes over every site until none changed cost a
        chain of `a1 = a0`, `a2 = a1`, … its square: 1,000 links 1.3 s."""
        readers: dict[str, list[int]] = {}  # name → the sites whose value reads a name so spelled (any scope)
        for index, (_, source, _, _) in enumerate(self._sites):
            for name in {node.id for node in nodes_under(source) if type(node) is ast.Name}:
                readers.setdefault(name, []).append(index)
        pending = list(range(len(self._sites)))
        queued = bytearray(b"\x01" * len(pending))
        while pending:
            index = pending.pop()
            queued[index] = 0
            how, source, chain, bound = self._sites[index]
            if how == _ITEMS:
                found = self._item_kinds(source, chain)
            else:
                found = self.value_kinds(source, chain) & (_EVERY if how == _VALUE else GROUP | SPEC)
            for name in bound:
                held = self.kinds.get(name, 0)
                if held | found != held:
                    self.kinds[name] = held | found
                    for reader in readers.get(name[1], ()):
                        if not queued[reader]:
                            queued[reader] = 1
                            pending.append(reader)

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
                self._enter(node)
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

    def _enter(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        """A function's parameters: a group where annotated so; what its callers pass, once they are known."""
        parameters = _parameters(function.args)
        for parameter in parameters:
            if _names_group(parameter.annotation):
                self.kinds[id(function), parameter.arg] = GROUP
        positional = len(function.args.posonlyargs) + len(function.args.args)
        self._functions.append(
            (function.name, id(function), [(i if i < positional else None, p.arg) for i, p in enumerate(parameters)])
        )

    def may_hold_group_spec(self, node: ast.AST, chain: Chain) -> bool:
        """Whether provenance could classify `node`, read in the scopes `chain`, as a group's spec (what KV101
        asks of a type test's subject)."""
        return bool(self.value_kinds(node, chain) & SPEC)

    def value_kinds(self, node: ast.AST, chain: Chain) -> int:
        """What provenance could classify `node`, read in the scopes `chain`, as (the bits of its kinds)."""
        if isinstance(node, ast.Attribute):
            if node.attr in GROUP_LIST_ATTRIBUTES:
                return LIST
            # A group's spec only of a group (provenance's `_classify_attribute`).
            return SPEC if node.attr == "kv_cache_spec" and self.value_kinds(node.value, chain) & GROUP else 0
        if isinstance(node, ast.Subscript):
            return GROUP if self.value_kinds(node.value, chain) & LIST else 0  # an item of a list, or nothing
        if isinstance(node, (ast.NamedExpr, ast.Starred)):
            return self.value_kinds(node.value, chain)
        if isinstance(node, ast.Name):
            found = 0
            for scope in chain:
                found |= self.kinds.get((scope, node.id), 0)
            return found
        if isinstance(node, ast.IfExp):
            # As provenance reads a conditional: a group's spec only when each way but a `None` is one
            # (`spec.first_spec if isinstance(spec, UniformTypeKVCacheSpecs) else spec` is a layer's spec).
            ways = [w for w in (node.body, node.orelse) if not (isinstance(w, ast.Constant) and w.value is None)]
            return SPEC if ways and all(self.value_kinds(way, chain) & SPEC for way in ways) else 0
        if isinstance(node, ast.Call) and _call_name(node) == "next":
            found = 0
            for argument in _arguments(node):
                found |= self._item_kinds(argument, chain)
            return found
        return 0

    def _item_kinds(self, node: ast.AST, chain: Chain) -> int:
        """What an item of the iterable `node` (or part of one, destructured) may hold."""
        found = 0
        if isinstance(node, ast.Call):
            if _call_name(node) in _ITEMS_PASSED_ON:
                for argument in _arguments(node):
                    found |= self._item_kinds(argument, chain)
            return found
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self.value_kinds(node.elt, (id(node), *chain))  # its element reads its own loop's names
        if isinstance(node, (ast.List, ast.Tuple)):
            for element in node.elts:
                found |= self.value_kinds(element, chain)
            return found
        if isinstance(node, ast.DictComp):
            return 0
        return GROUP if self.value_kinds(node, chain) & LIST else 0


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


def _given(call: ast.Call) -> tuple[dict[str, ast.AST], list[ast.AST]]:
    """A call's arguments by keyword (the first of a name) and by position (starred arguments are not counted,
    as provenance's `argument_for` does not count them)."""
    keywords: dict[str, ast.AST] = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            keywords.setdefault(keyword.arg, keyword.value)
    return keywords, [argument for argument in call.args if not isinstance(argument, ast.Starred)]


def _passed_to(given: tuple[dict[str, ast.AST], list[ast.AST]], parameter: str, position: int | None) -> list[ast.AST]:
    """What a call (its arguments, `_given`) may pass the parameter: its keyword's value, else the positional
    argument at its position or one before (a method called through an attribute)."""
    keywords, positional = given
    if parameter in keywords:
        return [keywords[parameter]]
    if position is None:
        return []
    return [positional[i] for i in (position, position - 1) if 0 <= i < len(positional)]


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    extra = [p for p in (arguments.vararg, arguments.kwarg) if p is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *extra]


def _names_group(annotation: ast.AST | None) -> bool:
    """Whether an annotation is the group class, as provenance's `annotation_name` reads one: a name, the last
    name of an attribute, or the last dotted name of a string (`Optional[KVCacheGroupSpec]` is none of them)."""
    if isinstance(annotation, ast.Name):
        return annotation.id == GROUP_ANNOTATION
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == GROUP_ANNOTATION
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1].strip() == GROUP_ANNOTATION
    return False
