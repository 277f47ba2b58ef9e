"""The layer classes a model module constructs by name, itself and through the model modules it imports,
transitively (kvlint.analysis.census): one union per strongly connected component of the import graph, each
module read once, so that a ring of modules importing each other costs its size, not its square."""

from __future__ import annotations

import re
from collections.abc import Callable

from kvlint.analysis.census_budget import Budget

_CALLED_BYTES = re.compile(rb"\b([A-Z]\w*)\(")


class Reachable:
    def __init__(self, texts: dict[str, bytes], names: set[str], imports: Callable[[str], list[str]], budget: Budget):
        self.texts = texts
        self.names = names
        self.imports = imports
        self.budget = budget
        self._edges: dict[str, list[str]] = {}
        self._done: dict[str, frozenset[str]] = {}

    def of(self, start: str) -> frozenset[str]:
        if start not in self._done:
            self._components(start)
        return self._done[start]

    def _targets(self, module: str) -> list[str]:
        if module not in self._edges:
            self._edges[module] = self.imports(module)
            self.budget.spend(len(self._edges[module]) + 1, module)
        return self._edges[module]

    def _components(self, start: str) -> None:
        """Tarjan's algorithm, without recursion; fills _done for every module reached from `start`."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        work: list[tuple[str, list[str], int]] = []

        def enter(module: str) -> None:
            index[module] = low[module] = len(index)
            stack.append(module)
            on_stack.add(module)
            work.append((module, [t for t in self._targets(module) if t not in self._done], 0))

        enter(start)
        while work:
            module, targets, position = work.pop()
            if position < len(targets):
                work.append((module, targets, position + 1))
                target = targets[position]
                if target not in index:
                    enter(target)
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                self._close(module, stack, on_stack)

    def _close(self, root: str, stack: list[str], on_stack: set[str]) -> None:
        component = []
        while True:
            member = stack.pop()
            on_stack.discard(member)
            component.append(member)
            if member == root:
                break
        found: set[str] = set()
        for member in component:
            found |= {name.decode() for name in _CALLED_BYTES.findall(self.texts[member])} & self.names
            for target in self._targets(member):
                found |= self._done.get(target, frozenset())
        frozen = frozenset(found)
        for member in component:
            self._done[member] = frozen
