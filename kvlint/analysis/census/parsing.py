"""One module of the tree parsed for the census, or None: a file Python cannot parse (a syntax error, a NUL byte,
nesting past the parser's or the interpreter's limits, a file too large for memory) builds nothing, and the census
goes on without it — the scan reports that file itself (KV000) where a rule reads it."""

from __future__ import annotations

import ast

_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


def parsed(data: str | bytes, relative: str) -> ast.Module | None:
    try:
        return ast.parse(data, filename=relative)
    except _UNPARSABLE:
        return None


class ModuleTrees:
    """The selected modules' texts, each parsed at most once however many readers ask (the census's
    instantiation, the platform reach and its flags read many of the same model and layer modules)."""

    def __init__(self, texts: dict[str, bytes]):
        self.texts = texts
        self._trees: dict[str, ast.Module | None] = {}
        self._calls: dict[str, dict[int, list[ast.Call]]] = {}

    def tree(self, relative: str) -> ast.Module | None:
        if relative not in self._trees:
            data = self.texts.get(relative)
            self._trees[relative] = parsed(data, relative) if data is not None else None
        return self._trees[relative]

    def calls_at(self, relative: str, line: int) -> list[ast.Call]:
        """The calls of the module that start on `line` (indexed by one walk of the module)."""
        if relative not in self._calls:
            by_line: dict[int, list[ast.Call]] = {}
            tree = self.tree(relative)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.Call):
                    by_line.setdefault(node.lineno, []).append(node)
            self._calls[relative] = by_line
        return self._calls[relative].get(line, [])
