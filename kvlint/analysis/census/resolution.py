"""What a name means in a module of the tree the census reads: its top-level binding, imports followed.

Definitions stay deferred (parsing.Deferred) until something asks for their syntax: `binding` answers without
parsing (the layer sieve, may_build.py, reads a definition's text only), `resolve` parses the definition it
lands on. Every module's bytes are charged to the census's budget once, when its bindings are first read.
"""

from __future__ import annotations

import ast

from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.module_bindings import bind, module_path
from kvlint.analysis.census.parsing import Deferred, ModuleTrees

# Imports followed from one name to the module that defines it: past this, a crafted cycle of re-exports.
_MAX_HOPS = 20

Found = tuple[str, str, ast.AST]  # (module, kind, node)


class Resolver:
    """The tree's selected modules, parsed on demand, with their module-level bindings."""

    def __init__(self, texts: dict[str, bytes], budget: Budget, trees: ModuleTrees | None = None):
        self.texts = texts
        self.budget = budget
        self.trees = trees if trees is not None else ModuleTrees(texts)
        self._charged: set[str] = set()  # the modules whose bytes the budget counted
        self._bindings: dict[str, dict[str, tuple[str, ast.AST]]] = {}
        self._resolved: dict[tuple[str, str], Found | None] = {}

    def tree_charged(self, relative: str) -> bool:
        """Whether the module is among the selected ones; its bytes counted against the budget once."""
        data = self.texts.get(relative)
        if data is None:
            return False
        if relative not in self._charged:
            self._charged.add(relative)
            self.budget.spend(len(data), relative)
        return True

    def bindings(self, relative: str) -> dict[str, tuple[str, ast.AST]]:
        """Name → (kind, node): "class"/"function" definitions, "value" assignments, "import" (an ImportFrom
        alias, the module path joined by a tab), "module"; module-level `if`s decided for the default
        platform (an undecided one: both branches, the first binding kept)."""
        if relative in self._bindings:
            return self._bindings[relative]
        found: dict[str, tuple[str, ast.AST]] = {}
        self._bindings[relative] = found
        if self.tree_charged(relative):
            bind(self.trees.statements(relative), found)
        return found

    def binding(self, relative: str, name: str, depth: int = 0) -> Found | None:
        """(module, kind, node) that `name` is bound to in `relative`, imports followed; a definition not
        parsed yet stays a Deferred (a submodule is kind "module" with an empty body)."""
        binding = self.bindings(relative).get(name)
        if binding is None or depth > _MAX_HOPS:
            return None
        kind, node = binding
        if kind != "import":
            return relative, kind, node
        assert isinstance(node, ast.ImportFrom)
        original = next(a.name for a in node.names if (a.asname or a.name) == name)
        source = module_path(self.texts, node.module or "", relative, node.level)
        found = self.binding(source, original, depth + 1) if source is not None else None
        if found is not None:
            return found
        # As Python's import: a name the package does not bind is its submodule (`from vllm.x import linear`).
        submodule = module_path(self.texts, f"{node.module or ''}.{original}".strip("."), relative, node.level)
        return (submodule, "module", ast.Module(body=[], type_ignores=[])) if submodule else None

    def resolve(self, relative: str, name: str) -> Found | None:
        """(module, kind, node) that `name` is bound to in `relative`, imports followed and the definition
        parsed (once per name asked)."""
        if (relative, name) not in self._resolved:
            self._resolved[relative, name] = self._parsed(self.binding(relative, name))
        return self._resolved[relative, name]

    def _parsed(self, found: Found | None) -> Found | None:
        if found is None or not isinstance(found[2], Deferred):
            return found
        module, kind, deferred = found
        statement = self.trees.definition(module, deferred)
        if statement is None:
            return None
        self.bindings(module)[deferred.name] = (kind, statement)
        return module, kind, statement

    def binding_expr(self, relative: str, node: ast.expr) -> Found | None:
        """What a name or a module's attribute (`linear.RowParallelLinear`) is bound to, unparsed."""
        if isinstance(node, ast.Name):
            return self.binding(relative, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = self.binding(relative, node.value.id)
            if owner is not None and owner[1] == "module":
                return self.binding(owner[0], node.attr)
        return None

    def resolve_expr(self, relative: str, node: ast.expr) -> Found | None:
        """What a name or a module's attribute is bound to, its definition parsed."""
        if isinstance(node, ast.Name):
            return self.resolve(relative, node.id)
        return self._parsed(self.binding_expr(relative, node))
