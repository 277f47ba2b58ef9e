"""Whether a class or function could build a layer at all, read from the names its text mentions: a sieve
before the instantiation walk parses and follows it.

Most of what a model's constructor calls builds no layer (linear layers, norms, rotary embeddings, quantization
helpers, each called hundreds of times with different constant arguments). The walk (instantiation.Program)
can only build a layer through a name in the text it follows: a layer class named, or a class, function or
module-level value it resolves, whose own text it then follows — the constructor's bases (named in its
header), its methods and class attributes (in its own text) and its parameters' defaults included. So a
definition none of whose words is a layer class or resolves to a definition that could build one, by the same
bindings, builds nothing, whatever its caller passes and whichever instance it runs for: the walk is skipped,
and so is its parse. Every word counts (comments, strings, annotations, the methods the walk never follows):
a superset of what the walk reads, so the sieve never skips what the walk would have found.

What the sieve cannot settle in its depth it lets through: the walk then decides, as before.
"""

from __future__ import annotations

import ast
import re

from kvlint.analysis.census.parsing import Deferred
from kvlint.analysis.census.resolution import Resolver

_WORD = re.compile(r"[^\W\d]\w*")
# Definitions followed inside one another by the sieve: past this, "could build" (the walk decides).
_MAX_DEPTH = 60
# Modules one definition names (`linear.X`, `mamba.Y`): vLLM's most is a handful; past this, "could build".
_MAX_MODULES = 16
# What `_mentioned` gives when it cannot tell: a definition that could build a layer.
_ANY = object()


class LayerReach:
    """`could_build(module, node)` for a resolved definition or value (a Deferred, a statement or an
    expression), each answered once per tree: the definitions it mentions are read depth first, and a cycle
    of them (a class naming itself, two helpers calling each other) is settled as one (Tarjan's components)."""

    def __init__(self, layers):
        self._layers = frozenset(layers)
        # The resolver of the question being answered: lent per question, not held (a Program holds this
        # reader; holding the Program back would make a cycle that keeps its syntax trees alive).
        self._resolver: Resolver | None = None
        self._known: dict[tuple[str, int, int], bool] = {}
        # One question's depth-first reading: each definition's visit order, the lowest it reaches back to,
        # and the definitions whose component is not settled yet.
        self._order: dict[tuple[str, int, int], int] = {}
        self._low: dict[tuple[str, int, int], int] = {}
        self._stack: list[tuple[str, int, int]] = []

    def could_build(self, resolver: Resolver, module: str, node: ast.AST | Deferred) -> bool:
        if getattr(node, "name", None) in self._layers:
            return True
        key = _key(module, node)
        if key not in self._known:
            self._order.clear()
            self._low.clear()
            self._resolver = resolver
            try:
                if self._visit(module, node, key, 0):
                    # What is still unsettled reaches the layer found: the path to it, and what reaches the path.
                    self._known.update(dict.fromkeys(self._stack, True))
            finally:
                self._stack.clear()
                self._resolver = None
        return self._known[key]

    def _visit(self, module: str, node, key: tuple[str, int, int], depth: int) -> bool:
        self._order[key] = self._low[key] = len(self._order)
        self._stack.append(key)
        if depth > _MAX_DEPTH:
            return True
        assert self._resolver is not None
        text = self._text(module, node)
        self._resolver.budget.spend(len(text), module)
        words = sorted(set(_WORD.findall(text)))  # sorted: the same reading order on every run
        if not self._layers.isdisjoint(words):
            return True
        for where, target in self._mentioned(module, words):
            if target is _ANY or getattr(target, "name", None) in self._layers:
                return True
            other = _key(where, target)
            if other in self._known:
                if self._known[other]:
                    return True
            elif other not in self._order:
                if self._visit(where, target, other, depth + 1):
                    return True
                self._low[key] = min(self._low[key], self._low[other])
            else:  # still on the stack: a cycle back to it
                self._low[key] = min(self._low[key], self._order[other])
        if self._low[key] == self._order[key]:  # the component's root: none of it reaches a layer
            while True:
                settled = self._stack.pop()
                self._known[settled] = False
                if settled == key:
                    break
        return False

    def _mentioned(self, module: str, words: list[str]):
        """The definitions and values the words are bound to in the module; a word bound to a module
        (`linear.RowParallelLinear`): every word as that module's name too."""
        modules = []
        for word in words:
            found = self._resolver.binding(module, word)  # type: ignore[union-attr]
            if found is None:
                continue
            if found[1] == "module":
                modules.append(found[0])
            else:
                yield found[0], found[2]
        modules = list(dict.fromkeys(modules))
        if len(modules) > _MAX_MODULES:  # every word read in each: a crafted text's cost grows as their product
            yield module, _ANY
            return
        for other in modules:
            for word in words:
                found = self._resolver.binding(other, word)  # type: ignore[union-attr]
                if found is not None and found[1] != "module":
                    yield found[0], found[2]

    def _text(self, module: str, node) -> str:
        """The lines the definition or value spans in its module (decorators included)."""
        if isinstance(node, Deferred):
            first, last = node.first, node.last
        else:
            decorators = getattr(node, "decorator_list", None) or []
            first = min([getattr(node, "lineno", 1), *(d.lineno for d in decorators)])
            last = getattr(node, "end_lineno", None) or first
        return self._resolver.trees.source_lines(module, first, last)  # type: ignore[union-attr]


def _key(module: str, node) -> tuple[str, int, int]:
    if isinstance(node, Deferred):
        return module, node.first, -1
    decorators = getattr(node, "decorator_list", None) or []
    first = min([getattr(node, "lineno", 0), *(d.lineno for d in decorators)])
    # A definition is keyed by its first line (decorators included) as its Deferred is; a value by its place.
    return module, first, -1 if isinstance(node, ast.stmt) else getattr(node, "col_offset", 0)
